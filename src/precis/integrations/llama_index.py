"""precis for LlamaIndex agent workflows: `PrecisMemory`, a `BaseMemory` over a precis conversation.

    sessions = Sessions(store, settings=CompactionSettings(context_window=6000))
    agent = FunctionAgent(tools=[...], llm=llm, system_prompt="…")
    memory = PrecisMemory.from_defaults(sessions=sessions, session_id="user-42")
    await agent.run("…", memory=memory)

Each `session_id` is its own precis conversation (as with LlamaIndex's own `Memory`), so one
agent object serves many users at once, each run given its user's memory.

`put` / `put_messages` store every message as an original (an assistant message with its tool
calls, each tool result paired with its call by `tool_call_id`); `get` compacts when a trigger
fires and returns the view: pinned · summary · kept, with a summary as a user message and a
long tool result shown head+tail. `get_all` returns every original; `reset` empties the context
(the originals stay in the history, searchable). `precis_tools` gives an agent
`search_history` and `read_original` over its memory's conversation.

A `FunctionAgent` keeps the tool steps of the run in progress outside its memory and puts them
in when the run ends; every model call sends the memory's view plus those steps. So set the
window of `sessions` to the model's window less what one run's steps take.
`pip install 'precis-context[llama-index]'`.
"""

# No `from __future__ import annotations`: LlamaIndex reads the history tools' annotations
# (their `Context` parameter) at run time.

import asyncio
import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.memory import BaseMemory
from llama_index.core.tools import BaseTool, FunctionTool
from llama_index.core.workflow import Context

from precis.core.errors import InvalidInput
from precis.core.messages import KIND_MARKER, Message, ToolCall, compact_json
from precis.core.types import Role
from precis.integrations._common import (
    FRAMEWORK,
    KEY,
    PRECIS_KINDS,
    RAW,
    Entry,
    Mirror,
    Sessions,
    aanswer_history_tool,
    fingerprint,
    shown_differently,
    tool_schemas,
)
from precis.session import AsyncSession, adrive, drive
from precis.stores.base import CompactionEvent, MessageIds, utc_now

__all__ = ["PrecisMemory", "from_precis", "precis_tools", "to_precis"]

NAME = "llama-index"
_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "model": "assistant",
    "tool": "tool",
}


# --- conversion -------------------------------------------------------------------------------


def _dump(message: ChatMessage) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(message.model_dump_json())
    return data


def _calls(message: ChatMessage, key: str) -> tuple[ToolCall, ...]:
    """The message's tool calls: its `ToolCallBlock`s, or OpenAI-style `tool_calls` kwargs."""
    calls: list[ToolCall] = []
    for j, block in enumerate(message.blocks):
        if isinstance(block, ToolCallBlock):
            args = block.tool_kwargs
            text = args if isinstance(args, str) else compact_json(args)
            calls.append(ToolCall(block.tool_call_id or f"{key}/{j}", block.tool_name, text))
    for j, call in enumerate(message.additional_kwargs.get("tool_calls") or []):
        data = call if isinstance(call, Mapping) else getattr(call, "__dict__", {})
        function = data.get("function") or {}
        if isinstance(function, Mapping):
            name, arguments = function.get("name"), function.get("arguments")
        else:
            name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        name = name or data.get("tool_name")
        if arguments is None:
            arguments = data.get("tool_kwargs", {})
        call_id = data.get("id") or data.get("tool_id") or f"{key}/k{j}"
        if name and not any(c.id == call_id for c in calls):
            text = arguments if isinstance(arguments, str) else compact_json(arguments)
            calls.append(ToolCall(str(call_id), str(name), text))
    return tuple(calls)


def _text(message: ChatMessage) -> str:
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def to_precis(message: ChatMessage, key: str) -> Message:
    """One LlamaIndex message as a precis message; the original rides along in metadata."""
    meta = {FRAMEWORK: NAME, KEY: key, RAW: _dump(message)}
    role = _ROLES.get(str(message.role.value), "user")
    images = sum(1 for b in message.blocks if isinstance(b, ImageBlock))
    if role == "assistant":
        reasoning = "\n\n".join(
            b.content or "" for b in message.blocks if isinstance(b, ThinkingBlock)
        )
        return Message(
            role="assistant",
            content=_text(message),
            tool_calls=_calls(message, key),
            reasoning=reasoning,
            images=images,
            metadata=meta,
        )
    if role == "tool":
        call_id = message.additional_kwargs.get("tool_call_id")
        if isinstance(call_id, str) and call_id:
            return Message(role="tool", content=_text(message), tool_call_id=call_id, metadata=meta)
        return Message(
            role="user", content=_text(message), metadata={**meta, "orphan_result": True}
        )
    return Message(role=role, content=_text(message), images=images, metadata=meta)


