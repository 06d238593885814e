"""The message model: exact OpenAI round trips, Anthropic conversion, and refusals that say why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance import TRAJECTORY_FILES, trajectory_as_openai

from precis.core.errors import InvalidMessage
from precis.core.messages import (
    Message,
    ToolCall,
    messages_from_anthropic,
    messages_from_openai,
    messages_to_anthropic,
)


def test_all_trajectories_are_present() -> None:
    assert len(TRAJECTORY_FILES) == 15


@pytest.mark.parametrize("path", TRAJECTORY_FILES, ids=lambda p: p.stem[:60])
def test_openai_round_trip_on_real_trajectories(path: Path) -> None:
    rows = trajectory_as_openai(path)
    for i, row in enumerate(rows):
        assert Message.from_openai(row, index=i).to_openai() == row
    assert [m.to_openai() for m in messages_from_openai(rows)] == rows


@pytest.mark.parametrize(
    "row",
    [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "developer", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:,"}},
            ],
        },
        {"role": "user", "content": "hi", "name": "alice"},
        {"role": "assistant", "content": "x", "reasoning_content": "thinking"},
        {"role": "assistant", "content": "x", "tool_calls": []},
        {"role": "tool", "content": "out", "tool_call_id": "c"},
    ],
)
def test_openai_round_trip_edge_shapes(row: dict[str, Any]) -> None:
    assert Message.from_openai(row).to_openai() == row


def test_list_content_keeps_text_and_counts_images() -> None:
    msg = Message.from_openai(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ],
        }
    )
    assert (msg.content, msg.images, msg.text_parts) == ("a\n\nb", 1, ("a", "b"))


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"role": "wizard", "content": "x"}, "unknown role 'wizard'"),
        ({"content": "x"}, "missing role"),
        ({"role": "tool", "content": "x"}, "needs a non-empty tool_call_id"),
        ({"role": "user", "content": 5}, "content must be a string, a list or null"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            "tool_calls[0] has no id",
        ),
        (
            {"role": "user", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
            "cannot carry tool_calls",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "function": {"name": "f", "arguments": {"x": object()}}}
                ],
            },
            "not JSON-serialisable",
        ),
        ("just text", "expected an object"),
    ],
)
def test_invalid_message_names_index_and_reason(row: Any, reason: str) -> None:
    with pytest.raises(InvalidMessage) as err:
        Message.from_openai(row, index=7)
    assert err.value.index == 7
    assert reason in str(err.value)
    assert str(err.value).startswith("message 7: ")


def test_non_string_arguments_become_compact_json() -> None:
    msg = Message.from_openai(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "f", "arguments": {"q": "端口", "n": 1}},
                }
            ],
        }
    )
    assert msg.tool_calls == (ToolCall("c", "f", '{"q":"端口","n":1}'),)


def test_tool_result_without_call_is_refused_with_its_index() -> None:
    rows = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "content": "x", "tool_call_id": "nope"},
    ]
    with pytest.raises(
        InvalidMessage, match=r"message 1: tool result for unknown tool_call_id 'nope'"
    ):
        messages_from_openai(rows)


def test_anthropic_round_trip() -> None:
    system = "You are terse."
    items = [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "id": "tu1", "name": "ls", "input": {"path": "/repo"}},
                {"type": "tool_use", "id": "tu2", "name": "pwd", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "content": "a.py"},
                {
                    "type": "tool_result",
                    "tool_use_id": "tu2",
                    "content": [{"type": "text", "text": "/repo"}],
                    "is_error": True,
                },
                {"type": "text", "text": "thanks"},
            ],
        },
        {"role": "assistant", "content": "done"},
    ]
    messages = messages_from_anthropic(items, system=system)
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    assert messages[2].tool_calls == (
        ToolCall("tu1", "ls", '{"path":"/repo"}'),
        ToolCall("tu2", "pwd", "{}"),
    )
    assert messages[4].content == "/repo" and messages[4].metadata["is_error"] is True
    back_system, back = messages_to_anthropic(messages)
    assert back_system == system
    assert back[0] == {"role": "user", "content": [{"type": "text", "text": "list files"}]}
    assert back[1]["content"][1] == {
        "type": "tool_use",
        "id": "tu1",
        "name": "ls",
        "input": {"path": "/repo"},
    }
    assert [b["type"] for b in back[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert back[2]["content"][1]["is_error"] is True
    assert len(back) == 4


def test_anthropic_tool_result_without_tool_use_is_refused() -> None:
    with pytest.raises(
        InvalidMessage, match="message 0: block 0: tool_result for unknown tool_use_id 'x'"
    ):
        messages_from_anthropic(
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "x", "content": ""}],
                }
            ]
        )


def test_direct_construction_is_checked() -> None:
    with pytest.raises(InvalidMessage, match="needs a tool_call_id"):
        Message(role="tool", content="x")
    with pytest.raises(InvalidMessage, match="cannot carry tool_calls"):
        Message(role="user", tool_calls=(ToolCall("c", "f", "{}"),))


def test_anthropic_results_may_answer_calls_stored_earlier() -> None:
    later = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu9", "content": "ok"}],
        }
    ]
    (result,) = messages_from_anthropic(later, issued={"tu9"})
    assert (result.role, result.tool_call_id, result.content) == ("tool", "tu9", "ok")
