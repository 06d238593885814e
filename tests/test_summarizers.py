"""The model-free summarizers: the mock's shape; the extractive brief's facts, size and order."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conformance import REFERENCE_FILES, TRAJECTORY_FILES, trajectory, trajectory_messages

from precis.core.jscompat import utf16_len
from precis.core.messages import KIND_SUMMARY, Message, ToolCall
from precis.summarize.base import Summarizer, SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer
from precis.summarize.mock import MockSummarizer
from precis.summarize.packaging import NO_MESSAGES_SUMMARY
from precis.summarize.transcript import render_transcript


def summarize(summarizer: Summarizer, messages: list[Message], **kw: Any) -> str:
    return summarizer.summarize(SummaryRequest(tuple(messages), **kw))


def extractive(messages: list[Message], **kw: Any) -> str:
    return summarize(ExtractiveSummarizer(), messages, **kw)


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def section(brief: str, heading: str) -> str:
    """The lines under one `## heading` of a brief, joined."""
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", brief, re.M | re.S)
    return match.group(1) if match else ""


# A small session with every kind of fact the brief must keep.
SESSION: list[Message] = [
    Message(role="system", content="You are a coding agent. Always run the tests."),
    Message(
        role="user",
        content=(
            "Move the app's database to port 5433 and fix the failing login test. "
            "Never use npm, use pnpm instead."
        ),
    ),
    Message(
        role="assistant",
        content="Let me look at the config first.",
        tool_calls=(call("c1", "read_file", path="config/settings.py"),),
    ),
    Message(role="tool", tool_call_id="c1", content="DB_PORT = 5432\nDB_HOST = 'localhost'"),
    Message(
        role="assistant",
        content="",
        tool_calls=(
            call(
                "c2",
                "str_replace",
                path="config/database.py",
                old_str="port=5432",
                new_str="port=5433",
            ),
        ),
    ),
    Message(
        role="tool", tool_call_id="c2", content="The file config/database.py has been updated."
    ),
    Message(
        role="assistant",
        content="",
        tool_calls=(call("c3", "bash", command="pytest tests/test_login.py -q"),),
    ),
    Message(
        role="tool",
        tool_call_id="c3",
        content=(
            "F\nE   KeyError: 'session_token'\nFAILED tests/test_login.py::test_login - "
            "KeyError: 'session_token'\n1 failed in 0.12s"
        ),
    ),
    Message(
        role="assistant",
        content="The login view reads session_token before it is set; I'll initialise it first.",
    ),
    Message(
        role="user", content="不要修改测试文件。Also see issue #42 and https://example.com/spec."
    ),
]


# --- MockSummarizer ---------------------------------------------------------------------------


def test_mock_joins_user_prefixes() -> None:
    out = summarize(MockSummarizer(), SESSION)
    assert out == "Move the app | 不要修改测试文件。Als"
    assert MockSummarizer().name == "mock"


def test_mock_reads_an_earlier_summary_raw_text_not_its_json() -> None:
    earlier = Message(
        role="user",
        kind=KIND_SUMMARY,
        content='{"type":"system_alert","message":"Note: hidden"}',
        metadata={"summary": "Earlier: the user wants port 5433."},
    )
    out = summarize(MockSummarizer(), [earlier, *SESSION[1:3]])
    assert out == "Earlier: the | Move the app"


def test_mock_never_answers_empty() -> None:
    assert summarize(MockSummarizer(), []) == NO_MESSAGES_SUMMARY
    only_assistant = [Message(role="assistant", content="hello")]
    assert summarize(MockSummarizer(), only_assistant)


# --- ExtractiveSummarizer: what it keeps ------------------------------------------------------


def test_extractive_keeps_task_red_lines_port_files_and_errors() -> None:
    brief = extractive(SESSION)
    assert ExtractiveSummarizer().name == "extractive"
    assert "Move the app's database to port 5433" in section(brief, "Task")
    constraints = section(brief, "Constraints")
    assert "Never use npm, use pnpm instead." in constraints
    assert "不要修改测试文件" in constraints
    assert "port 5433" in section(brief, "Identifiers")
    assert "#42" in brief and "https://example.com/spec" in brief
    modified = section(brief, "Files modified")
    read = section(brief, "Files read")
    assert "config/database.py" in modified and "config/database.py" not in read
    assert "config/settings.py" in read and "config/settings.py" not in modified
    errors = section(brief, "Errors and fixes")
    assert "KeyError: 'session_token'" in errors
    assert "initialise it first" in errors  # the fix attempt that followed the error
    assert "pytest tests/test_login.py" in section(brief, "Tool activity")


def test_shell_writes_count_as_modified_and_pending_work_as_open() -> None:
    session = [
        Message(role="user", content="Bump the version and regenerate the changelog, please."),
        Message(
            role="assistant",
            content="",
            tool_calls=(
                call("s1", "bash", command="sed -i 's/1.2.3/1.2.4/' pyproject.toml"),
                call("s2", "bash", command="git log --oneline > notes/CHANGES.md"),
                call("s3", "bash", command="cat README.md"),
            ),
        ),
        Message(role="tool", tool_call_id="s1", content=""),
        Message(role="tool", tool_call_id="s2", content=""),
        Message(role="tool", tool_call_id="s3", content="# Demo\nraise ValueError('x')"),
        Message(
            role="assistant",
            content="",
            tool_calls=(
                call(
                    "s4",
                    "TodoWrite",
                    todos=[
                        {"content": "Bump version", "status": "completed"},
                        {"content": "Tag the release", "status": "pending"},
                    ],
                ),
                call("s5", "bash", command="git push origin main"),
            ),
        ),
        Message(role="tool", tool_call_id="s4", content="ok"),
    ]
    brief = extractive(session)
    modified = section(brief, "Files modified")
    assert "pyproject.toml" in modified and "notes/CHANGES.md" in modified
    assert "README.md" in section(brief, "Files read")
    assert "## Errors and fixes" not in brief  # source code shown by `cat` is not an error
    assert "1.2.4" in section(brief, "Identifiers")
    open_items = section(brief, "Open items")
    assert "[pending] Tag the release" in open_items and "Bump version" not in open_items
    assert "awaiting result: bash(git push origin main)" in open_items


def test_extractive_output_is_deterministic() -> None:
    assert extractive(SESSION) == extractive(list(SESSION))
    for path in TRAJECTORY_FILES[:3]:
        messages = trajectory_messages(path)
        assert extractive(messages, clip_chars=1500) == extractive(messages, clip_chars=1500)


def test_extractive_uses_chinese_headings_for_a_chinese_session() -> None:
    session = [
        Message(role="user", content="请把数据库端口改成 5433，不要修改测试文件，必须用 pnpm。"),
        Message(
            role="assistant",
            content="好的。",
            tool_calls=(call("c1", "write_file", path="src/db.py", content="PORT = 5433"),),
        ),
        Message(role="tool", tool_call_id="c1", content="ok"),
    ]
    brief = extractive(session)
    assert brief.startswith("## 任务\n")
    assert "## 约束" in brief and "不要修改测试文件" in brief
    assert "port 5433" in brief
    assert "src/db.py" in section(brief, "已修改文件")


def test_extractive_all_mode_adds_the_current_state() -> None:
    brief = extractive(SESSION, mode="all")
    assert "initialise it first" in section(brief, "Current state")
    assert "## Current state" not in extractive(SESSION)


def test_instructions_only_reorder_sections() -> None:
    instructions = "Focus on the files that were touched. Ignore everything else."
    brief = extractive(SESSION, clip_chars=150, instructions=instructions)
    assert "Focus" not in brief and "Ignore" not in brief
    assert "config/database.py" in brief
    assert "config/database.py" not in extractive(SESSION, clip_chars=150)


def test_an_earlier_summary_carries_its_facts_forward() -> None:
    first = extractive(SESSION[:8], clip_chars=2000)
    earlier = Message(
        role="user",
        kind=KIND_SUMMARY,
        content=json.dumps({"type": "system_alert", "message": "wrapped"}),
        metadata={"summary": first},
    )
    later = [
        earlier,
        Message(role="user", content="Now add a health check endpoint."),
        Message(
            role="assistant",
            content="",
            tool_calls=(call("c9", "write_file", path="app/health.py", content="ok"),),
        ),
        Message(role="tool", tool_call_id="c9", content="File created successfully"),
    ]
    brief = extractive(later, clip_chars=2000)
    assert "Move the app's database to port 5433" in section(brief, "Task")
    assert "Never use npm, use pnpm instead." in section(brief, "Constraints")
    assert "port 5433" in brief
    assert "config/database.py" in section(brief, "Files modified")
    assert "app/health.py" in section(brief, "Files modified")
    assert "KeyError: 'session_token'" in brief
    assert "Now add a health check endpoint." in section(brief, "Requests")


def test_an_unstructured_earlier_summary_still_gives_its_facts() -> None:
    earlier = Message(
        role="user",
        kind=KIND_SUMMARY,
        content="x",
        metadata={"summary": "The user is migrating to Postgres on port 6543. Do not drop data."},
    )
    brief = extractive([earlier, Message(role="user", content="Carry on with the migration.")])
    assert "port 6543" in brief
    assert "Do not drop data." in section(brief, "Constraints")


def test_empty_span_needs_no_brief() -> None:
    assert extractive([]) == NO_MESSAGES_SUMMARY


# --- ExtractiveSummarizer: size -------------------------------------------------------------


@pytest.mark.parametrize("clip", [200, 500, 1000, 4000])
@pytest.mark.parametrize("path", TRAJECTORY_FILES, ids=lambda p: p.stem[:48])
def test_the_clip_is_respected_on_every_trajectory(path: Path, clip: int) -> None:
    brief = extractive(trajectory_messages(path), clip_chars=clip)
    assert 0 < utf16_len(brief) <= clip
    assert brief.startswith("## ")


@pytest.mark.parametrize("clip", [40, 80, 120, 200, 300])
def test_task_and_red_lines_come_first_under_a_tight_clip(clip: int) -> None:
    brief = extractive(SESSION, clip_chars=clip)
    assert utf16_len(brief) <= clip
    headings = re.findall(r"^## (.+)$", brief, re.M)
    assert headings[0] == "Task"
    if clip >= 120:
        assert headings[:2] == ["Task", "Constraints"]
        assert "Never use npm" in brief or "不要修改测试文件" in brief


def test_without_a_clip_the_brief_stays_small() -> None:
    for path in TRAJECTORY_FILES:
        assert utf16_len(extractive(trajectory_messages(path))) <= 4000


def test_non_bmp_text_is_measured_in_utf16_units() -> None:
    session = [Message(role="user", content="Ship it 🚀🚀🚀 " * 40 + "but never on Friday 🚀.")]
    for clip in (50, 101, 333):
        assert utf16_len(extractive(session, clip_chars=clip)) <= clip


# --- ExtractiveSummarizer against Claude Code's own summaries ---------------------------------

_PATH_IN_REFERENCE = re.compile(
    r"(?:[\w.\-]+/)+[\w.\-]+\.\w+|\b[\w\-]+\.(?:ex|exs|heex|js|json|sh|md|lock)\b"
)


def _span_text(messages: list[Message]) -> str:
    return "\n".join(m.content + "".join(c.arguments for c in m.tool_calls) for m in messages)


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: p.stem[:20])
def test_keeps_reference_paths_at_least_as_well_as_a_naive_prefix(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    compaction = data["compactions"][0]
    reference: str = compaction["summary"]
    messages = trajectory_messages(trajectory(f"{data['conversation']}.jsonl"))
    span = messages[: compaction["message_index"]]
    span_text = _span_text(span)
    paths = sorted({p for p in _PATH_IN_REFERENCE.findall(reference) if p in span_text})
    size = utf16_len(reference)

    brief = extractive(span, clip_chars=size)
    naive = render_transcript(span)[:size]
    kept = sum(p in brief for p in paths)
    naive_kept = sum(p in naive for p in paths)
    print(
        f"{data['conversation']}: reference {size} chars, {len(paths)} paths; "
        f"extractive {utf16_len(brief)} chars keeps {kept}, naive prefix keeps {naive_kept}"
    )
    assert utf16_len(brief) <= size
    assert paths and kept >= naive_kept
