"""The agent loop: one user turn in, one model reply out, compacting whenever the window demands."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from precis.core.errors import ContextOverflow
from precis.core.messages import Message
from precis.core.types import Trigger
from precis.engine.compactor import CompactionStats
from precis.providers.base import ChatProvider
from precis.session import Session

# How many times one turn compacts and retries after the model reports a context overflow.
MAX_OVERFLOW_RETRIES = 3

CompactionCallback = Callable[[CompactionStats], None]


class Agent:
    """Drives a `Session` against a `ChatProvider`, so callers never manage the window by hand."""

    def __init__(
        self,
        session: Session,
        provider: ChatProvider,
        *,
        on_compaction: CompactionCallback | None = None,
    ) -> None:
        self.session = session
        self.provider = provider
        self.on_compaction = on_compaction

    async def turn(self, user_text: str) -> tuple[str, list[CompactionStats]]:
        """Append the user text, get the reply, and return it with every compaction it caused."""
        compactions: list[CompactionStats] = []
        self.session.append(Message(role="user", content=user_text))
        compactions += await self._maybe_compact()
        overflows = 0
        while True:
            try:
                completion = await self.provider.complete(
                    self.session.prompt(), self.session.tools or None
                )
                break
            except ContextOverflow:
                if overflows >= MAX_OVERFLOW_RETRIES:
                    raise
                overflows += 1
                compactions.append(await self._compact("context_window_overflow"))
        reply = Message.from_openai(completion.message)
        reply = replace(reply, metadata={**reply.metadata, "usage": dict(completion.usage)})
        self.session.append(reply)
        compactions += await self._maybe_compact()
        return completion.text, compactions

    async def _maybe_compact(self) -> list[CompactionStats]:
        done = await self.session.maybe_compact()
        if self.on_compaction is not None:
            for stats in done:
                self.on_compaction(stats)
        return done

    async def _compact(self, trigger: Trigger) -> CompactionStats:
        stats = await self.session.compact(trigger=trigger)
        if self.on_compaction is not None:
            self.on_compaction(stats)
        return stats
