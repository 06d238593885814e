"""precis for LangChain v1 agents: `PrecisMiddleware`, an `AgentMiddleware`.

    sessions = Sessions(store, settings=CompactionSettings(context_window=8000))
    agent = create_agent(model, tools, middleware=[PrecisMiddleware(sessions)], checkpointer=...)
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "user-42"}})

Each LangChain thread (`configurable.thread_id`) is its own precis conversation, so one agent
serves many users at once; a run without a thread id is refused.

By default the middleware is non-destructive: `wrap_model_call` / `awrap_model_call` send the
model the compacted view (pinned · summary · kept) while the graph state and its checkpoints keep
every original message. With `destructive=True`, `before_model` also replaces the state's
messages with the view (`RemoveMessage(REMOVE_ALL_MESSAGES)`, the summary a `HumanMessage`
tagged `lc_source: "summarization"` like the built-in `SummarizationMiddleware`'s).

The system message stays separate in `ModelRequest`: it is counted in the budget (with the
tool definitions) and never dropped. Every original is stored in the precis conversation and
stays searchable; `history_tools=True` gives the agent `search_history` and `read_original`.
Each compaction is dispatched as a custom callback event named `precis_compaction` (a callback
handler's `on_custom_event`, or `astream_events`), with its figures as the data.
`pip install 'precis-context[langchain]'`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from precis.core.errors import InvalidInput
from precis.core.messages import Message, ToolCall, compact_json
from precis.core.types import Role
from precis.engine.settings import CompactionSettings
from precis.integrations._common import (
    FRAMEWORK,
    KEY,
    PRECIS_KINDS,
    RAW,
    Entry,
    Mirror,
    Sessions,
    Turn,
    aanswer_history_tool,
    fingerprint,
    shown_differently,
    tool_schemas,
)
from precis.integrations._models import CallbackCounter, FrameworkSummarizer, settings_for
from precis.session import adrive, drive
from precis.session.tools import answer_history_tool
from precis.stores.base import ConversationStore

__all__ = [
    "COMPACTION_EVENT",
    "SUMMARY_SOURCE",
    "PrecisMiddleware",
    "from_precis",
    "model_counter",
    "model_summarizer",
    "model_window",
    "precis_tools",
    "sessions_for",
    "to_precis",
]

NAME = "langchain"
# The custom callback event each compaction is dispatched as (`on_custom_event`, `astream_events`).
COMPACTION_EVENT = "precis_compaction"
# How the built-in SummarizationMiddleware tags its summary message; precis tags its own alike.
SUMMARY_SOURCE = "summarization"
_ROLES: dict[str, Role] = {
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "system": "system",
    "developer": "system",
}
_IMAGE_BLOCKS = frozenset({"image", "image_url"})


# --- conversion -------------------------------------------------------------------------------


def message_key(message: BaseMessage) -> str:
    """The message's id (every message in agent state has one), else a digest of it."""
    return message.id if message.id else "sha:" + fingerprint(message_to_dict(message))


def _is_precis_summary(message: BaseMessage) -> bool:
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
        and bool(message.id)
        and str(message.id).startswith("msg_")
    )


def to_precis(message: BaseMessage) -> Message:
    """One LangChain message as a precis message; the original rides along in metadata."""
    raw = message_to_dict(message)
    meta = {FRAMEWORK: NAME, KEY: message_key(message), RAW: raw}
    role: Role = _ROLES.get(message.type, "user")
    if message.type == "chat":
        role = _ROLES.get(str(getattr(message, "role", "user")), "user")
    text = str(message.text)
    images = 0
    if isinstance(message.content, list):
        images = sum(
            1 for b in message.content if isinstance(b, dict) and b.get("type") in _IMAGE_BLOCKS
        )
    if isinstance(message, AIMessage):
        calls = tuple(
            ToolCall(str(c["id"]), c["name"], compact_json(c["args"]))
            for c in message.tool_calls
            if c.get("id")
        )
        reasoning = "".join(
            str(b.get("reasoning", ""))
            for b in (message.content if isinstance(message.content, list) else [])
            if isinstance(b, dict) and b.get("type") == "reasoning"
        )
        return Message(
            role="assistant",
            content=text,
            tool_calls=calls,
            reasoning=reasoning,
            images=images,
            metadata=meta,
        )
    if isinstance(message, ToolMessage):
        return Message(role="tool", content=text, tool_call_id=message.tool_call_id, metadata=meta)
    if role in ("assistant", "tool"):  # a chat or function message with such a role: as text
        role = "user"
    return Message(role=role, content=text, images=images, metadata=meta)


def original(message: Message) -> BaseMessage:
    """The LangChain message a stored message came from, exactly."""
    return messages_from_dict([message.metadata[RAW]])[0]


