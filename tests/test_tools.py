"""The agent-facing history tools: their definitions and their handlers on a real session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from precis.core.messages import Message, ToolCall
from precis.core.tokens import LettaEstimator
from precis.session import Session
from precis.session.tools import READ_ORIGINAL, SEARCH_HISTORY, handle_tool_call, tool_definitions
from precis.stores.sqlite import SQLiteStore
from precis.summarize.mock import MockSummarizer

OUTPUT = "\n".join(
    "pangolin checksum mismatch in vendor/lib.rs" if i == 120 else f"build step {i} ok"
    for i in range(1, 301)
)


def test_openai_definitions() -> None:
    defs = tool_definitions("openai")
    assert [d["function"]["name"] for d in defs] == ["search_history", "read_original"]
    search, read = (d["function"] for d in defs)
    assert all(d["type"] == "function" and d["function"]["description"] for d in defs)
    assert search["parameters"]["type"] == "object"
    assert search["parameters"]["properties"]["query"]["type"] == "string"
    assert search["parameters"]["properties"]["limit"]["type"] == "integer"
    assert search["parameters"]["required"] == ["query"]
    assert read["parameters"]["properties"]["message_id"]["type"] == "string"
    assert read["parameters"]["properties"]["section"]["type"] == "integer"
    assert read["parameters"]["required"] == ["message_id"]
    json.dumps(defs)


def test_anthropic_definitions() -> None:
    defs = tool_definitions("anthropic")
    assert [sorted(d) for d in defs] == [["description", "input_schema", "name"]] * 2
    assert [d["name"] for d in defs] == [SEARCH_HISTORY.name, READ_ORIGINAL.name]
    assert defs[1]["input_schema"] == tool_definitions("openai")[1]["function"]["parameters"]


def test_definitions_are_fresh_copies() -> None:
    tool_definitions("openai")[0]["function"]["parameters"]["required"].append("oops")
    assert tool_definitions("openai")[0]["function"]["parameters"]["required"] == ["query"]
    with pytest.raises(ValueError, match="chat format"):
        tool_definitions("gemini")  # type: ignore[arg-type]


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    session = Session(SQLiteStore(tmp_path / "precis.db"), "c", LettaEstimator(), MockSummarizer())
    session.append(
        Message(role="user", content="Build the project and tell me what fails."),
        Message(
            role="assistant",
            content="Running the build.",
            tool_calls=(ToolCall("call_1", "bash", '{"cmd":"make"}'),),
        ),
        Message(role="tool", content=OUTPUT, tool_call_id="call_1"),
        Message(role="assistant", content="One step failed."),
    )
    yield session
    session.store.close()


def tool_id(session: Session) -> str:
    return next(m.id for m in session.history() if m.role == "tool")


def test_search_finds_the_long_output(session: Session) -> None:
    answer = handle_tool_call(session, "search_history", '{"query": "pangolin"}')
    assert answer.startswith("1 message matches 'pangolin':")
    assert f"- {tool_id(session)} (tool): " in answer
    assert "pangolin checksum mismatch" in answer
    none = handle_tool_call(session, "search_history", {"query": "wombat", "limit": 3})
    assert none.startswith("no messages match 'wombat'")


def test_read_original_gives_contents_then_sections(session: Session) -> None:
    message_id = tool_id(session)
    toc = handle_tool_call(session, "read_original", json.dumps({"message_id": message_id}))
    lines = toc.split("\n")
    assert lines[0] == f"message {message_id}: 300 lines in 6 sections"
    assert lines[1] == "section 1: lines 1-50: build step 1 ok"
    assert lines[3] == "section 3: lines 101-150: build step 101 ok"
    first = handle_tool_call(session, "read_original", {"message_id": message_id, "section": 1})
    header, body = first.split("\n", 1)
    assert header == f"message {message_id}, section 1 of 6 (lines 1-50 of 300):"
    assert body == "\n".join(OUTPUT.split("\n")[:50]) + "\n"
    third = handle_tool_call(session, "read_original", {"message_id": message_id, "section": 3})
    assert "pangolin checksum mismatch in vendor/lib.rs" in third
    pages = [
        handle_tool_call(session, "read_original", {"message_id": message_id, "section": k})
        for k in range(1, 7)
    ]
    assert "".join(p.split("\n", 1)[1] for p in pages) == OUTPUT


def test_read_original_of_a_short_message_shows_it_whole(session: Session) -> None:
    call = next(m for m in session.history() if m.tool_calls)
    answer = handle_tool_call(session, "read_original", {"message_id": call.id})
    assert answer.split("\n")[1:] == ["Running the build.", '-> bash({"cmd":"make"})']


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("search_history", "{not json", "not valid JSON"),
        ("search_history", "[1, 2]", "must be a JSON object"),
        ("search_history", "", "missing required argument 'query'"),
        ("search_history", {"query": ""}, "'query' must be a non-empty string"),
        ("search_history", {"query": 42}, "'query' must be a non-empty string"),
        ("search_history", {"query": "x", "limit": "ten"}, "'limit' must be an integer"),
        ("search_history", {"query": "x", "limit": True}, "'limit' must be an integer"),
        ("search_history", {"query": "x", "limit": 0}, "'limit' must be >= 1"),
        ("search_history", {"q": "x"}, "unexpected argument(s) q"),
        ("read_original", {}, "missing required argument 'message_id'"),
        ("read_original", {"message_id": "msg_nope"}, "no message 'msg_nope'"),
        ("read_original", {"message_id": "x", "section": 1.5}, "'section' must be an integer"),
        ("delete_history", {}, "unknown tool 'delete_history'"),
    ],
)
def test_mistakes_come_back_as_error_text(
    session: Session, name: str, arguments: str | dict[str, object], expected: str
) -> None:
    answer = handle_tool_call(session, name, arguments)
    assert answer.startswith("error:")
    assert expected in answer


def test_section_out_of_range_names_the_valid_range(session: Session) -> None:
    answer = handle_tool_call(
        session, "read_original", {"message_id": tool_id(session), "section": 7}
    )
    assert answer.startswith("error:") and "sections 1 to 6" in answer


def test_a_failing_store_is_reported_not_raised(session: Session) -> None:
    session.store.close()
    answer = handle_tool_call(session, "search_history", {"query": "pangolin"})
    assert answer.startswith("error: search_history")
