"""The brief says where the work stands: done (committed, with the hash), in progress, next,
blocked; the identifiers that matter, ranked; errors seen in logs; a brief that uses its budget."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from conformance import trajectory

from precis.core.jscompat import utf16_len
from precis.core.messages import Message, ToolCall
from precis.eval.replay import load_conversation
from precis.facts import Fact, Ledger, carry, extract_facts, fact_present
from precis.summarize.base import SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer
from precis.summarize.guard import apply_guard
from precis.summarize.prompts import ALL_PROMPT, BRIEF_PROMPT, SLIDING_WINDOW_PROMPT


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def bash(call_id: str, command: str, said: str = "") -> Message:
    return Message(
        role="assistant", content=said, tool_calls=(call(call_id, "Bash", command=command),)
    )


def result(call_id: str, text: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=text)


def brief(messages: Sequence[Message], **kw: Any) -> str:
    """The extractive brief; without `clip_chars`, at its default size whatever the span's."""
    return ExtractiveSummarizer().summarize(SummaryRequest(tuple(messages), **kw))


def section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


def line_of(text: str, needle: str) -> str:
    return next((line for line in text.splitlines() if needle in line), "")


SESSION: tuple[Message, ...] = (
    Message(role="user", content="Implement the epic web-abc; subtasks first."),
    bash("c1", "bd show web-abc"),
    result(
        "c1",
        "○ web-abc · Reports epic [● P2 · OPEN]\n\n## Constraints\n"
        "- Never write to the legacy/ tables.\n\nCHILDREN\n"
        "  ↳ ○ web-abc.1: Add the export endpoint ● P2\n"
        "  ↳ ○ web-abc.2: Add the weekly digest ● P2\n"
        "  ↳ ○ web-abc.3: Document the API ● P2",
    ),
    bash("c2", "bd update web-abc.1 --status in_progress"),
    result("c2", "✓ Updated issue: web-abc.1"),
    Message(
        role="assistant",
        content="I'll add `export_rows` to the `ReportsController`.",
        tool_calls=(call("c3", "Edit", file_path="/repo/app/export.py", new_string="x = 1"),),
    ),
    result("c3", "The file /repo/app/export.py has been updated successfully."),
    bash(
        "c4",
        'bd close web-abc.1 && git add -A && git commit -m "feat: export (web-abc.1)" && git push',
    ),
    result(
        "c4",
        "✓ Closed web-abc.1: Closed\n[main 1a2b3c4] feat: export (web-abc.1)\n"
        " 1 file changed, 1 insertion(+)\nTo github.com:o/r.git\n"
        "   0f0f0f0..1a2b3c4  main -> main",
    ),
    bash("c5", "bd update web-abc.2 --status in_progress"),
    result("c5", "✓ Updated issue: web-abc.2"),
    Message(
        role="assistant",
        content="",
        tool_calls=(call("c6", "Write", file_path="/repo/app/digest.py", content="y = 2"),),
    ),
    result("c6", "File created successfully at: /repo/app/digest.py"),
    bash("c7", "pytest -q tests/test_digest.py 2>&1 | tail -3"),
    result(
        "c7",
        "F..\nFAILED tests/test_digest.py::test_week - KeyError: 'week'\n"
        "1 failed, 2 passed in 0.12s",
    ),
)


def test_done_items_carry_their_commit_and_push_and_the_current_item_is_not_saved_yet() -> None:
    text = brief(SESSION, mode="all")
    work = section(text, "Work state")
    assert "web-abc.1 — Add the export endpoint: done, committed 1a2b3c4, pushed" in work
    assert "- Last push: github.com:o/r.git main" in work  # where the push went
    assert "web-abc.2 — Add the weekly digest: in progress, not committed" in work
    assert "(since 1a2b3c4): app/digest.py" in line_of(work, "not committed yet")
    assert "pytest -q tests/test_digest.py → 1 failed, 2 passed in 0.12s" in work
    assert "web-abc.3 — Document the API: open, not started" in work
    # The epic whose sub-items are under way is itself in progress, with how far it got.
    assert "web-abc — Reports epic: in progress" in line_of(work, "web-abc — ")
    assert "1/3" in line_of(work, "web-abc — ")
    # Shown in the order it happened: what is done before what is under way.
    assert work.index("web-abc.1 —") < work.index("web-abc.2 —") < work.index("web-abc.3 —")


