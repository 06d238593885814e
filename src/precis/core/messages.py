"""The message model and its converters to and from the OpenAI and Anthropic chat formats."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any, Final, TypedDict, cast

from precis.core.errors import InvalidMessage, MessageTooLarge
from precis.core.types import MessageKind, Role

ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

# Kinds of message precis itself writes into a conversation.
KIND_MESSAGE: Final[MessageKind] = "message"
KIND_SUMMARY: Final[MessageKind] = "summary"
KIND_MARKER: Final[MessageKind] = "marker"
KIND_TASK: Final[MessageKind] = "task"


class SummaryMetadata(TypedDict, total=False):
    """What precis writes in the metadata of a summary or a truncation marker. A reader still
    checks each value's type: a stored message may come from an import or an older version."""

    summary: str  # the summary's own text, without the system_alert JSON around it
    mode: str  # what the plan did (`PlanMode`)
    summarizer: str  # the summarizer's `name`
    phase: str  # the phase that ended, when one did
    ledger: list[dict[str, str]]  # the facts carried forward (`Ledger.to_json`)
    stats: dict[str, Any]  # `CompactionStats.as_dict`
    audit: dict[str, Any]  # what the compaction checked (`engine.audit`)


# OpenAI roles that map onto ours; the original spelling is kept for the round trip.
_ROLE_ALIASES = {"developer": "system"}
_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


# The largest message, in characters of text, tool names and arguments, at every entry point.
MAX_MESSAGE_CHARS = 1_000_000
# How deeply a message may nest objects and lists, at every entry point (library, import, API).
# JSON from real agents stays far below it; past it, encoders and databases start to fail.
MAX_NESTING = 64


