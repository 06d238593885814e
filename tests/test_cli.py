"""The `precis` command as a user runs it, in a throwaway home (in-process; a few subprocesses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conformance import trajectory
from run_cli import run_precis

from precis.core.errors import CompactionError, ContextOverflow
from precis.core.tokens import LettaEstimator
from precis.engine.compactor import CompactionStats
from precis.engine.settings import CompactionSettings
from precis.providers.mock import MockProvider, estimate_prompt_tokens
from precis.session import Session
from precis.session.agent import MAX_OVERFLOW_RETRIES, Agent
from precis.stores import MemoryStore
from precis.summarize.mock import MockSummarizer

COMPACTION_PREFIX = "⇣ compacted ("
TURN_TEXT = (
    "turn {n}: please review the deployment checklist for the payments service, check the "
    "database port 5433 settings and tell me what is still missing before release 2.{n}"
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_demo_compacts_once_down_to_the_low_watermark_and_recalls_the_port(home: Path) -> None:
    result = run_precis(home, "demo", subprocess=True)
    lines = result.stdout.splitlines()
    # One compaction frees room for the rest of the 17 turns (letta's policy took two or more).
    assert sum(line.startswith(COMPACTION_PREFIX) for line in result.stderr.splitlines()) == 1
    assert any(
        line.startswith("original message msg_") and "5433" in line and "5432" in line
        for line in lines
    )
    assert not home.exists(), "the demo must not touch the configured home"


def test_red_line_demo_keeps_the_red_line_through_every_compaction(home: Path) -> None:
    result = run_precis(home, "demo", "--scenario", "red-line")
    steps = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert len(steps) >= 5
    assert all("red line in context: yes" in line for line in steps)
    assert any("Made progress on the exporter." in line for line in steps)  # it was bad
    assert "red line present after every one: yes" in result.stdout
    assert result.stderr.count(COMPACTION_PREFIX) == len(steps)


def test_chat_compact_context_recall_export_round_trip(home: Path) -> None:
    for n in range(1, 7):
        chat = run_precis(home, "--summarizer", "mock", "chat", "-p", TURN_TEXT.format(n=n))
        assert chat.stdout.startswith("Noted: turn")

    compact = run_precis(home, "--summarizer", "mock", "compact", "--mode", "sliding_window")
    stats_line, *summary = compact.stdout.splitlines()
    stats = json.loads(stats_line)
    assert stats["trigger"] == "manual"
    assert stats["messages_count_after"] < stats["messages_count_before"] == 12
    assert stats["context_tokens_after"] < stats["context_tokens_before"]
    assert "".join(summary).strip()
    assert compact.stderr.count(COMPACTION_PREFIX) == 1
    assert "(manual): 12 → " in compact.stderr

    context = json.loads(run_precis(home, "context", "--json").stdout)
    assert len(context) == stats["messages_count_after"]
    # The first user message is the task: pinned, it leads the context; the summary follows.
    assert context[0]["pinned"] and context[0]["content"] == TURN_TEXT.format(n=1)
    assert context[1]["kind"] == "summary" and context[1]["role"] == "user"
    for item in context:
        assert {"role", "content", "id", "kind", "pinned", "tokens"} <= item.keys()
        assert isinstance(item["tokens"], int) and item["tokens"] > 0

    history = json.loads(run_precis(home, "history", "--json").stdout)
    originals = [m for m in history if m["kind"] == "message"]
    assert len(originals) == 12
    second = originals[2]
    assert second["content"] == TURN_TEXT.format(n=2)
    assert second["id"] not in {m["id"] for m in context}

    recall = run_precis(home, "recall", "release 2.2", "--limit", "3").stdout
    assert second["id"] in recall

    exported = [json.loads(line) for line in run_precis(home, "export").stdout.splitlines()]
    assert [m["content"] for m in exported if m["role"] == "user"][:6] == [
        TURN_TEXT.format(n=n) for n in range(1, 7)
    ]
    in_context = run_precis(home, "export", "--context").stdout.splitlines()
    assert len(in_context) == len(context)

    # What was exported imports back into another conversation, whole.
    dump = home / "dump.jsonl"
    dump.write_text(
        "\n".join(json.dumps(m) for m in exported if m["role"] != "system"), encoding="utf-8"
    )
    imported = run_precis(home, "-c", "copy", "import", str(dump))
    assert "imported" in imported.stdout
    copy = json.loads(run_precis(home, "-c", "copy", "history", "--json").stdout)
    assert [m["content"] for m in copy] == [m["content"] for m in exported]


def test_compact_on_an_empty_conversation_is_one_clear_line(home: Path) -> None:
    result = run_precis(home, "compact", check=False)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "no messages" in lines[0] and "nothing to compact" in lines[0]


def test_recall_with_fts_syntax_characters_does_not_crash(home: Path) -> None:
    run_precis(home, "chat", "-p", "our database port is 5433")
    for query in ('"', "*", "(", 'port "5433* (', "NEAR(a b)", "a OR", ")"):
        result = run_precis(home, "recall", query, check=False)
        assert result.returncode == 0, (query, result.stderr)
    assert "5433" in run_precis(home, "recall", '"5433*').stdout


def test_import_of_a_malformed_line_names_it_and_imports_nothing(home: Path) -> None:
    bad = home.parent / "bad.jsonl"
    bad.write_text(
        '{"role": "user", "content": "first"}\n'
        '{"role": "assistant", "content": "second"}\n'
        '{"role": "user", "content": \n'
        '{"role": "user", "content": "fourth"}\n',
        encoding="utf-8",
    )
    result = run_precis(home, "import", str(bad), check=False)
    assert result.returncode == 1
    assert "line 3" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # Nothing imported, and no empty conversation left behind either.
    missing = run_precis(home, "history", "--json", check=False)
    assert missing.returncode == 1 and "conversation 'default' not found" in missing.stderr


def test_interactive_chat_reads_turns_until_eof(home: Path) -> None:
    turns = "\n".join(TURN_TEXT.format(n=n) for n in range(24)) + "\n"
    result = run_precis(home, "--context-window", "1000", "chat", stdin=turns)
    assert result.stdout.count("model> Noted: turn") == 24
    assert "compacted (context_window_limit)" in result.stderr
    history = json.loads(run_precis(home, "--context-window", "1000", "history", "--json").stdout)
    assert len([m for m in history if m["role"] == "user" and m["kind"] == "message"]) == 24


def test_openai_provider_without_a_model_is_a_usage_error(home: Path) -> None:
    result = run_precis(home, "--provider", "openai", "chat", "-p", "hi", check=False)
    assert result.returncode == 2
    assert "--provider openai needs --model" in result.stderr


def test_bad_options_exit_2_without_a_traceback(home: Path) -> None:
    assert (
        run_precis(home, "compact", "--mode", "bogus", check=False, subprocess=True).returncode == 2
    )
    assert run_precis(home, "--context-window", "0", "context", check=False).returncode == 2
    assert run_precis(home, "--summarizer", "nope", "context", check=False).returncode == 2
    missing = run_precis(home, "import", str(home / "missing.jsonl"), check=False)
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def _session_with_turns(turns: int, context_window: int | None) -> Session:
    session = Session(
        MemoryStore(),
        "agent",
        LettaEstimator(),
        MockSummarizer(),
        CompactionSettings(context_window=context_window),
    )
    for n in range(1, turns + 1):
        session.append(
            {"role": "user", "content": TURN_TEXT.format(n=n)},
            {"role": "assistant", "content": f"Noted: turn {n}"},
        )
    return session


def test_agent_compacts_and_retries_when_the_model_overflows() -> None:
    session = _session_with_turns(8, context_window=None)
    prompt_tokens = estimate_prompt_tokens(session.prompt())
    seen: list[CompactionStats] = []
    agent = Agent(
        session, MockProvider(prompt_tokens), on_compaction=seen.append, history_tools=False
    )

    reply, compactions = agent.turn("and the port again?")

    assert reply == "Noted: and the port again?"
    assert compactions and compactions == seen
    assert {s.trigger for s in compactions} == {"context_window_overflow"}
    last = session.context()[-1]
    assert last.role == "assistant" and last.metadata["usage"]["total_tokens"] > 0
    assert len(session.history()) == 8 * 2 + 2 + len(compactions)


def test_agent_gives_up_after_three_overflow_retries() -> None:
    session = _session_with_turns(20, context_window=None)
    agent = Agent(session, MockProvider(1), history_tools=False)
    with pytest.raises((ContextOverflow, CompactionError)):
        agent.turn("hello")
    assert len(session.events()) <= MAX_OVERFLOW_RETRIES


def test_agent_compacts_before_dispatch_when_over_the_threshold() -> None:
    session = _session_with_turns(12, context_window=400)
    assert session.needs_compaction()
    _, compactions = Agent(session, MockProvider(400), history_tools=False).turn("next step?")
    # Twelve turns in a 400-token window are far past the hard watermark: truncate first.
    assert compactions[0].trigger == "hard_watermark" and compactions[0].mode == "truncate"


def test_eval_replays_strategies_and_plots(home: Path, tmp_path: Path) -> None:
    path = str(trajectory("tau-bench__gpt-4o-airline.top5_longest__task2_trial1.jsonl"))
    plot = tmp_path / "composition.svg"
    result = run_precis(
        home,
        "eval",
        path,
        "-s",
        "letta",
        "-s",
        "extractive+guard",
        "--window",
        "4000",
        "--json",
        "--plot",
        str(plot),
    )
    report = json.loads(result.stdout)
    assert {r["strategy"] for r in report["runs"]} == {"letta", "extractive+guard"}
    assert all(r["violations"] == 0 for r in report["runs"])
    assert plot.read_text(encoding="utf-8").startswith("<?xml")
    assert 'class="marker"' in plot.read_text(encoding="utf-8")
    png = run_precis(home, "eval", path, "--plot", str(tmp_path / "x.png"), check=False)
    assert png.returncode == 2 and "--plot" in png.stderr and ".svg" in png.stderr
    bad = run_precis(home, "eval", path, "-s", "magic", check=False)
    assert bad.returncode != 0 and "magic" in bad.stderr


def test_eval_reference_needs_a_trajectories_folder(home: Path, tmp_path: Path) -> None:
    for args in (("--reference",), ("--reference", "--trajectories", str(tmp_path))):
        result = run_precis(home, "eval", *args, check=False)
        assert result.returncode == 2
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("precis: error: "), result.stderr
    assert "--trajectories DIR" in run_precis(home, "eval", "--reference", check=False).stderr


def test_eval_of_a_malformed_conversation_is_one_line_exit_2(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{oops\n', encoding="utf-8")
    result = run_precis(home, "eval", str(bad), "-s", "letta", check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"precis: invalid input: {bad}:2: not JSON")
