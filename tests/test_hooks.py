"""Hooks run real shell commands and Python callables, and no hook can break a compaction."""

from __future__ import annotations

import asyncio
import json
import os
import select
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from precis.core.errors import HookVeto
from precis.engine.hooks import HookContext, Hooks, PostCompactContext, PreCompactOutcome
from precis.session import adrive, drive

CONTEXT = HookContext(
    trigger="manual", conversation_id="conv-42", custom_instructions="Keep file paths."
)
POST = PostCompactContext(
    trigger="hard_watermark",
    conversation_id="conv-42",
    stats={"context_tokens_before": 9000, "context_tokens_after": 1200, "summarized": 17},
    summary="Done: added precis/hooks.py. Red line: 不许动 legacy/ 目录，只加新模块",
)


def script(tmp_path: Path, name: str, body: str) -> str:
    """Writes a small sh script and returns the command that runs it."""
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return f"sh {shlex.quote(str(path))}"


def run_pre(hooks: Hooks, context: HookContext = CONTEXT) -> PreCompactOutcome:
    """Runs the pre-hooks as an async session does (async hooks included)."""
    return asyncio.run(adrive(hooks.pre_steps(context)))


def run_post(hooks: Hooks, context: PostCompactContext = POST) -> list[str]:
    """Runs the post-hooks as an async session does."""
    return asyncio.run(adrive(hooks.post_steps(context)))


