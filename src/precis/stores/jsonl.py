"""JSONL import and export in the OpenAI message format, so conversations move between tools."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from precis.core.errors import ImportLineError, InvalidInput, InvalidMessage
from precis.core.messages import MAX_NESTING, Message, check_message
from precis.core.validity import check
from precis.stores.base import ConversationStore
from precis.stores.formats import FORMATS, Format, anthropic_messages, detect, openai_records

__all__ = ["ImportLineError", "export_jsonl", "import_jsonl"]

# Messages read per history page while exporting, so a long log never sits in memory at once.
EXPORT_PAGE = 1000


def _messages_to_export(
    store: ConversationStore, conversation_id: str, context_only: bool
) -> Iterator[Message]:
    if context_only:
        yield from store.context(conversation_id).messages
        return
    offset = 0
    while True:
        page = store.history(conversation_id, offset=offset, limit=EXPORT_PAGE)
        yield from page
        if len(page) < EXPORT_PAGE:
            return
        offset += len(page)


def export_jsonl(
    store: ConversationStore, conversation_id: str, out: TextIO, *, context_only: bool = False
) -> int:
    """Write one OpenAI-format message per line (the whole log, or only what is in context)."""
    written = 0
    for message in _messages_to_export(store, conversation_id, context_only):
        out.write(json.dumps(message.to_openai(), ensure_ascii=False) + "\n")
        written += 1
    return written


def parse_jsonl(lines: Iterable[str], form: Format = "openai") -> list[Message]:
    """Parse and validate every line first (blank lines skipped), so a bad file imports nothing.

    `form` is the file's shape (see `precis.stores.formats`); `auto` tells it from the lines."""
    if form not in FORMATS:
        raise InvalidInput(f"import format {form!r}: expected one of {', '.join(FORMATS)}")
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ImportLineError(number, f"not JSON: {exc}") from None
        except RecursionError:
            raise ImportLineError(number, f"nested deeper than {MAX_NESTING} levels") from None
    for number, record in records:
        if not isinstance(record, dict):
            raise ImportLineError(number, f"expected an object, got {type(record).__name__}")
    if form == "auto":
        form = detect(records)
    if form in ("anthropic", "claude-code"):
        numbered = anthropic_messages(records, form)
    else:
        numbered = _openai_messages(openai_records(records, form))
    messages = [m for _, m in numbered]
    broken = check(messages)  # a call answered twice or left unanswered: the file is damaged
    if broken:
        first = broken[0]
        raise ImportLineError(numbered[first.index][0], f"{first.rule}: {first.detail}")
    return messages


def _openai_messages(records: Iterable[tuple[int, Any]]) -> list[tuple[int, Message]]:
    out: list[tuple[int, Message]] = []
    issued: set[str] = set()
    for number, data in records:
        try:
            message = check_message(Message.from_openai(data, index=number), number)
        except InvalidMessage as exc:
            raise ImportLineError(number, exc.reason) from None
        if message.role == "tool" and message.tool_call_id not in issued:
            raise ImportLineError(
                number,
                f"tool result for unknown tool_call_id {message.tool_call_id!r} (no earlier call)",
            )
        issued.update(tc.id for tc in message.tool_calls)
        out.append((number, message))
    return out


def import_jsonl(
    store: ConversationStore, conversation_id: str, lines: Iterable[str], form: Format = "openai"
) -> int:
    """Append the messages of a JSONL file in one transaction; return how many were imported."""
    messages = parse_jsonl(lines, form)
    if messages:
        store.append(conversation_id, messages)
    return len(messages)
