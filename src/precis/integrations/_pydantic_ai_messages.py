"""pydantic-ai messages as precis messages and back, for `precis.integrations.pydantic_ai`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from pydantic_ai.messages import (
    CapabilityLoadDeltaPart,
    CompactionPart,
    InstructionBaselinePart,
    InstructionDeltaPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from precis.core.messages import Message, ToolCall
from precis.core.types import Role
from precis.integrations._common import (
    FRAMEWORK,
    KEY,
    PRECIS_KINDS,
    RAW,
    fingerprint,
    shown_differently,
)

NAME = "pydantic-ai"
# Where a message precis made (a summary, a copy shown in part) says what it stands for.
TAG = "precis"
# Parts that record the run's history state rather than say anything to the model.
STATE_PARTS = (
    ToolAvailabilityDeltaPart,
    CapabilityLoadDeltaPart,
    ModelSettingsDeltaPart,
    InstructionDeltaPart,
    InstructionBaselinePart,
)


# --- conversion -------------------------------------------------------------------------------


def _dump(message: ModelMessage) -> dict[str, Any]:
    return cast(dict[str, Any], ModelMessagesTypeAdapter.dump_python([message], mode="json")[0])


def _load(data: dict[str, Any]) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_python([data])[0]


def message_key(message: ModelMessage) -> str:
    """What stays the same about a message once the run has finished filling it in: its kind
    and its parts (timestamps included), without the history state parts."""
    tag = message.metadata.get(TAG) if isinstance(message.metadata, dict) else None
    if isinstance(tag, dict) and isinstance(tag.get("key"), str):
        return str(tag["key"])
    data = _dump(message)
    parts = [p for p, part in zip(data["parts"], message.parts, strict=True) if not _is_state(part)]
    return "sha:" + fingerprint({"kind": data["kind"], "parts": parts})


_STATE_KINDS = frozenset(
    {
        "tool-availability-delta",
        "capability-load-delta",
        "model-settings-delta",
        "instruction-delta",
        "instruction-baseline",
    }
)


def _is_state(part: Any) -> bool:
    return isinstance(part, STATE_PARTS)


def _text(content: Any) -> tuple[str, int]:
    if isinstance(content, str):
        return content, 0
    if isinstance(content, Sequence):
        texts = [c for c in content if isinstance(c, str)]
        return "\n\n".join(texts), len(content) - len(texts)
    return str(content), 0


def _part_message(part: Any, pinned: bool) -> tuple[Role, str, str | None, int, bool]:
    """(role, content, tool_call_id, images, pinned) of one content part of a request."""
    if isinstance(part, ToolReturnPart):
        return "tool", part.model_response_str(), part.tool_call_id, 0, False
    if isinstance(part, RetryPromptPart):  # deprecated, but a run may still hold one
        text = part.model_response()
        if part.tool_name is not None:
            return "tool", text, part.tool_call_id, 0, False
        return "user", text, None, 0, False
    if isinstance(part, SystemPromptPart):
        return "system", part.content, None, 0, pinned
    if isinstance(part, UserPromptPart):
        text, images = _text(part.content)
        return "user", text, None, images, False
    if isinstance(part, RetryFeedbackPart):
        return "user", _text(part.content)[0], None, 0, False
    if isinstance(part, CompactionPart):
        return "user", part.content or "", None, 0, False
    return "user", str(getattr(part, "content", "")), None, 0, False


def to_precis(message: ModelMessage, *, key: str | None = None) -> list[Message]:
    """One pydantic-ai message as precis messages, each with its parts as JSON.

    A response is one assistant message (text, tool calls, thinking as reasoning). A request is
    one message per tool return or prompt part, tool returns first (they answer the response
    before it); state parts travel with the part before them. System prompt parts are pinned.
    """
    key = key or message_key(message)
    data = _dump(message)
    parts_json: list[Any] = data.pop("parts")
    if isinstance(message, ModelResponse):
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.content)
            elif isinstance(part, ThinkingPart):
                thinking.append(part.content)
            elif isinstance(part, ToolCallPart):
                calls.append(ToolCall(part.tool_call_id, part.tool_name, part.args_as_json_str()))
            elif isinstance(part, NativeToolCallPart):
                texts.append(f"[{part.tool_name}] {part.args_as_json_str()}")
            elif isinstance(part, NativeToolReturnPart):
                texts.append(f"[{part.tool_name} returned] {part.model_response_str()}")
        raw = {"message": data, "parts": list(enumerate(parts_json))}
        return [
            Message(
                role="assistant",
                content="\n\n".join(t for t in texts if t),
                tool_calls=tuple(calls),
                reasoning="\n\n".join(t for t in thinking if t),
                metadata={FRAMEWORK: NAME, KEY: key, RAW: raw},
            )
        ]
    groups: list[list[int]] = []
    for i, request_part in enumerate(message.parts):
        if _is_state(request_part) and groups:
            groups[-1].append(i)
        elif groups and all(_is_state(message.parts[j]) for j in groups[-1]):
            groups[-1].append(i)  # leading state parts go with the first content part
        else:
            groups.append([i])
    out: list[Message] = []
    for group in groups:
        content = next((message.parts[j] for j in group if not _is_state(message.parts[j])), None)
        role, text, call_id, images, pinned = (
            _part_message(content, True) if content is not None else ("user", "", None, 0, False)
        )
        raw = {"message": data, "parts": [(j, parts_json[j]) for j in group]}
        out.append(
            Message(
                role=role,
                content=text,
                tool_call_id=call_id,
                images=images,
                pinned=pinned,
                metadata={FRAMEWORK: NAME, KEY: key, RAW: raw},
            )
        )
    return [m for m in out if m.role == "tool"] + [m for m in out if m.role != "tool"]


def _raw_parts(messages: Sequence[Message]) -> list[tuple[int, Any]]:
    parts: list[tuple[int, Any]] = []
    for m in messages:
        parts.extend((int(j), p) for j, p in m.metadata[RAW]["parts"])
    return sorted(parts, key=lambda jp: jp[0])


def original(messages: Sequence[Message]) -> ModelMessage:
    """The pydantic-ai message these stored messages (all of its parts) came from, exactly."""
    data = dict(messages[0].metadata[RAW]["message"])
    data["parts"] = [p for _, p in _raw_parts(messages)]
    return _load(data)


def _summary_part(m: Message) -> CompactionPart:
    """The summary as pydantic-ai's own compaction part, application-written (no provider): a
    model is sent it as a conversation summary; made alike each time, so its digest is stable."""
    return CompactionPart(m.content, metadata={TAG: {"id": m.id, "kind": m.kind}})


def _summary_request(
    m: Message, state_parts: Sequence[ModelRequestPart], conversation_id: str | None = None
) -> ModelRequest:
    return ModelRequest(
        parts=[_summary_part(m), *state_parts],
        metadata={TAG: {"key": m.id, "kind": m.kind}},
        conversation_id=conversation_id,
    )


def _part_digests(message: Message) -> list[str]:
    """Digests of the content parts a stored message holds (its state parts left out)."""
    if message.kind in PRECIS_KINDS:
        raw = _dump(ModelRequest(parts=[_summary_part(message)]))["parts"]
    else:
        raw = [p for _, p in message.metadata.get(RAW, {}).get("parts", [])]
    return [fingerprint(p) for p in raw if p.get("part_kind") not in _STATE_KINDS]


def _shown(group: Sequence[Message], source: ModelMessage | None, complete: bool) -> ModelMessage:
    """The message for a run of view messages from one framework message: the object in hand
    when shown whole, else a copy with only these parts (long tool returns as shown), tagged."""
    if source is not None and complete and not any(shown_differently(m) for m in group):
        return source
    key = group[0].metadata[KEY]
    shortened = {
        int(m.metadata[RAW]["parts"][0][0]): m.content for m in group if shown_differently(m)
    }
    indices = {int(j) for m in group for j, _ in m.metadata[RAW]["parts"]}
    if source is not None and not _is_ours(source):
        parts: list[Any] = []
        for j, part in enumerate(source.parts):
            if j in indices:
                if j in shortened and isinstance(part, ToolReturnPart):
                    part = replace(cast(Any, part), content=shortened[j])
                parts.append(part)
        metadata = {**(source.metadata or {}), TAG: {"key": key}}
        return cast(ModelMessage, replace(cast(Any, source), parts=parts, metadata=metadata))
    data = dict(group[0].metadata[RAW]["message"])
    raw_parts: list[Any] = []
    for j, raw in _raw_parts(group):
        raw_parts.append({**raw, "content": shortened[j]} if j in shortened else raw)
    data["parts"] = raw_parts
    data["metadata"] = {**(data.get("metadata") or {}), TAG: {"key": key}}
    return _load(data)


def _is_ours(message: ModelMessage) -> bool:
    return isinstance(message.metadata, dict) and TAG in message.metadata


def from_precis(
    view: Sequence[Message],
    originals: dict[str, ModelMessage] | None = None,
    *,
    stored: dict[str, tuple[str, ...]] | None = None,
    carried: Sequence[ModelRequestPart] = (),
    conversation_id: str | None = None,
) -> list[ModelMessage]:
    """The view as pydantic-ai messages.

    `originals` maps keys to the messages in hand: one shown whole is returned as that very
    object. `stored` maps keys to the precis ids of all their parts, to tell whole from partial.
    `carried` are state parts of compacted messages, put on the summary request, which belongs
    to `conversation_id`.
    """
    known = originals or {}
    out: list[ModelMessage] = []
    i = 0
    carried_left = list(carried)
    while i < len(view):
        m = view[i]
        if m.kind in PRECIS_KINDS or m.metadata.get(FRAMEWORK) != NAME:
            source = known.get(m.id)
            if source is not None and not carried_left:
                out.append(source)
            else:
                out.append(_summary_request(m, carried_left, conversation_id))
            carried_left = []
            i += 1
            continue
        key = m.metadata[KEY]
        j = i
        while (
            j < len(view) and view[j].metadata.get(KEY) == key and view[j].kind not in PRECIS_KINDS
        ):
            j += 1
        group = view[i:j]
        ids = {g.id for g in group}
        complete = stored is None or set(stored.get(key, ())) <= ids
        out.append(_shown(group, known.get(key), complete))
        i = j
    return out
