"""The validity rules, one broken conversation per rule."""

from __future__ import annotations

import pytest

from precis.core.messages import Message, ToolCall
from precis.core.validity import (
    DUPLICATE_CALL,
    DUPLICATE_RESULT,
    FIRST_NOT_USER,
    MISSING_RESULT,
    ORPHAN_RESULT,
    SYSTEM_NOT_FIRST,
    UNKNOWN_CALL,
    check,
)


def user(text: str = "u") -> Message:
    return Message(role="user", content=text)


def call(*ids: str) -> Message:
    return Message(role="assistant", tool_calls=tuple(ToolCall(i, "run", "{}") for i in ids))


def result(i: str) -> Message:
    return Message(role="tool", content="r", tool_call_id=i)


def rules(messages: list[Message], **kw: object) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in check(messages, **kw)]  # type: ignore[arg-type]


def test_valid_parallel_calls() -> None:
    assert check([user(), call("a", "b"), result("b"), result("a"), user()]) == []


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([user(), result("x")], [(1, UNKNOWN_CALL)]),
        ([user(), call("a"), result("a"), user(), result("a")], [(4, ORPHAN_RESULT)]),
        (
            [user(), call("a"), user("summary"), result("a")],
            [(1, MISSING_RESULT), (3, ORPHAN_RESULT)],
        ),
        ([user(), call("a"), result("a"), result("a")], [(3, DUPLICATE_RESULT)]),
        ([user(), call("a"), result("b")], [(2, UNKNOWN_CALL)]),
        ([user(), call("a", "a"), result("a")], [(1, DUPLICATE_CALL)]),
        ([user(), call("a", "b"), result("a"), user()], [(1, MISSING_RESULT)]),
    ],
)
def test_each_rule(messages: list[Message], expected: list[tuple[int, str]]) -> None:
    assert rules(messages) == expected


def test_pending_call_at_the_end() -> None:
    messages = [user(), call("a")]
    assert check(messages) == []
    assert rules(messages, allow_pending=False) == [(1, MISSING_RESULT)]


def test_reused_call_id_across_turns_is_openai_ok_but_not_anthropic() -> None:
    messages = [user(), call("a"), result("a"), call("a"), result("a")]
    assert check(messages) == []
    assert rules(messages, chat_format="anthropic") == [(3, DUPLICATE_CALL)]


def test_anthropic_layout_rules() -> None:
    messages = [
        Message(role="system", content="s"),
        call("a"),
        result("a"),
        Message(role="system", content="late"),
    ]
    assert rules(messages, chat_format="anthropic") == [(1, FIRST_NOT_USER), (3, SYSTEM_NOT_FIRST)]


def test_violation_text_names_place_and_rule() -> None:
    (v,) = check([user(), result("zz")])
    assert str(v) == "message 1: unknown_tool_call_id: result for 'zz' follows no matching call"
