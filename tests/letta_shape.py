"""Converting letta-code (pi-ai) messages, as in the conformance vectors, to precis messages.

letta's shape: roles `user`, `assistant`, `toolResult`; `content` is a string or a list of parts
`{"type": "text", "text"}`, `{"type": "thinking", "thinking"}`, `{"type": "image", ...}` and
`{"type": "toolCall", "id", "name", "arguments"}` (arguments an object or a string).

The mapping:

- `toolResult` becomes a `tool` message with `tool_call_id` from `toolCallId`; `isError: true`
  also sets `metadata["is_error"]`.
- Text parts: one lone text part (or a string content) becomes a plain string content; more than
  one text part, or any image, goes through `Message.from_openai` as list content, so that
  `Message.text_parts` keeps each part and `Message.images` counts the images.
- Thinking parts become `reasoning`, joined with "\\n\\n" (their position among text parts is lost).
- toolCall arguments: an object becomes compact JSON via `js_json_stringify`; a string is kept
  verbatim; a missing one becomes "{}". The ids of calls whose arguments were strings are listed in
  `metadata["letta"]["string_argument_call_ids"]`, because letta's token estimate measures
  `JSON.stringify(arguments)`, which quotes a string.
- `metadata` is carried over as is (so `metadata["compaction"]["summary"]` marks an earlier summary,
  and such a message gets `kind="summary"`); letta's per-message fields that precis does not model
  (`usage`, `stopReason`, `timestamp`, `toolName`, `api`, `provider`, `model`, `isError`) are kept
  under `metadata["letta"]` with their letta names.
- `id` is kept. A vector message given only as `{"id", "role", "chars"}` (no content) becomes an
  empty message; its `chars` is kept in `metadata["letta"]["chars"]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from precis.core.jscompat import js_json_stringify
from precis.core.messages import KIND_MESSAGE, KIND_SUMMARY, Message

_LETTA_ROLES = {"user": "user", "assistant": "assistant", "toolResult": "tool"}
_LETTA_FIELDS = (
    "usage",
    "stopReason",
    "timestamp",
    "toolName",
    "api",
    "provider",
    "model",
    "isError",
    "chars",
)


def letta_to_message(raw: Mapping[str, Any]) -> Message:
    """One letta message as a precis `Message` (see the module docstring for the mapping)."""
    letta_role = raw.get("role")
    if letta_role not in _LETTA_ROLES:
        raise ValueError(f"unknown letta role {letta_role!r}")
    role = _LETTA_ROLES[letta_role]
    content = raw.get("content")
    parts: list[Mapping[str, Any]] = list(content) if isinstance(content, list) else []

    openai: dict[str, Any] = {"role": role, "content": _openai_content(content, parts)}
    thinking = [str(p.get("thinking", "")) for p in parts if p.get("type") == "thinking"]
    if role == "assistant" and thinking:
        openai["reasoning_content"] = "\n\n".join(thinking)
    calls = [p for p in parts if p.get("type") == "toolCall"]
    if role == "assistant" and calls:
        openai["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": _arguments(call.get("arguments"))},
            }
            for call in calls
        ]
    if role == "tool":
        openai["tool_call_id"] = raw.get("toolCallId")

    message = Message.from_openai(openai, id=str(raw.get("id", "")))

    metadata: dict[str, Any] = dict(raw.get("metadata") or {})
    letta_fields = {key: raw[key] for key in _LETTA_FIELDS if key in raw}
    string_ids = [call["id"] for call in calls if isinstance(call.get("arguments"), str)]
    if string_ids:
        letta_fields["string_argument_call_ids"] = string_ids
    if letta_fields:
        metadata["letta"] = letta_fields
    if raw.get("isError") is True:
        metadata["is_error"] = True
    compaction = metadata.get("compaction")
    is_summary = isinstance(compaction, Mapping) and isinstance(compaction.get("summary"), str)
    return replace(message, metadata=metadata, kind=KIND_SUMMARY if is_summary else KIND_MESSAGE)


def letta_to_messages(raws: list[Mapping[str, Any]]) -> list[Message]:
    """A whole letta history, in order."""
    return [letta_to_message(raw) for raw in raws]


def _openai_content(content: Any, parts: list[Mapping[str, Any]]) -> str | list[dict[str, Any]]:
    """A string when one string suffices, else OpenAI list content of the text and image parts."""
    if isinstance(content, str):
        return content
    texts = [p for p in parts if p.get("type") == "text"]
    images = [p for p in parts if p.get("type") == "image"]
    if len(texts) <= 1 and not images:
        return str(texts[0].get("text", "")) if texts else ""
    return [
        {"type": "text", "text": str(p.get("text", ""))}
        if p.get("type") == "text"
        else {"type": "image"}
        for p in parts
        if p.get("type") in {"text", "image"}
    ]


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return js_json_stringify({} if arguments is None else arguments)