def gone_within(pid: int, seconds: float) -> bool:
    """Whether a process has exited (or was never there) within `seconds`, told by its pidfd.

    SIGKILL is delivered asynchronously, so a killed process may still be on its way out when the
    driver returns; the pidfd turns readable the moment it exits, with no polling. The hooks below
    start `sleep 30`, so a process that was not killed is still there after `seconds`.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], seconds)
        return bool(readable)
    finally:
        os.close(fd)


# --- shell pre-hooks ---------------------------------------------------------------------------


def test_shell_stdout_adds_to_instructions(tmp_path: Path) -> None:
    hook = script(tmp_path, "add.sh", "cat >/dev/null\necho 'Keep the red lines verbatim.'\n")
    outcome = run_pre(Hooks(pre=[hook]))
    assert outcome.instructions == "Keep file paths.\n\nKeep the red lines verbatim."
    assert not outcome.vetoed
    assert outcome.veto_reason is None
    assert outcome.reports == []


def test_instructions_from_several_hooks_join_in_order(tmp_path: Path) -> None:
    first = script(tmp_path, "a.sh", "echo first\n")
    silent = script(tmp_path, "b.sh", "true\n")
    second = script(tmp_path, "c.sh", "printf 'second\\n\\n'\n")
    no_custom = HookContext(trigger="manual", conversation_id="c", custom_instructions=None)
    outcome = run_pre(Hooks(pre=[first, silent, second]), no_custom)
    assert outcome.instructions == "first\n\nsecond"


def test_no_instructions_at_all_is_none(tmp_path: Path) -> None:
    silent = script(tmp_path, "quiet.sh", "cat >/dev/null\n")
    context = HookContext(trigger="manual", conversation_id="c", custom_instructions=None)
    assert run_pre(Hooks(pre=[silent]), context).instructions is None
    assert run_pre(Hooks(), context).instructions is None
    assert run_pre(Hooks(), CONTEXT).instructions == "Keep file paths."


def test_shell_hook_receives_json_on_stdin(tmp_path: Path) -> None:
    seen = tmp_path / "stdin.json"
    hook = f"cat > {shlex.quote(str(seen))}"
    run_pre(Hooks(pre=[hook]))
    payload = json.loads(seen.read_text(encoding="utf-8"))
    assert payload == {
        "hook_event_name": "PreCompact",
        "trigger": "manual",
        "conversation": "conv-42",
        "custom_instructions": "Keep file paths.",
    }


def test_shell_hook_can_parse_stdin_with_python(tmp_path: Path) -> None:
    code = "import json,sys; d=json.load(sys.stdin); print('trigger was ' + d['trigger'])"
    python = "python3" if shutil.which("python3") else shlex.quote(sys.executable)
    hook = f"{python} -c {shlex.quote(code)}"
    outcome = run_pre(Hooks(pre=[hook]), HookContext("turn_limit", "c", None))
    assert outcome.instructions == "trigger was turn_limit"


def test_exit_2_vetoes_with_stderr_as_reason(tmp_path: Path) -> None:
    marker = tmp_path / "after-ran"
    veto = script(tmp_path, "veto.sh", "echo ignored\necho 'user is mid-edit' >&2\nexit 2\n")
    after = f"touch {shlex.quote(str(marker))}; echo later"
    outcome = run_pre(Hooks(pre=[veto, after]))
    assert outcome.vetoed
    assert outcome.veto_reason == "user is mid-edit"
    assert outcome.instructions == "Keep file paths."
    assert len(outcome.reports) == 1
    assert "vetoed" in outcome.reports[0]
    assert "user is mid-edit" in outcome.reports[0]
    assert not marker.exists(), "hooks after a veto must not run"


def test_exit_2_without_stderr_has_a_default_reason(tmp_path: Path) -> None:
    outcome = run_pre(Hooks(pre=["exit 2"]))
    assert outcome.vetoed
    assert outcome.veto_reason
    assert "veto" in outcome.veto_reason


def test_exit_1_is_reported_and_ignored(tmp_path: Path) -> None:
    broken = script(tmp_path, "broken.sh", "echo 'half an instruction'\necho boom >&2\nexit 1\n")
    fine = script(tmp_path, "fine.sh", "echo 'from the good hook'\n")
    outcome = run_pre(Hooks(pre=[broken, fine]))
    assert not outcome.vetoed
    assert outcome.instructions == "Keep file paths.\n\nfrom the good hook"
    assert len(outcome.reports) == 1
    assert "status 1" in outcome.reports[0]
    assert "boom" in outcome.reports[0]
    assert "broken.sh" in outcome.reports[0]


def test_missing_command_is_reported(tmp_path: Path) -> None:
    outcome = run_pre(Hooks(pre=["precis-no-such-command-xyz"]))
    assert not outcome.vetoed
    assert outcome.instructions == "Keep file paths."
    assert len(outcome.reports) == 1


def test_hanging_hook_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hang = script(
        tmp_path,
        "hang.sh",
        f"sleep 30 &\necho $$ $! > {shlex.quote(str(pids))}\nwait\n",
    )
    fine = script(tmp_path, "fine.sh", "echo 'still ran'\n")
    outcome = run_pre(Hooks(pre=[hang, fine], timeout=0.5))
    assert not outcome.vetoed
    assert outcome.instructions == "Keep file paths.\n\nstill ran"
    assert len(outcome.reports) == 1
    assert "timed out" in outcome.reports[0]
    shell_pid, sleep_pid = (int(pid) for pid in pids.read_text().split())
    for pid in (shell_pid, sleep_pid):
        assert gone_within(pid, 10), f"process {pid} survived the timeout"


def test_plain_sleep_hook_times_out(tmp_path: Path) -> None:
    outcome = run_pre(Hooks(pre=["sleep 30"], timeout=0.5))
    assert outcome.reports and "timed out" in outcome.reports[0]
    assert outcome.instructions == "Keep file paths."


# --- Python pre-hooks --------------------------------------------------------------------------


def test_sync_and_async_callables_add_text() -> None:
    seen: list[HookContext] = []

    def sync_hook(context: HookContext) -> str:
        seen.append(context)
        return "from sync"

    async def async_hook(context: HookContext) -> str | None:
        await asyncio.sleep(0)
        return "from async"

    def nothing(context: HookContext) -> None:
        return None

    outcome = run_pre(Hooks(pre=[sync_hook, nothing, async_hook]))
    assert outcome.instructions == "Keep file paths.\n\nfrom sync\n\nfrom async"
    assert outcome.reports == []
    assert seen == [CONTEXT]


def test_callable_and_shell_hooks_mix(tmp_path: Path) -> None:
    shell = script(tmp_path, "s.sh", "echo shell\n")
    outcome = run_pre(Hooks(pre=[lambda _c: "python", shell]))
    assert outcome.instructions == "Keep file paths.\n\npython\n\nshell"


def test_hook_veto_vetoes() -> None:
    ran: list[str] = []

    def first(context: HookContext) -> str:
        return "kept"

    async def veto(context: HookContext) -> str:
        raise HookVeto("tests are running")

    def after(context: HookContext) -> str:
        ran.append("after")
        return "never"

    outcome = run_pre(Hooks(pre=[first, veto, after]))
    assert outcome.vetoed
    assert outcome.veto_reason == "tests are running"
    assert outcome.instructions == "Keep file paths.\n\nkept"
    assert len(outcome.reports) == 1 and "vetoed" in outcome.reports[0]
    assert ran == []


def test_exception_is_reported_and_ignored() -> None:
    def explode(context: HookContext) -> str:
        raise RuntimeError("hook bug")

    async def explode_async(context: HookContext) -> str:
        raise KeyError("missing")

    outcome = run_pre(Hooks(pre=[explode, explode_async, lambda _c: "survivor"]))
    assert not outcome.vetoed
    assert outcome.instructions == "Keep file paths.\n\nsurvivor"
    assert len(outcome.reports) == 2
    assert "RuntimeError" in outcome.reports[0] and "hook bug" in outcome.reports[0]
    assert "explode" in outcome.reports[0]
    assert "KeyError" in outcome.reports[1]


def test_hanging_async_callable_is_cancelled_and_reported() -> None:
    cancelled: list[bool] = []

    async def hang(context: HookContext) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    outcome = run_pre(Hooks(pre=[hang], timeout=0.5))
    assert outcome.instructions == "Keep file paths."
    assert len(outcome.reports) == 1 and "timed out" in outcome.reports[0]
    assert cancelled == [True]


def test_callable_raising_timeout_error_itself_is_a_failure() -> None:
    def raises(context: HookContext) -> str:
        raise TimeoutError("upstream API")

    outcome = run_pre(Hooks(pre=[raises]))
    assert len(outcome.reports) == 1
    assert "TimeoutError" in outcome.reports[0] and "upstream API" in outcome.reports[0]


# --- post hooks --------------------------------------------------------------------------------


def test_shell_post_hook_gets_stats_and_summary(tmp_path: Path) -> None:
    seen = tmp_path / "post.json"
    hook = script(tmp_path, "post.sh", f"cat > {shlex.quote(str(seen))}\n")
    assert run_post(Hooks(post=[hook])) == []
    payload = json.loads(seen.read_text(encoding="utf-8"))
    assert payload == {
        "hook_event_name": "PostCompact",
        "trigger": "hard_watermark",
        "conversation": "conv-42",
        "stats": {"context_tokens_before": 9000, "context_tokens_after": 1200, "summarized": 17},
        "summary": POST.summary,
    }


def test_post_failures_are_reported_not_raised(tmp_path: Path) -> None:
    received: list[PostCompactContext] = []

    def explode(context: PostCompactContext) -> None:
        raise ValueError("disk full")

    async def record(context: PostCompactContext) -> None:
        received.append(context)

    hooks = Hooks(
        post=["echo nope >&2; exit 3", explode, "sleep 30", "exit 2", record], timeout=0.5
    )
    reports = run_post(hooks)
    assert len(reports) == 4
    assert "status 3" in reports[0] and "nope" in reports[0]
    assert "ValueError" in reports[1] and "disk full" in reports[1]
    assert "timed out" in reports[2]
    assert "status 2" in reports[3]  # exit 2 has no veto meaning after the fact
    assert received == [POST]


def test_post_stats_that_are_not_json_are_stringified(tmp_path: Path) -> None:
    seen = tmp_path / "post.json"
    context = PostCompactContext("manual", "c", {"at": Path("/x"), "n": 1}, "s")
    assert run_post(Hooks(post=[f"cat > {shlex.quote(str(seen))}"]), context) == []
    assert json.loads(seen.read_text())["stats"] == {"at": "/x", "n": 1}


# --- construction ------------------------------------------------------------------------------


def test_empty_hooks_are_falsy() -> None:
    assert not Hooks()
    assert not Hooks.from_commands([], [], 5.0)
    assert not Hooks.from_commands(["  "], [""], 5.0)
    assert Hooks(pre=[lambda _c: None])
    assert Hooks(post=[lambda _c: None])
    assert Hooks.from_commands([], ["true"], 5.0)


def test_from_commands_builds_shell_hooks(tmp_path: Path) -> None:
    seen = tmp_path / "post.json"
    hooks = Hooks.from_commands(["echo from-config"], [f"cat > {shlex.quote(str(seen))}"], 5.0)
    assert hooks.timeout == 5.0
    assert run_pre(hooks).instructions == "Keep file paths.\n\nfrom-config"
    assert run_post(hooks) == []
    assert json.loads(seen.read_text())["hook_event_name"] == "PostCompact"


def test_from_commands_takes_a_lone_string_as_one_command() -> None:
    hooks = Hooks.from_commands("echo one", (), 5.0)
    assert hooks.pre == ("echo one",)


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout"):
        Hooks(timeout=0)


# --- the sync driver: what a plain `Session` runs --------------------------------------------


def test_sync_driver_runs_shell_and_plain_hooks_in_order() -> None:
    hooks = Hooks(pre=["echo from-shell", lambda _c: "from-python"])
    outcome = drive(hooks.pre_steps(CONTEXT))
    assert outcome.instructions == "Keep file paths.\n\nfrom-shell\n\nfrom-python"
    assert drive(hooks.pre_steps(CONTEXT)) == outcome  # and again: nothing kept between runs


def test_sync_driver_kills_a_hanging_shell_hook_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hang = script(tmp_path, "hang.sh", f"sleep 30 &\necho $$ $! > {shlex.quote(str(pids))}\nwait\n")
    outcome = drive(Hooks(pre=[hang], timeout=5).pre_steps(CONTEXT))  # room to start under load
    (report,) = outcome.reports
    assert report.endswith("timed out after 5s and was killed")
    # The driver killed the whole group: the shell and the sleep it started both exit.
    assert all(gone_within(int(pid), 10) for pid in pids.read_text().split())


def test_sync_driver_reports_an_async_hook_instead_of_running_it() -> None:
    ran: list[str] = []

    async def async_hook(_c: HookContext) -> str:
        ran.append("ran")
        return "never"

    outcome = drive(Hooks(pre=[async_hook]).pre_steps(CONTEXT))
    assert ran == [] and outcome.instructions == "Keep file paths."
    assert outcome.reports and "needs an AsyncSession" in outcome.reports[0]
