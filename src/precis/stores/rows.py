"""How the SQL backends write a message or a sample as a row and read it back, and the pin
overlay."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from precis.core.messages import Message, ToolCall
from precis.core.types import Role
from precis.stores.samples import PARTS, Sample

# The token columns of a samples row: the reserve, then one per part (stores.samples.PARTS).
SAMPLE_COLUMNS = ("reserved_tokens", *(f"{part}_tokens" for part in PARTS))
SAMPLE_SELECT = (
    "SELECT turn, kind, at, version, in_context, context_window, "
    f"{', '.join(SAMPLE_COLUMNS)} FROM samples WHERE conversation_id = ?"
)
SAMPLE_INSERT = (
    "INSERT INTO samples (conversation_id, turn, kind, at, version, in_context, context_window, "
    f"{', '.join(SAMPLE_COLUMNS)}) VALUES ({', '.join('?' * (7 + len(SAMPLE_COLUMNS)))})"
)

# The columns every message read selects, in the order `message_from_row` expects.
MESSAGE_COLUMNS = (
    "id, role, content, tool_calls, tool_call_id, kind, pinned, metadata, created_at, "
    "reasoning, images, openai_extra"
)
M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
# The columns every message insert writes, in the order `message_values` gives them.
INSERT_COLUMNS = (
    "conversation_id",
    "seq",
    "id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "kind",
    "pinned",
    "metadata",
    "created_at",
    "reasoning",
    "images",
    "openai_extra",
)


def tool_calls_json(calls: Sequence[ToolCall]) -> str:
    return (
        json.dumps([[tc.id, tc.name, tc.arguments] for tc in calls], ensure_ascii=False)
        if calls
        else "[]"
    )


def json_text(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False) if value else "{}"


def tool_calls_from_json(raw: str) -> tuple[ToolCall, ...]:
    if raw == "[]":
        return ()
    return tuple(ToolCall(str(c[0]), str(c[1]), str(c[2])) for c in json.loads(raw))


def _json_object(raw: str) -> dict[str, Any]:
    return {} if raw == "{}" else cast(dict[str, Any], json.loads(raw))


def message_from_row(row: Sequence[Any]) -> Message:
    """A message from a row selected with MESSAGE_COLUMNS."""
    return Message(
        id=row[0],
        role=cast(Role, row[1]),
        content=row[2],
        tool_calls=tool_calls_from_json(row[3]),
        tool_call_id=row[4],
        kind=row[5],
        pinned=bool(row[6]),
        metadata=_json_object(row[7]),
        created_at=row[8],
        reasoning=row[9],
        images=int(row[10]),
        openai_extra=_json_object(row[11]),
    )


def message_values(conversation_id: str, seq: int, m: Message) -> tuple[Any, ...]:
    """A stored message as the values of INSERT_COLUMNS."""
    return (
        conversation_id,
        seq,
        m.id,
        m.role,
        m.content,
        tool_calls_json(m.tool_calls),
        m.tool_call_id,
        m.kind,
        m.pinned,
        json_text(m.metadata),
        m.created_at,
        m.reasoning,
        m.images,
        json_text(m.openai_extra),
    )


def apply_pins(messages: list[Message], pins: Mapping[str, bool]) -> list[Message]:
    """Overlay pin flags set after append: message rows themselves never change."""
    if not pins:
        return messages
    return [
        replace(m, pinned=pins[m.id]) if m.id in pins and pins[m.id] != m.pinned else m
        for m in messages
    ]


def sample_values(conversation_id: str, stored: Sample) -> tuple[Any, ...]:
    """A numbered sample as the values of the SQL store's samples insert."""
    return (
        conversation_id,
        stored.turn,
        stored.kind,
        stored.at,
        stored.version,
        stored.in_context,
        stored.window,
        stored.reserved,
        *(stored.part(name) for name in PARTS),
    )


def sample_from_row(row: Sequence[Any]) -> Sample:
    """A sample from a row selected as the SQL store selects them (turn, kind, at, version,
    in_context, context_window, reserve, then one column per part)."""
    parts = dict(zip(PARTS, (int(value) for value in row[7:]), strict=True))
    return Sample(
        turn=int(row[0]),
        kind=row[1],
        at=str(row[2]),
        version=int(row[3]),
        in_context=int(row[4]),
        window=None if row[5] is None else int(row[5]),
        reserved=int(row[6]),
        **parts,
    )
