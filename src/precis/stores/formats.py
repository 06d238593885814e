"""The JSONL shapes `precis import` reads besides OpenAI's, each turned into precis messages.

- `openai`: one chat-completions message per line.
- `trajectory`: the repo's recorded agent runs (`tests/data/trajectories`): OpenAI roles, with
  each tool call flat (`{"id", "name", "arguments"}`), and a last call that may have no result.
- `claude-code`: a Claude Code session log: entries `{"type": "user"|"assistant", "message":
  {"role", "content": [blocks]}}` among others (summaries, snapshots) that are skipped; the
  blocks of one assistant reply, logged one per line under one message id, are joined.
- `anthropic`: one Anthropic Messages API message per line (`tool_use`/`tool_result` blocks;
  images kept as content parts).

`auto` tells them apart by the first line that says which it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from precis.core.errors import ImportLineError, InvalidMessage
from precis.core.messages import Message, check_message, messages_from_anthropic

Format: TypeAlias = Literal["auto", "openai", "trajectory", "claude-code", "anthropic"]
FORMATS: tuple[Format, ...] = ("auto", "openai", "trajectory", "claude-code", "anthropic")
# Content blocks only the Anthropic format has.
ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking"})
# Claude Code log entries that hold a conversation message.
CLAUDE_CODE_MESSAGES = frozenset({"user", "assistant"})

Numbered: TypeAlias = tuple[int, Mapping[str, Any]]


def detect(records: Sequence[Numbered]) -> Format:
    """The format of these records, from the first that is not plain OpenAI."""
    for _, record in records:
        if "message" in record and isinstance(record.get("type"), str):
            return "claude-code"
        content = record.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping)
            and (b.get("type") in ANTHROPIC_BLOCKS or (b.get("type") == "image" and "source" in b))
            for b in content
        ):
            return "anthropic"
        calls = record.get("tool_calls")
        if isinstance(calls, list) and any(
            isinstance(c, Mapping) and "function" not in c and "name" in c for c in calls
        ):
            return "trajectory"
    return "openai"


def openai_records(records: Sequence[Numbered], form: Format) -> list[Numbered]:
    """Trajectory records as OpenAI messages (each flat tool call in a `function` object)."""
    if form != "trajectory":
        return list(records)
    out: list[Numbered] = []
    for number, record in records:
        calls = record.get("tool_calls")
        if isinstance(calls, list):
            record = {**record, "tool_calls": [_nested(c) for c in calls]}
        out.append((number, record))
    return out


def _nested(call: Any) -> Any:
    if not isinstance(call, Mapping) or "function" in call:
        return call
    function = {"name": call.get("name"), "arguments": call.get("arguments")}
    rest = {k: v for k, v in call.items() if k not in ("name", "arguments")}
    return {**rest, "type": "function", "function": function}


def anthropic_messages(records: Sequence[Numbered], form: Format) -> list[tuple[int, Message]]:
    """Anthropic or Claude Code records as messages, each with the line it came from."""
    items = _claude_code_items(records) if form == "claude-code" else list(records)
    out: list[tuple[int, Message]] = []
    issued: set[str] = set()
    for number, item in items:
        try:
            messages = [
                check_message(m, number) for m in messages_from_anthropic([item], issued=issued)
            ]
        except InvalidMessage as exc:
            raise ImportLineError(number, exc.reason) from None
        for message in messages:
            issued.update(c.id for c in message.tool_calls)
            out.append((number, message))
    return out


def _claude_code_items(records: Sequence[Numbered]) -> list[Numbered]:
    """The conversation in a Claude Code log: its user and assistant messages, an assistant
    reply logged over several lines (one message id) joined into one."""
    items: list[Numbered] = []
    last_id: Any = None
    for number, record in records:
        if record.get("type") not in CLAUDE_CODE_MESSAGES:
            continue
        message = record.get("message")
        if not isinstance(message, Mapping):
            raise ImportLineError(number, "a user or assistant entry without a message object")
        role = message.get("role", record.get("type"))
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise ImportLineError(number, "message.content must be text or a list of blocks")
        message_id = message.get("id")
        if role == "assistant" and message_id is not None and message_id == last_id and items:
            joined = items[-1][1]
            items[-1] = (items[-1][0], {**joined, "content": [*joined["content"], *blocks]})
            continue
        last_id = message_id if role == "assistant" else None
        items.append((number, {"role": role, "content": blocks}))
    return items