def original(message: Message) -> ChatMessage:
    """The LlamaIndex message a stored message came from, exactly."""
    return ChatMessage.model_validate(message.metadata[RAW])


def from_precis(view: Sequence[Message]) -> list[ChatMessage]:
    """The view as LlamaIndex messages: originals where shown whole, copies with the shown text
    where shortened, each summary or marker (and a result whose call is gone) a user message."""
    out: list[ChatMessage] = []
    for m in view:
        if m.kind in PRECIS_KINDS or m.metadata.get(FRAMEWORK) != NAME:
            out.append(ChatMessage(role=MessageRole.USER, content=m.content))
        elif m.metadata.get("orphan_result"):
            out.append(
                ChatMessage(role=MessageRole.USER, content=f"[an earlier tool result]\n{m.content}")
            )
        elif shown_differently(m):
            shown = original(m)
            out.append(shown.model_copy(update={"blocks": [TextBlock(text=m.content)]}))
        else:
            out.append(original(m))
    return out


def keyed(messages: Sequence[ChatMessage], counts: dict[str, int]) -> list[tuple[str, ChatMessage]]:
    """Each message with its key: its digest and how often that digest came before (`counts`,
    updated), so the same text said twice is two messages."""
    out = []
    for message in messages:
        digest = fingerprint(_dump(message))
        counts[digest] = counts.get(digest, 0) + 1
        out.append((f"sha:{digest}#{counts[digest]}", message))
    return out


def _counts(mirror: Mirror) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in mirror.stored or {}:
        digest, _, n = key.partition("#")
        if digest.startswith("sha:") and n.isdigit():
            counts[digest[4:]] = max(counts.get(digest[4:], 0), int(n))
    return counts


def _one(message: ChatMessage, key: str) -> tuple[Message]:
    return (to_precis(message, key),)


def _tool_dicts(tools: Sequence[BaseTool]) -> list[dict[str, Any]]:
    return [tool.metadata.to_openai_tool(skip_length_check=True) for tool in tools]


# --- the memory -------------------------------------------------------------------------------


