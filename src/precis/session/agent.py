"""The agent loop: one user turn in, one model reply out, compacting whenever the window demands.

The agent offers the model the history tools (`search_history`, `read_original`) and answers
their calls itself, so what compaction took out of the context stays one call away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Generic, TypeVar

from precis.core.errors import CompactionError, ContextOverflow
from precis.core.messages import Message
from precis.core.steps import Steps
from precis.engine.requests import Call
from precis.engine.results import CompactionStats
from precis.providers.base import ChatProvider, Completion
from precis.session._async import AsyncSession
from precis.session._base import AppendRead, BaseSession
from precis.session._io import Complete, SessionRequest, completion, drive
from precis.session._sync import Session
from precis.session.tools import TOOLS, answer_history_tool, tool_definitions
from precis.stores.base import MessageIds

# How many times one turn compacts and retries after the model reports a context overflow.
MAX_OVERFLOW_RETRIES = 3
# How many rounds of history-tool calls one turn may make before the reply must come.
MAX_TOOL_ROUNDS = 8

CompactionCallback = Callable[[CompactionStats], None]
_HISTORY_TOOLS = frozenset(t.name for t in TOOLS)


SessionT = TypeVar("SessionT", bound=BaseSession)


class _AgentBase(Generic[SessionT]):
    """The turn, written once as steps; `Agent` and `AsyncAgent` drive it."""

    def __init__(
        self,
        session: SessionT,
        provider: ChatProvider,
        *,
        on_compaction: CompactionCallback | None = None,
        history_tools: bool = True,
    ) -> None:
        self.session = session
        self.provider = provider
        self.on_compaction = on_compaction
        if history_tools:
            # The tools join the session's own, so the budget counts their definitions too.
            offered = {_tool_name(t) for t in session.tools}
            session.tools += [t for t in tool_definitions("openai") if _tool_name(t) not in offered]
        self._history_tools = history_tools
        self._ids = MessageIds()  # a turn's messages carry ids before the store sees them

    def _turn_steps(
        self, user_text: str
    ) -> Steps[SessionRequest, tuple[str, list[CompactionStats]]]:
        """One turn, stored all at once at its end: a failed model call writes nothing.

        History-tool calls are answered here, whatever else the reply calls (the caller answers
        its own tools); the last round offers no history tools, so the model must answer.
        """
        compactions: list[CompactionStats] = []
        pending = [Message(role="user", content=user_text, id=self._ids.new())]
        compactions += yield from self._maybe_compact_steps(pending)
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            last = round_ == MAX_TOOL_ROUNDS
            reply = yield from self._reply_steps(pending, compactions, history_tools=not last)
            pending.append(reply)
            ours = [c for c in reply.tool_calls if self._history_tools and c.name in _HISTORY_TOOLS]
            for c in ours:
                text: str = yield Call(answer_history_tool, (self.session, c.name, c.arguments))
                pending.append(
                    Message(role="tool", tool_call_id=c.id, content=text, id=self._ids.new())
                )
            if not ours or len(ours) < len(reply.tool_calls) or last:
                break  # an answer, or calls for the caller's own tools: the turn is over
            compactions += yield from self._maybe_compact_steps(pending)
        _, read = yield from self.session._append_read_steps(pending)
        compactions += yield from self._maybe_compact_steps(read=read)
        return reply.content, compactions

    def _reply_steps(
        self,
        pending: list[Message],
        compactions: list[CompactionStats],
        *,
        history_tools: bool = True,
    ) -> Steps[SessionRequest, Message]:
        """The model's next reply; on overflow compact and ask again, a bounded number of times."""
        overflows = 0
        tools = [
            t for t in self.session.tools if history_tools or _tool_name(t) not in _HISTORY_TOOLS
        ]
        while True:
            prompt = yield from self.session._prompt_steps(pending)
            try:
                answer: Completion = completion(
                    (yield Complete(self.provider, prompt, tools or None))
                )
                break
            except ContextOverflow:
                if overflows >= MAX_OVERFLOW_RETRIES:
                    raise
                overflows += 1
                result = yield from self.session._compact_steps(
                    None, "context_window_overflow", None, None, pending
                )
                if not result.compacted:
                    raise  # nothing could be made smaller: asking again would overflow again
                self._report(result.stats)
                compactions.append(result.stats)
        reply = Message.from_openai(answer.message)
        usage = {**reply.metadata, "usage": dict(answer.usage)}
        return replace(reply, id=self._ids.new(), metadata=usage)

    def _maybe_compact_steps(
        self, pending: list[Message] | None = None, read: AppendRead | None = None
    ) -> Steps[SessionRequest, list[CompactionStats]]:
        """Compact when due; when nothing stored can shrink, go on: if the request then does not
        fit, the model says so and the overflow path compacts or raises. `read`: what the turn's
        append just read, not read again."""
        try:
            done = yield from self.session._maybe_compact_steps(pending or (), read)
        except CompactionError:
            return []
        for stats in done:
            self._report(stats)
        return done

    def _report(self, stats: CompactionStats) -> None:
        if self.on_compaction is not None:
            self.on_compaction(stats)


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    return str(function.get("name") if isinstance(function, Mapping) else tool.get("name"))


class Agent(_AgentBase[Session]):
    """Drives a `Session` against a `ChatProvider`, so callers never manage the window by hand."""

    def turn(self, user_text: str) -> tuple[str, list[CompactionStats]]:
        """Append the user text, get the reply, and return it with every compaction it caused."""
        return drive(self._turn_steps(user_text))


class AsyncAgent(_AgentBase[AsyncSession]):
    """`Agent` for an `AsyncSession`, inside an event loop."""

    async def turn(self, user_text: str) -> tuple[str, list[CompactionStats]]:
        """Append the user text, get the reply, and return it with every compaction it caused."""
        return await self.session._checking(self._turn_steps(user_text))
