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
from typing import Any

from pydantic_ai import Agent, AgentRunResult, RunContext
from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.direct import model_request, model_request_sync
from pydantic_ai.messages import (
    CompactionPart,
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import Tool, ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from precis.core.errors import InvalidInput
from precis.core.messages import Message
from precis.engine.settings import CompactionSettings
from precis.integrations._common import (
    KEY,
    PRECIS_KINDS,
    Entry,
    Flow,
    Mirror,
    Sessions,
    Turn,
    aanswer_history_tool,
    tool_schemas,
)
from precis.integrations._models import FrameworkSummarizer, settings_for
from precis.integrations._pydantic_ai_messages import (
    TAG,
    _is_ours,
    _is_state,
    _part_digests,
    from_precis,
    message_key,
    original,
    to_precis,
)
from precis.session import adrive
from precis.stores.base import ConversationStore

__all__ = [
    "PrecisCapability",
    "from_precis",
    "message_key",
    "model_summarizer",
    "model_window",
    "original",
    "precis_history_processor",
    "precis_toolset",
    "sessions_for",
    "to_precis",
]

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
        focus: str | None = None,
    ) -> Flow[tuple[Turn, dict[str, Any]]]:
        history = yield from mirror.load()
        if mirror.parts is None:
            mirror.parts = {d for m in history for d in _part_digests(m)}
        entries, originals = self.entries(mirror, messages)
        turn: Turn = yield from mirror.flow(
            entries, system=system, compact=compact, force=force, focus=focus
        )
        # The summary and marker shown now come back inside a request pydantic-ai merges with
        # the next prompt: known by their parts, they are not stored again as the user's words.
        mirror.parts.update(
            d for m in turn.view if m.kind in PRECIS_KINDS for d in _part_digests(m)
        )
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
        focus: str | None = None,
    ) -> tuple[list[ModelMessage], Turn]:
        """The view as the run's messages, and the turn (the system prompt as the session has
        it, the compactions it ran); with `force`, compacted now whatever the triggers say."""
        mirror = self.sessions.mirror(conversation_of(ctx))
        if tools is not None:
            mirror.session.tools = list(_tool_dicts(tools))
        async with mirror.alock:
            flow = self._flow(mirror, messages, system, force=force, focus=focus)
            turn, originals = await adrive(flow)
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
            messages, turn = await self._processor.process(
                ctx, messages, force=True, focus=request.focus
            )
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


# --- the framework's own model ----------------------------------------------------------------


def _model(model: Model | Agent[Any, Any]) -> Model:
    if isinstance(model, Agent):
        if not isinstance(model.model, Model):
            raise InvalidInput(
                "precis: this pydantic-ai Agent has no Model object to summarize with"
            )
        return model.model
    return model


def _chat(chat: Sequence[dict[str, Any]]) -> list[ModelMessage]:
    """OpenAI-format messages as pydantic-ai messages (system and user parts, assistant text)."""
    out: list[ModelMessage] = []
    for m in chat:
        text = str(m.get("content") or "")
        if m.get("role") == "assistant":
            out.append(ModelResponse(parts=[TextPart(text)]))
        elif m.get("role") == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(text)]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(text)]))
    return out


def model_summarizer(model: Model | Agent[Any, Any]) -> FrameworkSummarizer:
    """precis's model summarizer asking this pydantic-ai model (or an agent's) directly
    (`pydantic_ai.direct.model_request`), no agent run around it."""
    target = _model(model)

    def ask(chat: list[dict[str, Any]]) -> str:
        return model_request_sync(target, _chat(chat)).text or ""

    async def aask(chat: list[dict[str, Any]]) -> str:
        return (await model_request(target, _chat(chat))).text or ""

    name = f"pydantic-ai:{target.model_name}"
    return FrameworkSummarizer(name, ask, aask, window=model_window(target))


def model_window(model: Model | Agent[Any, Any]) -> int | None:
    """The model's input window, as its profile gives it (`context_window`), else None."""
    window = _model(model).context_window
    return window if isinstance(window, int) and window > 0 else None


def sessions_for(
    store: ConversationStore,
    model: Model | Agent[Any, Any],
    *,
    settings: CompactionSettings | None = None,
    **options: Any,
) -> Sessions:
    """`Sessions` whose summarizer and window are this model's own (pydantic-ai counts tokens
    only through the provider's API, so precis counts); `options` go to `Sessions`."""
    options.setdefault("summarizer", model_summarizer(model))
    return Sessions(store, settings=settings_for(settings, model_window(model)), **options)