class PrecisMemory(BaseMemory):
    """A LlamaIndex memory kept inside its window by precis; every original stays in the store.

    `sessions` keeps one precis conversation per `session_id`; `system_prompt` and `tools`
    (the agent's, if given) are counted in the budget besides the messages.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    sessions: Sessions = Field(exclude=True)
    session_id: str
    system_prompt: str | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _mirror(self) -> Mirror:
        """The session's mirror, asked of `sessions` each time (it may have let an idle one go)."""
        mirror = self.sessions.mirror(self.session_id)
        if self.tools:
            mirror.session.tools = list(self.tools)
        return mirror

    @classmethod
    def class_name(cls) -> str:
        return "PrecisMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        *,
        sessions: Sessions,
        session_id: str,
        system_prompt: str | None = None,
        tools: Sequence[BaseTool] = (),
        **kwargs: Any,
    ) -> "PrecisMemory":
        """A memory for one session; `tools` are the agent's tools, counted in the budget."""
        return cls(
            sessions=sessions,
            session_id=session_id,
            system_prompt=system_prompt,
            tools=_tool_dicts(tools),
        )

    @property
    def session(self) -> AsyncSession:
        """The precis session this memory is kept in: read it, search it, compact it."""
        return self._mirror.session

    # --- reading ------------------------------------------------------------------------------

    def _view(self, mirror: Mirror) -> Any:
        turn = yield from mirror.flow([], system=self.system_prompt)
        return from_precis(turn.view)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The view: compacted when a trigger fires."""
        mirror = self._mirror
        with mirror.lock:
            view: list[ChatMessage] = drive(self._view(mirror))
        return view

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        mirror = self._mirror
        async with mirror.alock:
            view: list[ChatMessage] = await adrive(self._view(mirror))
        return view

    def get_all(self) -> list[ChatMessage]:
        """Every original, oldest first (precis's summaries and markers left out)."""
        return self._originals(drive(self.session._history_steps()))

    async def aget_all(self) -> list[ChatMessage]:
        return self._originals(await adrive(self.session._history_steps()))

    @staticmethod
    def _originals(history: Sequence[Message]) -> list[ChatMessage]:
        return [original(m) for m in history if m.metadata.get(FRAMEWORK) == NAME]

    # --- writing ------------------------------------------------------------------------------

    @staticmethod
    def _store(mirror: Mirror, messages: Sequence[ChatMessage], *, whole: bool) -> Any:
        """Store what is new: the messages after those stored (`whole`: the list is the whole
        history, keyed from its start, so what was stored before is known)."""
        yield from mirror.load()
        counts = {} if whole else _counts(mirror)
        entries = [Entry(key, partial(_one, m, key)) for key, m in keyed(messages, counts)]
        yield from mirror.flow(entries, compact=False)

    def put(self, message: ChatMessage) -> None:
        self.put_messages([message])

    async def aput(self, message: ChatMessage) -> None:
        await self.aput_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        mirror = self._mirror
        with mirror.lock:
            drive(self._store(mirror, messages, whole=False))

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        mirror = self._mirror
        async with mirror.alock:
            await adrive(self._store(mirror, messages, whole=False))

    def set(self, messages: list[ChatMessage]) -> None:
        """Take `messages` as the whole history: what is not stored yet is stored (the store is
        append-only; nothing stored is taken back)."""
        mirror = self._mirror
        with mirror.lock:
            drive(self._store(mirror, messages, whole=True))

    async def aset(self, messages: list[ChatMessage]) -> None:
        mirror = self._mirror
        async with mirror.alock:
            await adrive(self._store(mirror, messages, whole=True))

    def reset(self) -> None:
        """Empty the context; every original stays in the history, searchable."""
        mirror = self._mirror
        with mirror.lock:
            _clear(mirror.session)

    async def areset(self) -> None:
        mirror = self._mirror
        async with mirror.alock:
            await asyncio.to_thread(_clear, mirror.session)


def _clear(session: AsyncSession) -> None:
    store = session.store
    store.create(session.conversation_id)
    snapshot = store.context(session.conversation_id)
    if not snapshot.messages:
        return
    marker = Message(
        role="user",
        kind=KIND_MARKER,
        content="[the memory was reset]",
        id=MessageIds().new(),
        created_at=utc_now(),
    )
    store.commit_compaction(
        session.conversation_id,
        expected_version=snapshot.version,
        snapshot_last_seq=snapshot.last_seq,
        summary=marker,
        context_ids=[],
        event=CompactionEvent(
            trigger="reset",
            mode="edit",
            stats={"messages_count_before": len(snapshot.messages), "messages_count_after": 0},
            summary_id=marker.id,
            at=marker.created_at or "",
        ),
    )


# --- the history tools ------------------------------------------------------------------------


async def _memory_of(ctx: Context) -> "PrecisMemory":
    memory = await ctx.store.get("memory", default=None)
    if not isinstance(memory, PrecisMemory):
        raise InvalidInput("precis history tools: this run's memory is not a PrecisMemory")
    return memory


async def _search_history(ctx: Context, query: str, limit: int | None = None) -> str:
    arguments: dict[str, Any] = (
        {"query": query} if limit is None else {"query": query, "limit": limit}
    )
    session = (await _memory_of(ctx)).session
    return await aanswer_history_tool(session, "search_history", arguments)


async def _read_original(ctx: Context, message_id: str, section: int | None = None) -> str:
    arguments: dict[str, Any] = {"message_id": message_id}
    if section is not None:
        arguments["section"] = section
    session = (await _memory_of(ctx)).session
    return await aanswer_history_tool(session, "read_original", arguments)


def precis_tools() -> list[BaseTool]:
    """`search_history` and `read_original` as LlamaIndex tools over the running agent's memory
    (a `PrecisMemory`), so one agent serves every user with the same two tools."""
    described = {str(t["name"]): str(t["description"]) for t in tool_schemas()}
    return [
        FunctionTool.from_defaults(async_fn=fn, name=name, description=described[name])
        for name, fn in (("search_history", _search_history), ("read_original", _read_original))
    ]