def test_the_branch_a_push_set_up_to_track_names_where_later_pushes_went() -> None:
    first = "To github.com:o/r.git\n * [new branch]      feat -> feat\n"
    tracked = first + "branch 'feat' set up to track 'origin/feat'."
    later = "To github.com:o/r.git\n   1a2b3c4..5d6e7f8  feat -> feat"
    messages = (
        Message(role="user", content="Commit and push the export work, please."),
        bash("p1", 'git commit -am "feat: export" && git push -u origin feat'),
        result("p1", f"[feat 1a2b3c4] feat: export\n 1 file changed\n{tracked}"),
        bash("p2", 'git commit -am "fix: export" && git push'),
        result("p2", f"[feat 5d6e7f8] fix: export\n 1 file changed\n{later}"),
    )
    work = section(brief(messages, mode="all"), "Work state")
    assert "- Last push: origin/feat" in work
    assert 'committed 5d6e7f8 "fix: export", pushed' in work


def test_the_issue_the_agent_read_gives_its_rules() -> None:
    text = brief(SESSION)
    assert "Never write to the legacy/ tables." in section(text, "Constraints")


def test_the_newest_state_of_an_item_wins() -> None:
    reopened = (
        *SESSION,
        bash("c8", "bd close web-abc.2 && bd update web-abc.1 --status=in_progress"),
        result("c8", "✓ Closed web-abc.2: Closed\n✓ Updated issue: web-abc.1"),
    )
    work = section(brief(reopened), "Work state")
    assert "web-abc.2 — Add the weekly digest: done, not committed" in work
    first = line_of(work, "web-abc.1 —")
    assert "in progress" in first and ": done" not in first
    assert "last commit 1a2b3c4" in first


def test_a_commit_the_hook_refused_leaves_the_work_unsaved_and_says_why() -> None:
    refused = (
        *SESSION,
        bash("c8", 'git commit -am "feat: digest (web-abc.2)"'),
        result("c8", "Exit code 1\nPre-commit validation failed:\n[CREDO] error: nesting too deep"),
        bash("c9", 'git commit -am "feat: digest (web-abc.2)"'),
        result("c9", "Exit code 1\nPre-commit validation failed:\n[CREDO] error: nesting too deep"),
    )
    work = section(brief(refused), "Work state")
    assert "git commit failed (×2): " in work and "nesting too deep" in work
    assert "in progress, not committed" in line_of(work, "web-abc.2 —")
    assert "1a2b3c4" not in line_of(work, "web-abc.2 —")


def test_a_closed_item_right_after_a_commit_is_in_that_commit() -> None:
    messages = (
        Message(role="user", content="Work through the open issues please."),
        bash("c1", "bd update api-7 --status in_progress"),
        result("c1", "✓ Updated issue: api-7"),
        Message(role="assistant", content="", tool_calls=(call("c2", "Write", file_path="a.py"),)),
        result("c2", "File created successfully at: a.py"),
        bash("c3", 'git commit -am "fix the parser"'),
        result("c3", "[dev 9f8e7d6] fix the parser\n 1 file changed"),
        bash("c4", "bd close api-7"),
        result("c4", "✓ Closed api-7: Closed"),
    )
    work = section(brief(messages), "Work state")
    assert "api-7: done, committed 9f8e7d6" in work


def test_a_todo_list_is_read_whole_and_the_latest_one_wins() -> None:
    def todo(call_id: str, *entries: tuple[str, str]) -> Message:
        todos = [{"content": c, "status": s, "activeForm": c} for c, s in entries]
        return Message(
            role="assistant", content="", tool_calls=(call(call_id, "TodoWrite", todos=todos),)
        )

    messages = (
        Message(role="user", content="Please migrate the settings page to the new form API."),
        todo("t1", ("Read the old form", "in_progress"), ("Port the fields", "pending")),
        result("t1", "Todos have been modified successfully."),
        todo("t2", ("Read the old form", "completed"), ("Port the fields", "in_progress")),
        result("t2", "Todos have been modified successfully."),
    )
    work = section(brief(messages), "Work state")
    assert "[in progress] Port the fields" in work and "[done] Read the old form" in work
    assert "[in progress] Read the old form" not in work  # the latest list replaced the first