# A UTF-16 surrogate code point: alone in a str, it is no UTF-8 text (SQLite, PostgreSQL and
# every JSON encoder writing UTF-8 refuse it).
SURROGATE_RE = re.compile("[\ud800-\udfff]")
# A JSON string, escapes included, or an unterminated one to the end: a pattern that cannot fail
# once it has begun, so a scan with it stays linear on any text.
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]+|\\[\s\S]?)*(?:"|\Z)')
_NOT_BRACKET_RE = re.compile(r"[^\[\]{}]+")


def check_json_value(value: Any, index: int | None) -> None:
    """Refuse, before anything is stored, what some store or encoder would choke on later: nesting
    deeper than MAX_NESTING, NaN or infinity (not JSON), NUL in a string (PostgreSQL refuses it)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InvalidMessage(index, f"nested deeper than {MAX_NESTING} levels")
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidMessage(index, "contains a NUL character")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidMessage(index, f"{item} is not a JSON number")
        elif isinstance(item, Mapping):
            for key, v in item.items():
                stack.append((key, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)


def nested_too_deep(text: str) -> bool:
    """Whether a JSON text nests arrays and objects deeper than MAX_NESTING (brackets inside
    strings aside), read in one linear pass without parsing (a parser recurses once a level)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return False
    brackets = _NOT_BRACKET_RE.sub("", _JSON_STRING_RE.sub("", text))
    return max(accumulate((1 if c in "[{" else -1 for c in brackets), initial=0)) > MAX_NESTING


def parse_json(text: str) -> Any:
    """`json.loads` for text a message carries: nesting past MAX_NESTING is not JSON here (a
    `json.JSONDecodeError`), so neither the parser nor a walk over what it returns can run out of
    stack (RecursionError) on hostile input."""
    if nested_too_deep(text):
        raise json.JSONDecodeError(f"nested deeper than {MAX_NESTING} levels", text, 0)
    return json.loads(text)


def check_message(message: Message, index: int | None) -> Message:
    """A message about to be stored: held to what `from_openai` holds a dict to (no NUL, data
    nested at most MAX_NESTING deep, tool-call arguments included), and every string UTF-8 text
    (a lone surrogate is refused: no store can write it). Pure computation takes surrogates."""
    data = message.to_openai()
    check_json_value(data, index)
    _check_arguments(message.tool_calls, index)
    stack: list[Any] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and (found := SURROGATE_RE.search(item)) is not None:
                code = f"U+{ord(found.group()):04X}"
                raise InvalidMessage(index, f"contains a lone surrogate ({code}), not UTF-8 text")
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return message


def _check_arguments(calls: Sequence[ToolCall], index: int | None) -> None:
    for j, call in enumerate(calls):
        if nested_too_deep(call.arguments):
            where = f"tool_calls[{j}].function.arguments"
            raise InvalidMessage(index, f"{where} nested deeper than {MAX_NESTING} levels", where)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call issued by an assistant message; `arguments` is the JSON text."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One immutable message of a conversation, as precis stores and plans over it."""

    role: Role
    content: str = ""
    id: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    kind: MessageKind = KIND_MESSAGE
    pinned: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    reasoning: str = ""
    images: int = 0
    # Keys of the original OpenAI dict that precis does not model, kept for an exact round trip.
    openai_extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "\x00" in self.content:
            raise InvalidMessage(None, "contains a NUL character", "content")
        size = len(self.content) + sum(len(c.name) + len(c.arguments) for c in self.tool_calls)
        if size > MAX_MESSAGE_CHARS:
            raise MessageTooLarge(
                None, f"{size} characters, over the limit of {MAX_MESSAGE_CHARS}", "content"
            )
        if self.role not in ROLES:
            raise InvalidMessage(None, f"unknown role {self.role!r}", "role")
        if self.tool_calls and self.role != "assistant":
            raise InvalidMessage(
                None, f"a {self.role} message cannot carry tool_calls", "tool_calls"
            )
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidMessage(None, "a tool message needs a tool_call_id", "tool_call_id")

    @property
    def text_parts(self) -> tuple[str, ...]:
        """The text pieces as given: the parts of a list content, else the whole content."""
        raw = self.openai_extra.get("content")
        if isinstance(raw, list):
            return tuple(
                str(p.get("text", ""))
                for p in raw
                if isinstance(p, dict) and p.get("type") in _TEXT_PART_TYPES
            )
        return (self.content,) if self.content else ()

    def with_id(self, message_id: str) -> Message:
        return replace(self, id=message_id)

    @classmethod
    def from_openai(
        cls,
        data: Mapping[str, Any],
        *,
        index: int | None = None,
        id: str = "",
        pinned: bool = False,
        kind: MessageKind = KIND_MESSAGE,
    ) -> Message:
        """Build a message from one OpenAI chat-completions message dict."""
        if not isinstance(data, Mapping):
            raise InvalidMessage(index, f"expected an object, got {type(data).__name__}")
        check_json_value(data, index)
        extra: dict[str, Any] = {
            k: v
            for k, v in data.items()
            if k not in {"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}
        }
        raw_role = data.get("role")
        if not isinstance(raw_role, str):
            raise InvalidMessage(index, "missing role", "role")
        role = _ROLE_ALIASES.get(raw_role, raw_role)
        if role not in ROLES:
            raise InvalidMessage(index, f"unknown role {raw_role!r}", "role")
        if role != raw_role:
            extra["role"] = raw_role

        content, images = _content_from_openai(data.get("content"), index)
        if "content" not in data:
            extra[_ABSENT] = ["content"]
        elif not isinstance(data["content"], str):
            extra["content"] = data["content"]

        tool_calls: tuple[ToolCall, ...] = ()
        if "tool_calls" in data:
            raw_calls = data["tool_calls"]
            if raw_calls is None or raw_calls == []:
                extra["tool_calls"] = raw_calls
            else:
                if role != "assistant":
                    raise InvalidMessage(
                        index, f"a {raw_role} message cannot carry tool_calls", "tool_calls"
                    )
                tool_calls = _tool_calls_from_openai(raw_calls, index)

        tool_call_id: str | None = None
        if role == "tool":
            tcid = data.get("tool_call_id")
            if not isinstance(tcid, str) or not tcid:
                raise InvalidMessage(
                    index, "a tool message needs a non-empty tool_call_id", "tool_call_id"
                )
            tool_call_id = tcid
        elif "tool_call_id" in data:
            extra["tool_call_id"] = data["tool_call_id"]

        reasoning = data.get("reasoning_content")
        if not isinstance(reasoning, str) or not reasoning:
            if "reasoning_content" in data:
                extra["reasoning_content"] = reasoning
            reasoning = ""

        try:
            return cls(
                role=cast(Role, role),
                content=content,
                id=id,
                tool_calls=tool_calls,
                tool_call_id=tool_call_id,
                kind=kind,
                pinned=pinned,
                reasoning=reasoning,
                images=images,
                openai_extra=extra,
            )
        except InvalidMessage as exc:
            raise exc.at(index) from None

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions dict; the inverse of `from_openai`."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
        for key, value in self.openai_extra.items():
            if key == _ABSENT:
                for absent in value:
                    out.pop(absent, None)
            else:
                out[key] = value
        return out


# Key of `openai_extra` listing keys the original dict did not have at all.
_ABSENT = "_precis_absent"


def _content_from_openai(raw: Any, index: int | None) -> tuple[str, int]:
    if raw is None:
        return "", 0
    if isinstance(raw, str):
        return raw, 0
    if isinstance(raw, list):
        texts: list[str] = []
        images = 0
        for j, part in enumerate(raw):
            if not isinstance(part, Mapping):
                raise InvalidMessage(index, f"content part {j} is not an object", f"content[{j}]")
            ptype = part.get("type")
            if ptype in _TEXT_PART_TYPES:
                text = part.get("text")
                if not isinstance(text, str):
                    raise InvalidMessage(
                        index, f"content part {j} has no text string", f"content[{j}]"
                    )
                texts.append(text)
            elif ptype in _IMAGE_PART_TYPES:
                images += 1
        return "\n\n".join(texts), images
    kind = type(raw).__name__
    raise InvalidMessage(index, f"content must be a string, a list or null, not {kind}", "content")


def compact_json(value: Any) -> str:
    """JSON text without spaces and with non-ASCII kept raw, as JavaScript's JSON.stringify."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _tool_calls_from_openai(raw: Any, index: int | None) -> tuple[ToolCall, ...]:
    if not isinstance(raw, list):
        raise InvalidMessage(index, "tool_calls must be a list", "tool_calls")
    calls: list[ToolCall] = []
    for j, call in enumerate(raw):
        if not isinstance(call, Mapping):
            raise InvalidMessage(index, f"tool_calls[{j}] is not an object", f"tool_calls[{j}]")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(index, f"tool_calls[{j}] has no id", f"tool_calls[{j}]")
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            raise InvalidMessage(
                index, f"tool_calls[{j}] has no function object", f"tool_calls[{j}]"
            )
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidMessage(
                index, f"tool_calls[{j}].function has no name", f"tool_calls[{j}].function"
            )
        calls.append(ToolCall(call_id, name, _arguments_text(fn.get("arguments"), index, j)))
    _check_arguments(calls, index)
    return tuple(calls)


def _arguments_text(args: Any, index: int | None, j: int) -> str:
    if isinstance(args, str):
        return args
    if args is None:
        return "{}"
    try:
        return compact_json(args)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(
            index,
            f"tool_calls[{j}].function.arguments is not JSON-serialisable: {exc}",
            f"tool_calls[{j}].function.arguments",
        ) from None


def messages_from_openai(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Convert a whole OpenAI message list, checking that each tool result has its call."""
    out: list[Message] = []
    issued: set[str] = set()
    for i, item in enumerate(items):
        msg = Message.from_openai(item, index=i)
        if msg.role == "tool" and msg.tool_call_id not in issued:
            raise InvalidMessage(
                i,
                f"tool result for unknown tool_call_id {msg.tool_call_id!r} (no earlier call)",
                "tool_call_id",
            )
        issued.update(tc.id for tc in msg.tool_calls)
        out.append(msg)
    return out


# --- Anthropic Messages API -------------------------------------------------------------------


def messages_from_anthropic(
    items: Iterable[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    issued: Iterable[str] = (),
) -> list[Message]:
    """Convert Anthropic messages (`tool_use` / `tool_result` blocks) to precis messages.

    A user message holding tool results becomes one `tool` message per result, in order,
    followed by a user message for any text it also held. `issued` names tool_use ids from
    earlier messages (already stored) that results here may answer.
    """
    out: list[Message] = []
    if system:
        text = system if isinstance(system, str) else _anthropic_text(system, None)
        out.append(Message(role="system", content=text))
    known: set[str] = set(issued)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidMessage(i, f"expected an object, got {type(item).__name__}")
        check_json_value(item, i)
        role = item.get("role")
        content = item.get("content")
        if role not in {"user", "assistant"}:
            raise InvalidMessage(i, f"unknown Anthropic role {role!r}", "role")
        if isinstance(content, str):
            out.append(Message(role=cast(Role, role), content=content))
            continue
        if not isinstance(content, list):
            raise InvalidMessage(i, "content must be a string or a list of blocks", "content")
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        images = 0
        parts: list[dict[str, Any]] = []  # text and images in order, as OpenAI content parts
        for j, block in enumerate(content):
            if not isinstance(block, Mapping):
                raise InvalidMessage(i, f"content block {j} is not an object", f"content[{j}]")
            btype = block.get("type")
            if btype == "text":
                texts.append(str(block.get("text", "")))
                parts.append({"type": "text", "text": texts[-1]})
            elif btype == "thinking":
                thinking.append(str(block.get("thinking", "")))
            elif btype == "image":
                images += 1
                parts.append(_image_part(block.get("source"), i, j))
            elif btype == "tool_use":
                if role != "assistant":
                    raise InvalidMessage(
                        i, f"block {j}: tool_use only in assistant messages", f"content[{j}]"
                    )
                call_id = block.get("id")
                name = block.get("name")
                if not isinstance(call_id, str) or not call_id:
                    raise InvalidMessage(i, f"block {j}: tool_use has no id", f"content[{j}]")
                if not isinstance(name, str) or not name:
                    raise InvalidMessage(i, f"block {j}: tool_use has no name", f"content[{j}]")
                calls.append(ToolCall(call_id, name, _arguments_text(block.get("input"), i, j)))
            elif btype == "tool_result":
                if role != "user":
                    raise InvalidMessage(
                        i, f"block {j}: tool_result only in user messages", f"content[{j}]"
                    )
                use_id = block.get("tool_use_id")
                if not isinstance(use_id, str) or use_id not in known:
                    raise InvalidMessage(
                        i,
                        f"block {j}: tool_result for unknown tool_use_id {use_id!r}",
                        f"content[{j}]",
                    )
                inner = block.get("content", "")
                text = inner if isinstance(inner, str) else _anthropic_text(inner, i)
                meta = {"is_error": True} if block.get("is_error") else {}
                out.append(Message(role="tool", content=text, tool_call_id=use_id, metadata=meta))
            else:
                raise InvalidMessage(
                    i, f"block {j}: unsupported block type {btype!r}", f"content[{j}]"
                )
        known.update(c.id for c in calls)
        if texts or calls or images or thinking:
            out.append(
                Message(
                    role=cast(Role, role),
                    content="\n\n".join(texts),
                    tool_calls=tuple(calls),
                    reasoning="\n\n".join(thinking),
                    images=images,
                    # The images kept as content parts, so the OpenAI form carries them.
                    openai_extra={"content": parts} if images else {},
                )
            )
    return out


def _image_part(source: Any, index: int, j: int) -> dict[str, Any]:
    """An Anthropic image block's source as an OpenAI `image_url` part (base64 as a data URL)."""
    where = f"content[{j}].source"
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "base64":
        media, data = source.get("media_type"), source.get("data")
        if isinstance(media, str) and isinstance(data, str) and media.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
        raise InvalidMessage(index, f"block {j}: a base64 image needs media_type and data", where)
    if kind == "url" and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    raise InvalidMessage(
        index, f"block {j}: image source {kind!r} cannot be kept (base64 or url only)", where
    )


def _anthropic_text(blocks: Any, index: int | None) -> str:
    if not isinstance(blocks, list):
        raise InvalidMessage(index, "expected a list of content blocks", "content")
    return "\n".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"
    )


def messages_to_anthropic(messages: Iterable[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Return `(system, messages)` for the Anthropic Messages API.

    Tool results become `tool_result` blocks of a user message; consecutive messages of the same
    role are merged, as the API requires alternation.
    """
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "system":
            system_parts.append(msg.content)
            continue
        blocks: list[dict[str, Any]] = []
        if msg.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": msg.tool_call_id,
                "content": msg.content,
            }
            if msg.metadata.get("is_error"):
                block["is_error"] = True
            blocks.append(block)
            role = "user"
        else:
            role = msg.role
            if msg.content:
                blocks.append({"type": "text", "text": msg.content})
            for tc in msg.tool_calls:
                blocks.append(
                    {"type": "tool_use", "id": tc.id, "name": tc.name, "input": _tool_input(tc)}
                )
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system_parts) if system_parts else None), out


def _tool_input(call: ToolCall) -> Any:
    try:
        value = parse_json(call.arguments) if call.arguments else {}
    except json.JSONDecodeError:
        return {"_raw_arguments": call.arguments}
    return value if isinstance(value, dict) else {"value": value}
