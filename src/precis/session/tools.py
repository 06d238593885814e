"""The tools an agent uses to reach what compaction took out of its context, and their handlers.

`search_history` finds messages by words; `read_original` pages one of them back in, a table of
contents first. Handlers answer every mistake with a message the model can act on, never a raise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from precis.core.errors import UnknownMessage
from precis.core.messages import Message, parse_json
from precis.core.types import ChatFormat
from precis.engine.views import read_section, sections
from precis.stores.base import RecallHit

if TYPE_CHECKING:
    from precis.session._base import BaseSession

DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 50
LINES_PER_SECTION = 50


@dataclass(frozen=True, slots=True)
class ToolParameter:
    """One argument of a tool, enough to write its JSON schema."""

    name: str
    type: Literal["string", "integer"]
    description: str
    required: bool = True
    minimum: int | None = None


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as data; the provider-specific dicts are built fresh on each call."""

    name: str
    description: str
    parameters: tuple[ToolParameter, ...]

    def json_schema(self) -> dict[str, Any]:
        """The arguments as a JSON schema object, the part both providers share."""
        properties: dict[str, Any] = {}
        for p in self.parameters:
            prop: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.minimum is not None:
                prop["minimum"] = p.minimum
            properties[p.name] = prop
        return {
            "type": "object",
            "properties": properties,
            "required": [p.name for p in self.parameters if p.required],
            "additionalProperties": False,
        }

    def openai(self) -> dict[str, Any]:
        """The Chat Completions `tools` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.json_schema(),
            },
        }

    def anthropic(self) -> dict[str, Any]:
        """The Anthropic Messages API `tools` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.json_schema(),
        }


SEARCH_HISTORY = ToolDefinition(
    name="search_history",
    description=(
        "Search this conversation's full history, including messages that were summarized or "
        "dropped from your context. Returns matching message ids with a snippet each; pass an "
        "id to read_original to see the whole message."
    ),
    parameters=(
        ToolParameter("query", "string", "Words to look for, e.g. a file name or an error."),
        ToolParameter(
            "limit",
            "integer",
            f"How many matches to return (default {DEFAULT_SEARCH_LIMIT}, at most "
            f"{MAX_SEARCH_LIMIT}).",
            required=False,
            minimum=1,
        ),
    ),
)

READ_ORIGINAL = ToolDefinition(
    name="read_original",
    description=(
        "Read one message of this conversation in full, as it was first written. Long messages "
        f"come in sections of {LINES_PER_SECTION} lines: without a section you get a table of "
        "contents, then ask for one section by its number (from 1)."
    ),
    parameters=(
        ToolParameter("message_id", "string", "The message id, from search_history or a note."),
        ToolParameter(
            "section",
            "integer",
            "The section number to read, from 1; leave out for the table of contents.",
            required=False,
            minimum=1,
        ),
    ),
)

TOOLS: tuple[ToolDefinition, ...] = (SEARCH_HISTORY, READ_ORIGINAL)


def tool_definitions(chat_format: ChatFormat) -> list[dict[str, Any]]:
    """Both tools in the shape the provider's API expects."""
    if chat_format == "openai":
        return [t.openai() for t in TOOLS]
    if chat_format == "anthropic":
        return [t.anthropic() for t in TOOLS]
    raise ValueError(f"unknown chat format {chat_format!r}; expected 'openai' or 'anthropic'")


class MessageReader(Protocol):
    """The part of a store `read_original` needs."""

    def get(self, conversation_id: str, ids: Sequence[str]) -> list[Message]: ...


class HistorySession(Protocol):
    """The part of a `Session` the handlers need, so this module does not import session.py."""

    @property
    def conversation_id(self) -> str: ...

    @property
    def store(self) -> MessageReader: ...

    def recall(self, query: str, limit: int = 10) -> list[RecallHit]: ...


class _StoreHistory:
    """What the history tools read, straight from the session's store (a blocking call, which an
    async caller runs off its loop)."""

    def __init__(self, session: BaseSession) -> None:
        self.store = session.store
        self.conversation_id = session.conversation_id

    def recall(self, query: str, limit: int = 10) -> list[RecallHit]:
        return self.store.recall(self.conversation_id, query, limit)