def from_precis(
    view: Sequence[Message], originals: dict[str, BaseMessage] | None = None
) -> list[BaseMessage]:
    """The view as LangChain messages: the originals themselves where shown whole (`originals`
    maps keys to the objects in hand), copies with the shown text where shortened, and each
    summary or marker as a `HumanMessage` tagged like the built-in summary."""
    known = originals or {}
    out: list[BaseMessage] = []
    for m in view:
        if m.kind in PRECIS_KINDS or m.metadata.get(FRAMEWORK) != NAME:
            out.append(
                HumanMessage(
                    content=m.content, id=m.id, additional_kwargs={"lc_source": SUMMARY_SOURCE}
                )
            )
            continue
        key = m.metadata.get(KEY)
        message = known.get(key) if isinstance(key, str) else None
        if message is None:
            message = original(m)
        if m.metadata.get("orphan_result"):
            # Its call was dropped by the framework: a model must not see it as a tool result.
            message = HumanMessage(content=f"[an earlier tool result]\n{m.content}", id=message.id)
        elif shown_differently(m):
            message = message.model_copy(update={"content": m.content})
        out.append(message)
    return out


def _one(message: BaseMessage) -> tuple[Message]:
    return (to_precis(message),)


def _entries(messages: Sequence[BaseMessage]) -> tuple[list[Entry], dict[str, BaseMessage]]:
    entries: list[Entry] = []
    originals: dict[str, BaseMessage] = {}
    for message in messages:
        key = message_key(message)
        originals.setdefault(key, message)
        if _is_precis_summary(message):
            entries.append(Entry(key, tuple))
        else:
            entries.append(Entry(key, partial(_one, message)))
    return entries, originals


