"""The rules every context sent to a model must satisfy, checked as data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from precis.core.messages import Message
from precis.core.types import ChatFormat

ORPHAN_RESULT = "orphan_tool_result"
UNKNOWN_CALL = "unknown_tool_call_id"
DUPLICATE_RESULT = "duplicate_tool_result"
DUPLICATE_CALL = "duplicate_tool_call_id"
MISSING_RESULT = "missing_tool_result"
SYSTEM_NOT_FIRST = "system_not_first"
FIRST_NOT_USER = "first_message_not_user"


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: where (index into the checked list), which rule, and the detail."""

    index: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.rule}: {self.detail}"


def check(
    messages: Sequence[Message],
    chat_format: ChatFormat = "openai",
    *,
    allow_pending: bool = True,
    start: int = 0,
) -> list[Violation]:
    """Return every violation; an empty list means the context may be sent.

    A tool result must directly follow the assistant message that issued its call (other
    results of the same message may sit between), once. Every call needs its result before the
    next non-tool message; call ids are unique within a message (and, for Anthropic, within
    the context); with `allow_pending` the calls of the final assistant turn may still
    await theirs. Anthropic also wants system text only up front and a user message first.
    Indexes count from `start`: where `messages` begin in a longer list.
    """
    out: list[Violation] = []
    seen_calls: set[str] = set()
    open_calls: dict[str, int] = {}  # calls of the current assistant turn still without result
    answered: set[str] = set()
    turn_index: int | None = None  # index of the assistant message whose results may follow

    def close_turn(at: int) -> None:
        for call_id, issued_at in open_calls.items():
            out.append(
                Violation(issued_at, MISSING_RESULT, f"call {call_id!r} has no result before {at}")
            )
        open_calls.clear()

    for i, msg in enumerate(messages, start):
        role = msg.role
        if role == "tool":
            call_id = msg.tool_call_id or ""
            if turn_index is None:
                rule = UNKNOWN_CALL if call_id not in seen_calls else ORPHAN_RESULT
                out.append(Violation(i, rule, f"result for {call_id!r} follows no matching call"))
            elif call_id in answered:
                out.append(Violation(i, DUPLICATE_RESULT, f"second result for {call_id!r}"))
            elif call_id not in open_calls:
                rule = ORPHAN_RESULT if call_id in seen_calls else UNKNOWN_CALL
                out.append(
                    Violation(
                        i, rule, f"result for {call_id!r} is not a call of message {turn_index}"
                    )
                )
            else:
                del open_calls[call_id]
                answered.add(call_id)
            continue
        if open_calls:
            close_turn(i)
        if answered:
            answered.clear()
        turn_index = None
        if role == "assistant" and msg.tool_calls:
            turn_index = i
            for tc in msg.tool_calls:
                # OpenAI accepts an id reused in a later turn; Anthropic wants ids unique.
                if tc.id in open_calls:
                    out.append(
                        Violation(i, DUPLICATE_CALL, f"call id {tc.id!r} twice in one message")
                    )
                    continue
                if tc.id in seen_calls and chat_format == "anthropic":
                    out.append(Violation(i, DUPLICATE_CALL, f"call id {tc.id!r} used again"))
                open_calls[tc.id] = i
                seen_calls.add(tc.id)
    if not allow_pending:
        close_turn(start + len(messages))

    if chat_format == "anthropic":
        out.extend(_anthropic_rules(messages, start))
    if len(out) > 1:
        out.sort(key=lambda v: v.index)
    return out


def _anthropic_rules(messages: Sequence[Message], start: int) -> list[Violation]:
    out: list[Violation] = []
    leading = True
    first_checked = False
    for i, msg in enumerate(messages, start):
        if msg.role == "system":
            if not leading:
                out.append(
                    Violation(i, SYSTEM_NOT_FIRST, "system text after the conversation began")
                )
            continue
        leading = False
        if not first_checked:
            first_checked = True
            if msg.role != "user":
                out.append(Violation(i, FIRST_NOT_USER, f"first message is {msg.role}, not user"))
    return out
