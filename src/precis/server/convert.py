"""Messages in and out of the API: OpenAI or Anthropic bodies in, OpenAI plus precis fields out,
with the checks a body needs before anything is stored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import HTTPException

from precis.core.errors import InvalidMessage
from precis.core.messages import Message, messages_from_anthropic
from precis.server.models import EventOut
from precis.stores.base import CompactionEvent


def message_out(message: Message) -> dict[str, Any]:
    """OpenAI format plus precis's own fields; precis's id wins over a client-sent one."""
    return {
        **message.to_openai(),
        "id": message.id,
        "kind": message.kind,
        "pinned": message.pinned,
        "created_at": message.created_at,
    }


def event_out(index: int, event: CompactionEvent) -> EventOut:
    return EventOut(
        index=index,
        trigger=event.trigger,
        mode=event.mode,
        stats=dict(event.stats),
        summary_id=event.summary_id,
        at=event.at,
    )


def from_openai(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    messages: list[Message] = []
    for i, item in enumerate(items):
        tool_call_id = item.get("tool_call_id")
        if tool_call_id is not None and not isinstance(tool_call_id, str):
            raise InvalidMessage(i, "tool_call_id must be a string", "tool_call_id")
        messages.append(Message.from_openai(item, index=i))
    return messages


def from_anthropic(
    items: Sequence[Mapping[str, Any]], known_calls: set[str]
) -> tuple[list[Message], list[int]]:
    """Convert one Anthropic message at a time, so every result maps back to its input index.

    A `tool_result` may answer a `tool_use` appended by an earlier request (`known_calls`).
    """
    issued = set(known_calls)
    messages: list[Message] = []
    origin: list[int] = []
    for i, item in enumerate(items):
        try:
            converted = messages_from_anthropic([item], issued=issued)
        except InvalidMessage as exc:
            raise exc.at(i) from None
        for message in converted:
            issued.update(tc.id for tc in message.tool_calls)
        messages += converted
        origin += [i] * len(converted)
    return messages, origin


def check_sizes(messages: Sequence[Message], origin: Sequence[int], limit: int) -> None:
    """One message may not be larger than `limit` characters of text and tool arguments."""
    for message, index in zip(messages, origin, strict=True):
        size = len(message.content) + sum(
            len(tc.arguments) + len(tc.name) for tc in message.tool_calls
        )
        if size > limit:
            raise HTTPException(
                413,
                f"messages[{index}].content: {size} characters, over the limit of {limit}",
            )