def _tool_dicts(tools: Sequence[BaseTool | dict[str, Any]]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for tool in tools:
        try:
            out.append(convert_to_openai_tool(tool))
        except Exception:  # a provider-specific dict: count it as it is
            out.append(tool if isinstance(tool, dict) else {"name": str(getattr(tool, "name", ""))})
    return out


def _system_text(system: SystemMessage | None) -> str | None:
    return None if system is None else str(system.text)


def _same(a: Sequence[BaseMessage], b: Sequence[BaseMessage]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _dispatched(turn: Turn) -> None:
    """Each compaction of the turn as a custom callback event of the running graph."""
    for compaction in turn.compactions:
        try:
            dispatch_custom_event(COMPACTION_EVENT, compaction.as_dict())
        except RuntimeError:  # not inside a run with callbacks: nobody to tell
            return


async def _adispatched(turn: Turn) -> None:
    for compaction in turn.compactions:
        try:
            await adispatch_custom_event(COMPACTION_EVENT, compaction.as_dict())
        except RuntimeError:
            return


# --- the framework's own model -------------------------------------------------------------


def _name(model: BaseChatModel) -> str:
    named = getattr(model, "model_name", None) or getattr(model, "model", None)
    return f"langchain:{named if isinstance(named, str) else model._llm_type}"


def model_summarizer(model: BaseChatModel) -> FrameworkSummarizer:
    """precis's model summarizer asking this chat model (`invoke` / `ainvoke`)."""

    def ask(chat: list[dict[str, Any]]) -> str:
        return str(model.invoke(convert_to_messages(chat)).text)

    async def aask(chat: list[dict[str, Any]]) -> str:
        return str((await model.ainvoke(convert_to_messages(chat))).text)

    return FrameworkSummarizer(_name(model), ask, aask, window=model_window(model))


def model_window(model: BaseChatModel) -> int | None:
    """The model's input window, as its profile gives it (`max_input_tokens`), else None."""
    window = (model.profile or {}).get("max_input_tokens")
    return window if isinstance(window, int) and window > 0 else None


_COUNTING = ("get_num_tokens_from_messages", "get_num_tokens", "get_token_ids")


def model_counter(model: BaseChatModel) -> CallbackCounter | None:
    """The model's own token counting (`get_num_tokens_from_messages`), when its class has its
    own (the base class's needs a tokenizer download); else None, and precis counts."""
    own = any(getattr(type(model), n) is not getattr(BaseChatModel, n) for n in _COUNTING)
    if not own and model.custom_get_token_ids is None:
        return None

    def count_message(message: Message) -> int:
        shown = original(message) if message.metadata.get(RAW) else None
        if shown is None or shown.content != message.content:  # a summary, a shortened copy
            shown = HumanMessage(content=message.content)
        return model.get_num_tokens_from_messages([shown])

    return CallbackCounter(count_message, model.get_num_tokens)


def sessions_for(
    store: ConversationStore,
    model: BaseChatModel,
    *,
    settings: CompactionSettings | None = None,
    **options: Any,
) -> Sessions:
    """`Sessions` whose summarizer, token counter and window are this chat model's own (each
    where the model has one; `options` go to `Sessions`, and override these)."""
    options.setdefault("summarizer", model_summarizer(model))
    options.setdefault("counter", model_counter(model))
    return Sessions(store, settings=settings_for(settings, model_window(model)), **options)


# --- the history tools ------------------------------------------------------------------------


def thread_id(runtime: Runtime[Any] | None = None) -> str:
    """The running graph's thread: `configurable.thread_id`, else the runtime's; refused if none."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a runnable
        configurable = {}
    found = configurable.get("thread_id")
    if found is None and runtime is not None and runtime.execution_info is not None:
        found = runtime.execution_info.thread_id
    if found is None or str(found) == "":
        raise InvalidInput(
            "PrecisMiddleware: this run has no thread; invoke the agent with "
            "config={'configurable': {'thread_id': ...}} so each user's conversation is its own"
        )
    return str(found)


def precis_tools(sessions: Sessions) -> list[BaseTool]:
    """`search_history` and `read_original` as LangChain tools over the running thread's store."""
    tools: list[BaseTool] = []
    for schema in tool_schemas():
        name = str(schema["name"])

        def run(_name: str = name, **arguments: Any) -> str:
            return answer_history_tool(sessions.session(thread_id()), _name, arguments)

        async def arun(_name: str = name, **arguments: Any) -> str:
            return await aanswer_history_tool(sessions.session(thread_id()), _name, arguments)

        tools.append(
            StructuredTool.from_function(
                func=run,
                coroutine=arun,
                name=name,
                description=str(schema["description"]),
                args_schema=schema["parameters"],
            )
        )
    return tools


# --- the middleware ---------------------------------------------------------------------------


class PrecisMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Keeps a LangChain agent inside its context window; every original stays in the store.

    `sessions` opens one precis session per thread (its settings set the window); one middleware
    serves every thread at once, sync (`invoke`) and async (`ainvoke`, store calls off the loop).
    """

    def __init__(
        self,
        sessions: Sessions,
        *,
        destructive: bool = False,
        history_tools: bool = False,
    ) -> None:
        super().__init__()
        self.sessions = sessions
        self.destructive = destructive
        self.tools = precis_tools(sessions) if history_tools else []

    @property
    def name(self) -> str:
        return "PrecisMiddleware"

    # --- non-destructive: the model sees the view, the state keeps everything -----------------

    def _prepare(
        self, request: ModelRequest[Any]
    ) -> tuple[Mirror, list[Entry], dict[str, BaseMessage]]:
        mirror = self.sessions.mirror(thread_id(request.runtime))
        mirror.session.tools = list(_tool_dicts(request.tools))
        return mirror, *_entries(request.messages)

    def _request(
        self, request: ModelRequest[Any], turn: Turn, originals: dict[str, BaseMessage]
    ) -> ModelRequest[Any]:
        messages = from_precis(turn.view, originals)
        changes: dict[str, Any] = {}
        if not _same(messages, request.messages):
            changes["messages"] = cast(list[AnyMessage], messages)
        if turn.system is not None and turn.system != _system_text(request.system_message):
            changes["system_message"] = SystemMessage(turn.system)  # compiled by the session
        return request.override(**changes) if changes else request

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        mirror, entries, originals = self._prepare(request)
        with mirror.lock:
            turn = drive(mirror.flow(entries, system=_system_text(request.system_message)))
        _dispatched(turn)
        return handler(self._request(request, turn, originals))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        mirror, entries, originals = self._prepare(request)
        async with mirror.alock:
            turn = await adrive(mirror.flow(entries, system=_system_text(request.system_message)))
        await _adispatched(turn)
        return await handler(self._request(request, turn, originals))

    # --- after the model: its reply is stored at once, not only with the next request -----------

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        mirror = self.sessions.mirror(thread_id(runtime))
        entries, _ = _entries(list(state["messages"]))
        with mirror.lock:
            drive(mirror.flow(entries, compact=False))
        return None

    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        mirror = self.sessions.mirror(thread_id(runtime))
        entries, _ = _entries(list(state["messages"]))
        async with mirror.alock:
            await adrive(mirror.flow(entries, compact=False))
        return None

    # --- destructive: the state itself is replaced by the view --------------------------------

    def _update(self, messages: Sequence[BaseMessage], turn: Turn) -> dict[str, Any] | None:
        _, originals = _entries(messages)
        compacted = from_precis(turn.view, originals)
        if _same(compacted, messages):
            return None
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *compacted]}

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        if not self.destructive:
            return None
        mirror = self.sessions.mirror(thread_id(runtime))
        messages = list(state["messages"])
        with mirror.lock:
            turn = drive(mirror.flow(_entries(messages)[0]))
        _dispatched(turn)
        return self._update(messages, turn)

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        if not self.destructive:
            return None
        mirror = self.sessions.mirror(thread_id(runtime))
        messages = list(state["messages"])
        async with mirror.alock:
            turn = await adrive(mirror.flow(_entries(messages)[0]))
        await _adispatched(turn)
        return self._update(messages, turn)