def test_a_service_agent_s_actions_are_done_or_failed_with_the_reason() -> None:
    messages = (
        Message(
            role="user", content="Please cancel my reservation ABC123 and refund it to my card."
        ),
        Message(
            role="assistant",
            content="",
            tool_calls=(call("a1", "get_reservation_details", reservation_id="ABC123"),),
        ),
        result("a1", '{"reservation_id": "ABC123", "status": "active"}'),
        Message(
            role="assistant",
            content="",
            tool_calls=(call("a2", "cancel_reservation", reservation_id="ABC123"),),
        ),
        result("a2", '{"reservation_id": "ABC123", "status": "cancelled"}'),
        Message(
            role="assistant",
            content="",
            tool_calls=(call("a3", "send_certificate", user_id="u_1", amount=50),),
        ),
        result("a3", "Error: the user is not eligible for a certificate"),
    )
    work = section(brief(messages), "Work state")
    assert "done: cancel_reservation(reservation_id=ABC123)" in work
    assert "failed: send_certificate(user_id=u_1, amount=50) → Error: the user is not" in work
    assert "get_reservation_details" not in work  # a lookup is no action


def test_records_looked_up_that_no_action_named_yet_are_left() -> None:
    messages: list[Message] = [
        Message(role="user", content="Please downgrade all my business reservations to economy."),
        Message(
            role="assistant",
            content="",
            tool_calls=(call("u1", "get_user_details", user_id="omar_1"),),
        ),
        result("u1", '{"user_id": "omar_1", "reservations": ["JG7FMM", "X7BYG1", "EQ1G6C"]}'),
    ]
    for i, rid in enumerate(("JG7FMM", "X7BYG1", "EQ1G6C")):
        messages += [
            Message(
                role="assistant",
                content="",
                tool_calls=(call(f"g{i}", "get_reservation_details", reservation_id=rid),),
            ),
            result(f"g{i}", json.dumps({"reservation_id": rid, "cabin": "business"})),
        ]
    messages += [
        Message(
            role="assistant",
            content="",
            tool_calls=(
                call("a1", "update_reservation_flights", reservation_id="JG7FMM", cabin="economy"),
            ),
        ),
        result("a1", '{"reservation_id": "JG7FMM", "cabin": "economy"}'),
    ]
    work = section(brief(messages), "Work state")
    assert "looked up, not yet acted on: X7BYG1, EQ1G6C" in work
    assert "omar_1" not in line_of(work, "not yet acted on")  # another kind of record
    assert "JG7FMM" not in line_of(work, "not yet acted on")


def test_a_package_install_is_done_work_and_a_failed_one_says_so() -> None:
    messages = (
        Message(role="user", content="Fix the TimeDelta rounding bug in marshmallow."),
        bash("i1", "pip install -e .[dev]"),
        result("i1", "Obtaining file:///testbed\nSuccessfully installed marshmallow-3.13.0"),
        bash("i2", "cd web && npm install left-pad@9.9.9"),
        result("i2", "Exit code 1\nnpm ERR! code ETARGET\nnpm ERR! notarget No matching version"),
        bash("r1", "python reproduce.py"),
        result("r1", "344"),
    )
    work = section(brief(messages), "Work state")
    assert "done: pip install -e .[dev]" in work
    assert "failed: npm install left-pad@9.9.9" in work
    assert "reproduce.py" not in work  # running a script installs nothing


def test_identifiers_are_ranked_by_what_the_work_used_not_listed_as_printed() -> None:
    uuids = "\n".join(
        f"warning: no cwd for project 019c5242-3fcb-7495-b540-31ad8b29{i:04x}" for i in range(80)
    )
    messages = (
        Message(
            role="user", content="Fix issue #812; the staging URL is https://staging.example.org."
        ),
        bash("c1", "mix test", "Running `mix test` on `ReportsLive` first."),
        result("c1", f"{uuids}\nRunning on port 4003\n3 tests, 0 failures"),
        Message(
            role="assistant", content="The `ReportsLive` mount needs `load_rows/1`; fixing it."
        ),
    )
    idents = section(brief(messages), "Identifiers")
    assert "#812" in idents or "issue 812" in idents
    assert "https://staging.example.org" in idents
    assert "ReportsLive" in idents and "load_rows/1" in idents
    assert "019c5242" not in idents  # UUIDs only a tool printed
    assert "4003" not in idents  # a test run's port


def test_errors_in_a_log_the_agent_read_are_errors_seen() -> None:
    messages = (
        Message(role="user", content="The nightly build broke; find out why please."),
        Message(
            role="assistant",
            content="",
            tool_calls=(call("r1", "Read", file_path="/ci/build.log"),),
        ),
        result(
            "r1",
            "     1→compiling\n     2→ERROR: linker failed: undefined symbol qsort_r\n     3→done",
        ),
        Message(
            role="assistant", content="", tool_calls=(call("r2", "Read", file_path="/repo/app.py"),)
        ),
        result("r2", "     1→class RetryError(Exception):\n     2→    pass"),
        bash("r3", "make 2>&1 | tail -2"),
        result("r3", "raise TimeoutExpired from exc\nsubprocess.TimeoutExpired: make timed out"),
    )
    text = brief(messages)
    errors = section(text, "Errors and fixes")
    assert "linker failed: undefined symbol qsort_r" in errors
    assert "RetryError" not in errors  # only source code named it: what the code defines
    assert "app.py: RetryError" in section(text, "Code read")


