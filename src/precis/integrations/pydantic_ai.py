"""precis for pydantic-ai: `PrecisCapability`, and `precis_history_processor` for `ProcessHistory`.

    sessions = Sessions(store, settings=CompactionSettings(context_window=8000))
    agent = Agent(model, capabilities=[PrecisCapability(sessions)])
    agent = Agent(model, capabilities=[ProcessHistory(precis_history_processor(sessions))])

Each pydantic-ai conversation (`RunContext.conversation_id`: the `conversation_id` given to
`agent.run`, else the one on `message_history`, else a new one per run) is its own precis
conversation, so one agent serves many users at once.

Before every model request the new messages are stored as originals in the precis conversation,
a compaction runs when a trigger fires, and the model gets the view: pinned parts, the summary
(a `ModelRequest` whose metadata names it), the kept messages. Messages shown whole are the very
objects the run holds, so the trailing request keeps its fields and `run_id`; a message shown in
part (a long tool return head+tail, some parts compacted) is a copy tagged in its metadata. The
history state parts of compacted messages (`ToolAvailabilityDeltaPart` and the other deltas and
baselines) ride on the summary request, so the run's record of revealed tools stays whole. Each
call recognises its own summary and copies, so running before every request is idempotent.

The capability also counts the request's instructions and tool definitions in the budget and,
with `history_tools=True`, gives the agent `search_history` and `read_original`.
`pip install 'precis-context[pydantic-ai]'`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.messages import (
    CapabilityLoadDeltaPart,
    CompactionPart,
    InstructionBaselinePart,
    InstructionDeltaPart,
    InstructionPart,
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
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import Tool, ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from precis.core.errors import InvalidInput
from precis.core.messages import Message, ToolCall
from precis.core.types import Role
from precis.integrations._common import (
    FRAMEWORK,
    KEY,
    PRECIS_KINDS,
    RAW,
    Entry,
    Flow,
    Mirror,
    Sessions,
    Turn,
    aanswer_history_tool,
    fingerprint,
    shown_differently,
    tool_schemas,
)
from precis.session import adrive

__all__ = [
    "PrecisCapability",
    "from_precis",
    "precis_history_processor",
    "precis_toolset",
    "to_precis",
]

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


# --- the capability and the processor ---------------------------------------------------------


def _tool_dicts(definitions: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {"name": d.name, "description": d.description or "", "parameters": d.parameters_json_schema}
        for d in definitions
    ]


def conversation_of(ctx: RunContext[Any]) -> str:
    """The run's conversation, as pydantic-ai resolved it; refused if it has none."""
    if not ctx.conversation_id:
        raise InvalidInput("precis: this pydantic-ai run has no conversation_id")
    return ctx.conversation_id


class _Processor:
    """Stores, compacts and views each run's messages in the precis session of its conversation;
    one serves every conversation (what it keeps per conversation is on that thread's mirror)."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        # Keys of the message objects seen, by identity, so a message is keyed once.
        self._keys: dict[int, tuple[weakref.ref[Any], str]] = {}

    def key(self, message: ModelMessage) -> str:
        ident = id(message)
        hit = self._keys.get(ident)
        if hit is not None and hit[0]() is message:
            return hit[1]
        key = message_key(message)
        keys = self._keys

        def forget(ref: weakref.ref[Any]) -> None:
            if keys.get(ident, (None,))[0] is ref:
                del keys[ident]

        self._keys[ident] = (weakref.ref(message, forget), key)
        return key

    def entries(
        self, mirror: Mirror, messages: Sequence[ModelMessage]
    ) -> tuple[list[Entry], dict[str, Any]]:
        entries: list[Entry] = []
        originals: dict[str, ModelMessage] = {}
        for message in messages:
            key = self.key(message)
            originals.setdefault(key, message)
            make: Callable[[], Sequence[Message]] = (
                list if _is_ours(message) else partial(_new_parts, mirror, message, key)
            )
            entries.append(Entry(key, make))
        return entries, originals

    def _flow(
        self,
        mirror: Mirror,
        messages: Sequence[ModelMessage],
        system: str | None = None,
        compact: bool = True,
        force: bool = False,
    ) -> Flow[tuple[Turn, dict[str, Any]]]:
        history = yield from mirror.load()
        if mirror.parts is None:
            mirror.parts = {d for m in history for d in _part_digests(m)}
        entries, originals = self.entries(mirror, messages)
        turn: Turn = yield from mirror.flow(entries, system=system, compact=compact, force=force)
        return turn, originals

    async def store(self, ctx: RunContext[Any], messages: Sequence[ModelMessage]) -> None:
        mirror = self.sessions.mirror(conversation_of(ctx))
        async with mirror.alock:
            await adrive(self._flow(mirror, messages, compact=False))

    async def process(
        self,
        ctx: RunContext[Any],
        messages: list[ModelMessage],
        *,
        system: str | None = None,
        tools: Sequence[ToolDefinition] | None = None,
        force: bool = False,
    ) -> tuple[list[ModelMessage], Turn]:
        """The view as the run's messages, and the turn (the system prompt as the session has
        it, the compactions it ran); with `force`, compacted now whatever the triggers say."""
        mirror = self.sessions.mirror(conversation_of(ctx))
        if tools is not None:
            mirror.session.tools = list(_tool_dicts(tools))
        async with mirror.alock:
            turn, originals = await adrive(self._flow(mirror, messages, system, force=force))
        shown = {m.metadata.get(KEY, m.id) for m in turn.view}
        carried = [
            part
            for message in messages
            if originals.get(self.key(message)) is message and self.key(message) not in shown
            for part in message.parts
            if _is_state(part)
        ]
        result = from_precis(
            turn.view,
            originals,
            stored=mirror.stored,
            carried=carried,
            conversation_id=ctx.conversation_id,
        )
        last = messages[-1] if messages else None
        if (
            isinstance(last, ModelRequest)
            and not last.parts
            and (not result or result[-1] is not last)
        ):
            result.append(last)  # an empty request (`agent.compact_history`'s) stores nothing
        for message in result:  # a copy or summary made now is known next time by identity
            self.key(message)
        return result, turn


def _new_parts(mirror: Mirror, message: ModelMessage, key: str) -> list[Message]:
    """The precis messages of a framework message, less the parts already stored (pydantic-ai
    merges adjacent requests, so a merged one holds parts stored before)."""
    known = mirror.parts if mirror.parts is not None else set()
    out = []
    for m in to_precis(message, key=key):
        digests = _part_digests(m)
        if not digests or not set(digests) <= known:
            out.append(m)
            known.update(digests)
    return out


def precis_history_processor(
    sessions: Sessions,
    *,
    instructions: str | None = None,
    tools: Sequence[ToolDefinition] | None = None,
) -> Callable[[RunContext[Any], list[ModelMessage]], Any]:
    """An async history processor for `ProcessHistory(...)`: stores, compacts, returns the view.

    `ProcessHistory` makes the result the run's history (destructive); the originals are all in
    the store. A processor sees no request, so `instructions` and `tools` (if given) are what the
    budget counts besides the messages.
    """
    processor = _Processor(sessions)

    async def process(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        view, _ = await processor.process(ctx, messages, system=instructions, tools=tools)
        return view

    return process


def precis_toolset(sessions: Sessions) -> FunctionToolset[Any]:
    """`search_history` and `read_original` as pydantic-ai tools over the run's conversation."""
    tools: list[Tool[Any]] = []
    for schema in tool_schemas():
        name = str(schema["name"])

        async def answer(_name: str, ctx: RunContext[Any], **arguments: Any) -> str:
            session = sessions.session(conversation_of(ctx))
            return await aanswer_history_tool(session, _name, arguments)

        tools.append(
            Tool.from_schema(
                partial(answer, name),
                name=name,
                description=str(schema["description"]),
                json_schema=schema["parameters"],
                takes_ctx=True,
            )
        )
    return FunctionToolset(tools)