def answer_history_tool(session: BaseSession, name: str, arguments: str | Mapping[str, Any]) -> str:
    """Answer `search_history` or `read_original` from the session's store (`handle_tool_call`)."""
    return handle_tool_call(_StoreHistory(session), name, arguments)


class _ArgumentError(Exception):
    """An argument the model got wrong; its text goes back to the model."""


def handle_tool_call(session: HistorySession, name: str, arguments: str | Mapping[str, Any]) -> str:
    """Run one of these tools for the model and return its answer, or an error it can act on."""
    tool = next((t for t in TOOLS if t.name == name), None)
    if tool is None:
        known = ", ".join(t.name for t in TOOLS)
        return f"error: unknown tool {name!r}; available tools: {known}."
    try:
        args = _parse_arguments(tool, arguments)
        if tool is SEARCH_HISTORY:
            return _search_history(session, args)
        return _read_original(session, args)
    except _ArgumentError as exc:
        return f"error: {name}: {exc}"
    except Exception as exc:  # a store failure must reach the model as text, not end the turn
        return f"error: {name} failed: {type(exc).__name__}: {exc}"


def _parse_arguments(tool: ToolDefinition, arguments: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(arguments, str):
        if not arguments.strip():
            raw: Any = {}
        else:
            try:
                raw = parse_json(arguments)
            except json.JSONDecodeError as exc:
                raise _ArgumentError(f"arguments are not valid JSON ({exc.msg})") from None
    else:
        raw = arguments
    if not isinstance(raw, Mapping):
        raise _ArgumentError(f"arguments must be a JSON object, got {type(raw).__name__}")
    known = {p.name: p for p in tool.parameters}
    unexpected = sorted(str(k) for k in raw if k not in known)
    if unexpected:
        raise _ArgumentError(
            f"unexpected argument(s) {', '.join(unexpected)}; expected {', '.join(known)}"
        )
    out: dict[str, Any] = {}
    for p in tool.parameters:
        value = raw.get(p.name)
        if value is None:
            if p.required:
                raise _ArgumentError(f"missing required argument {p.name!r} ({p.type})")
            continue
        out[p.name] = _check_string(p, value) if p.type == "string" else _check_integer(p, value)
    return out


def _check_string(p: ToolParameter, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _ArgumentError(f"argument {p.name!r} must be a non-empty string, got {value!r}")
    return value


def _check_integer(p: ToolParameter, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _ArgumentError(f"argument {p.name!r} must be an integer, got {value!r}")
    if p.minimum is not None and value < p.minimum:
        raise _ArgumentError(f"argument {p.name!r} must be >= {p.minimum}, got {value}")
    return value


def _search_history(session: HistorySession, args: Mapping[str, Any]) -> str:
    query: str = args["query"]
    limit = min(int(args.get("limit", DEFAULT_SEARCH_LIMIT)), MAX_SEARCH_LIMIT)
    hits = session.recall(query, limit)
    if not hits:
        return f"no messages match {query!r}; try other words."
    rows = [f"- {h.id} ({h.role}): {' '.join(h.snippet.split())}" for h in hits]
    head = (
        f"1 message matches {query!r}:"
        if len(hits) == 1
        else f"{len(hits)} messages match {query!r}:"
    )
    return "\n".join([head, *rows, "read_original(message_id) shows one in full."])


def _read_original(session: HistorySession, args: Mapping[str, Any]) -> str:
    message_id: str = args["message_id"].strip()
    section: int | None = args.get("section")
    try:
        [message] = session.store.get(session.conversation_id, [message_id])
    except UnknownMessage:
        return (
            f"error: read_original: no message {message_id!r} in this conversation; "
            "search_history gives valid ids."
        )
    text = original_text(message)
    if not text:
        return f"message {message_id} ({message.role}) is empty."
    if section is None and len(sections(text, lines_per_section=LINES_PER_SECTION)) == 1:
        section = 1  # a short message is cheaper to show than its table of contents
    return read_section(text, section, lines_per_section=LINES_PER_SECTION, message_id=message_id)


def original_text(message: Message) -> str:
    """What `read_original` shows: the content, plus the calls an assistant message made."""
    calls = [f"-> {c.name}({c.arguments})" for c in message.tool_calls]
    return "\n".join([message.content, *calls]) if message.content else "\n".join(calls)
