"""What an append is refused for: a result that answers no call, or a break of the tool-call
rules, checked against the context's last turn (see `BaseSession._append_steps`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from precis.core.errors import InvalidMessage
from precis.core.messages import KIND_MESSAGE, Message
from precis.core.validity import ORPHAN_RESULT, UNKNOWN_CALL, check
from precis.facts.demos import is_demonstration
from precis.stores.base import ContextTail

__all__ = [
    "AppendCheck",
    "answers_outside",
    "refuse_append",
    "refuse_broken_pairs",
    "task_message",
]


def task_message(context: Sequence[Message]) -> Message | None:
    """The pinned task in context: the newest one `set_task` wrote, else the first user's."""
    tasks = [m for m in context if m.pinned and m.metadata.get("task")]
    return tasks[-1] if tasks else None


class AppendCheck:
    """What a store runs inside an append's transaction, on the tail as it stands there (so no
    concurrent append can slip between the check and the write): refuse a break of the
    tool-call rules; with `pin_task`, pin the first user message that is not a worked
    demonstration of another task when no task is pinned."""

    def __init__(self, messages: list[Message], pin_task: bool) -> None:
        self.messages = messages
        self.pin_task = pin_task
        # The tail it last ran on; None if the store never ran it (a retried key's replay).
        self.tail: ContextTail | None = None

    def __call__(self, tail: ContextTail) -> list[Message]:
        self.tail = tail
        refuse_append(tail.turn, self.messages, tail.start)
        out = list(self.messages)
        if self.pin_task and task_message(tail.pinned) is None:
            for i, m in enumerate(out):
                if (
                    m.role == "user"
                    and m.kind == KIND_MESSAGE
                    and m.content.strip()
                    and not is_demonstration(m.content)  # the request after it is the task
                ):
                    out[i] = replace(m, pinned=True, metadata={**m.metadata, "task": True})
                    break
        return out


def answers_outside(turn: Sequence[Message], messages: Sequence[Message]) -> bool:
    """Whether a tool result among `messages` answers a call that neither the turn nor an
    earlier one of `messages` made: only then does `refuse_append` need the whole context to
    give the same verdict (such a result is refused either way, but named by what came before).
    """
    calls = {tc.id for m in turn for tc in m.tool_calls}
    for m in messages:
        if m.role == "tool" and m.tool_call_id not in calls:
            return True
        calls.update(tc.id for tc in m.tool_calls)
    return False


def refuse_append(context: Sequence[Message], messages: Sequence[Message], start: int = 0) -> None:
    """Refuse an append of `messages` after `context` (which begins at index `start` of the
    whole context) that answers an unknown call or breaks the tool-call rules."""
    known = {tc.id for m in context for tc in m.tool_calls}
    for i, m in enumerate(messages):
        if m.role == "tool" and m.tool_call_id not in known:
            raise InvalidMessage(
                i, f"tool result for unknown tool_call_id {m.tool_call_id!r}", "tool_call_id"
            )
        known.update(tc.id for tc in m.tool_calls)
    refuse_broken_pairs(context, messages, start)


def refuse_broken_pairs(
    context: Sequence[Message], messages: Sequence[Message], start: int = 0
) -> None:
    """Refuse an append that would break the tool-call rules the context already keeps: a call id
    twice in one message, or a call left unanswered when the conversation moves on. A call still
    pending at the very end is fine: its result comes next. `context` may be the end of a
    longer one, from index `start`: indexes in the reason count in the whole."""
    broken = check([*context, *messages], start=start)
    end = start + len(context)
    if any(v.index < end for v in broken):
        # old damage is not this append's
        before = {(v.index, v.rule) for v in check(context, start=start)}
        broken = [v for v in broken if (v.index, v.rule) not in before]
    if broken:
        first = broken[0]
        field = "tool_call_id" if first.rule in (ORPHAN_RESULT, UNKNOWN_CALL) else "tool_calls"
        index = max(first.index - end, 0)
        raise InvalidMessage(index, f"{first.rule}: {first.detail}", field)