@dataclass(init=False)
class PrecisCapability(AbstractCapability[Any]):
    """Compacts before every model request; the model sees the view, the store every original.

    `sessions` opens one precis session per conversation; one capability (and so one agent)
    serves every conversation at once.

    With `native` (the default) each compaction is pydantic-ai's own: the capability asks for one
    (`RunContext.request_compaction`) and answers it in `compact_history`, so the run emits
    `CompactionStartEvent`/`CompactionEndEvent`, lists it in `result.compactions`, and its history
    becomes the summary (a `CompactionPart` in a request) and the kept messages, every original
    staying in the store. `agent.compact_history(...)` and a context overflow compact through
    precis too. With `native=False` the run's history is left whole (only the request carries the
    view) and a compaction shows in no pydantic-ai event; `destructive=True` also replaces the
    run's history with the view, as `ProcessHistory` does.
    """

    sessions: Sessions
    destructive: bool
    history_tools: bool
    native: bool

    def __init__(
        self,
        sessions: Sessions,
        *,
        destructive: bool = False,
        history_tools: bool = False,
        native: bool = True,
    ) -> None:
        self.sessions = sessions
        self.destructive = destructive
        self.history_tools = history_tools
        self.native = native
        self._processor = _Processor(sessions)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a store: not spec-serializable

    def get_toolset(self) -> Any:
        return precis_toolset(self.sessions) if self.history_tools else None

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        params = request_context.model_request_parameters
        system = "\n\n".join(p.content for p in params.instruction_parts or []) or None
        messages, turn = await self._processor.process(
            ctx,
            list(request_context.messages),
            system=system,
            tools=[*params.function_tools, *params.output_tools],
        )
        request_context.messages = list(messages)
        compiled = turn.system
        if compiled is not None and compiled != system:  # the session's compiler rewrote it
            parts = [InstructionPart(compiled)]
            request_context.model_request_parameters = replace(params, instruction_parts=parts)
        if self.destructive:
            ctx.messages[:] = messages
        if self.native and turn.compactions:
            # Told to pydantic-ai in its compaction step, which `compact_history` answers.
            self.sessions.mirror(conversation_of(ctx)).unreported = turn.compactions
            ctx.request_compaction(reason="threshold")
        return request_context

    async def compact_history(
        self, ctx: RunContext[Any], request: CompactionRequest
    ) -> CompactionResult | None:
        """pydantic-ai's compaction step: the one precis just ran (reason `threshold`), or one
        run now (`agent.compact_history`, a context overflow, another capability's request)."""
        if not self.native:
            return None
        mirror = self.sessions.mirror(conversation_of(ctx))
        compactions, mirror.unreported = mirror.unreported, ()
        messages = list(request.messages)
        if not compactions:
            messages, turn = await self._processor.process(ctx, messages, force=True)
            compactions = turn.compactions
            if not compactions:
                return None  # nothing could be made smaller: the request goes as it is
        found = _compaction_part(messages)
        if found is None:
            return None
        return CompactionResult(
            messages=messages,
            part=found,
            handler="precis",
            metadata={TAG: [c.as_dict() for c in compactions]},
        )

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> Any:
        """Store what the run added since its last request (its final answer), as it ended."""
        await self._processor.store(ctx, result.all_messages())
        return result


def _compaction_part(messages: Sequence[ModelMessage]) -> CompactionPart | None:
    """The newest precis summary's compaction part in these messages, if they hold one."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and _is_ours(message):
            for part in message.parts:
                if isinstance(part, CompactionPart):
                    return part
    return None