def test_error_names_in_the_code_an_edit_shows_back_are_no_errors_seen() -> None:
    shown = "[File: /repo/app.py]\n10:    if value < 0:\n11:        raise ValueError(value)\n"
    messages = (
        Message(role="user", content="Round the totals in app.py, please."),
        Message(
            role="assistant",
            content="",
            tool_calls=(call("e1", "edit", search="return int(x)", replace="return round(x)"),),
        ),
        result("e1", f"Text replaced. Please review the changes.\n{shown}"),
        bash("r1", "python run.py"),
        result("r1", "Traceback (most recent call last):\nKeyError: 'total'"),
    )
    errors = section(brief(messages), "Errors and fixes")
    assert "KeyError" in errors
    assert "ValueError" not in errors  # only the code the edit showed back names it


def test_the_brief_uses_the_room_it_is_given() -> None:
    path = trajectory("spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    span = [Message.from_openai(d, id=f"m{i}") for i, d in enumerate(load_conversation(path))]
    sizes = [utf16_len(brief(span, mode="all", clip_chars=clip)) for clip in (6000, 12000, 30000)]
    assert sizes[0] < sizes[1] < sizes[2]
    for size, clip in zip(sizes, (6000, 12000, 30000), strict=True):
        assert 0.9 * clip <= size <= clip


def test_a_first_brief_is_never_larger_than_half_what_it_replaces() -> None:
    short = (
        Message(role="user", content="Rename the config key timeout to timeout_s in settings.py."),
        Message(role="assistant", content="Renamed it; nothing else refers to the old key."),
    )
    span = sum(len(m.content) for m in short)
    text = brief(short, clip_chars=20000)
    assert utf16_len(text) <= max(600, span // 2)


def test_state_facts_are_facts_the_guard_keeps_and_the_newest_replaces_the_carried() -> None:
    facts = extract_facts(list(SESSION))
    states = [f.text for f in facts if f.kind == "state"]
    assert "web-abc.1: done, committed 1a2b3c4" in states
    assert "web-abc.2: in progress" in states
    # A summary that says it in its own words keeps it; one that drops it gets it back.
    kept = Fact("state", "web-abc.1: done, committed 1a2b3c4", "m1")
    assert fact_present(kept, "Subtask web-abc.1 is finished; its commit is 1a2b3c4.")
    assert not fact_present(kept, "Subtask web-abc.1 is finished.")
    assert not fact_present(kept, "Subtask web-abc.12 is finished; see 1a2b3c4.")
    guarded = apply_guard("The export is in.", Ledger((kept,)), clip_chars=400).text
    assert "State:\n- web-abc.1: done, committed 1a2b3c4" in guarded
    # The ledger carries the newest state of an item, not both.
    old = Fact("state", "web-abc.2: in progress", "m1")
    new = Fact("state", "web-abc.2: done, committed 5e6f7a8", "m9")
    assert [f.text for f in carry(Ledger((old,)), [new]).facts] == [new.text]


def test_the_model_prompts_ask_for_the_work_state_and_the_decisions() -> None:
    for prompt in (SLIDING_WINDOW_PROMPT, ALL_PROMPT):
        assert "**Work state**" in prompt and "commit hash" in prompt
        assert "newest one holds" in prompt and "**Decisions**" in prompt
    assert "newest one holds" in BRIEF_PROMPT


def test_a_rebuilt_brief_replaces_a_carried_state_line_with_the_newer_one() -> None:
    first = brief(SESSION[:7], mode="all")
    assert "web-abc.1 — Add the export endpoint: in progress" in first
    earlier = Message(role="user", content=first, kind="summary", metadata={"summary": first})
    later = (
        earlier,
        bash("d1", "bd close web-abc.1"),
        result("d1", "✓ Closed web-abc.1: Closed"),
    )
    work = section(brief(later, mode="all"), "Work state")
    assert ": done" in line_of(work, "web-abc.1")
    assert "in progress" not in line_of(work, "web-abc.1")
