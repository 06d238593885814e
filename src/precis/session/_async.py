"""`AsyncSession`: one conversation inside an event loop — model calls awaited, store calls that
could wait off the loop — so precis runs inside any agent framework's loop."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Self, TypeVar

from precis.core.messages import Message
from precis.core.steps import Steps
from precis.core.tokens import TokenCounter
from precis.core.types import CompactionMode, Trigger
from precis.engine.results import CompactionResult, CompactionStats
from precis.engine.settings import CompactionSettings
from precis.session._base import BaseSession
from precis.session._behind import Behind
from precis.session._io import OwnThread, SessionRequest, adrive, adrive_in_thread
from precis.stores.base import CompactionEvent, RecallHit
from precis.stores.memory import MemoryStore
from precis.summarize.base import Summarizer

T = TypeVar("T")

# Characters an append may carry and still be made on the loop: indexing and counting a longer
# one takes milliseconds (about 4 ms at this size here, 80 ms at a megabyte), so it is made on
# the session's thread, where the index's share does not hold the loop.
LOOP_APPEND_CHARS = 16_000


class AsyncSession(BaseSession):
    """A conversation in a store whose every call is awaited; made without I/O, it creates the
    conversation on first use.

    Its summaries are made behind the turns (`CompactionSettings.background_compaction`, on by
    default): close it (`aclose`, or `async with`) so that none is left running."""

    def _opened(self) -> None:
        self.behind = Behind(self.conversation_id)
        self.thread = OwnThread()  # where what would wait or compute at length runs, off the loop

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self, *, cancel: bool = False) -> None:
        """Wait for the compaction behind the turns to commit or fail (or, `cancel`, stop it),
        and let the session's thread end."""
        assert self.behind is not None
        try:
            await self.behind.aclose(cancel=cancel)
        finally:
            self.thread.close()

    async def settle(self) -> list[CompactionStats]:
        """Wait for the compaction behind the turns, if one runs; what committed since the last
        check (a failure is logged and kept in `behind.failures`)."""
        assert self.behind is not None
        return await self.behind.wait()

    async def _drive(self, steps: Steps[SessionRequest, T]) -> T:
        """One operation on the loop, its store calls made there when the store can make them
        without waiting, each other one on the session's own thread; only a model or a hook
        is awaited. So an append costs what it costs `Session` unless it would wait."""
        return await adrive(steps, self.thread)

    async def _drive_off(self, steps: Steps[SessionRequest, T]) -> T:
        """One operation that computes at length (a compaction, a search of every message) in
        one hop to the session's own thread, so its computation does not hold the loop."""
        return await adrive_in_thread(steps, self.thread)

    async def _checking(self, steps: Steps[SessionRequest, T]) -> T:
        """A check that may compact: on the loop when the summary is made behind the turns
        (the check reads and counts), on the session's thread when it is made in the call."""
        if self.settings.background_compaction:
            return await self._drive(steps)
        return await self._drive_off(steps)

    async def append(
        self, *items: Message | Mapping[str, Any], idempotency_key: str | None = None
    ) -> list[Message]:
        """Append messages (precis `Message`s or OpenAI dicts) in one transaction.

        With `pin_task`, the first user message becomes the pinned task unless one is set.
        With `idempotency_key`, a retry of an append that was stored (the same key and
        messages) stores nothing and returns what the first stored."""
        steps = self._append_steps(items, idempotency_key)
        if sum(map(_chars, items)) > LOOP_APPEND_CHARS:
            return await self._drive_off(steps)
        return await self._drive(steps)

    async def set_task(self, text: str) -> Message:
        """State the task: a pinned user message the context always keeps, verbatim."""
        return await self._drive(self._set_task_steps(text))

    async def task(self) -> str | None:
        """The task text: the message `set_task` wrote, or the first user message."""
        return await self._drive(self._task_steps())

    async def pin(self, message_id: str, pinned: bool = True) -> None:
        """Pin a message in context: never evicted, truncated or summarized from now on."""
        return await self._drive(self._pin_steps(message_id, pinned))

    async def unpin(self, message_id: str) -> None:
        """Let a pinned message be compacted again."""
        return await self._drive(self._pin_steps(message_id, False))

    async def set_system_prompt(self, text: str) -> None:
        """Replace the system prompt (the stable, cacheable head of every request)."""
        return await self._drive(self._set_system_prompt_steps(text))

    async def system_prompt(self) -> str:
        """The system prompt, recompiled first if a compaction made it stale."""
        return await self._drive(self._system_prompt_steps())

    async def context(self) -> list[Message]:
        """The messages in context, in stored order."""
        return await self._drive(self._context_steps())

    async def view(self) -> list[Message]:
        """The context as the model sees it: pinned items first, then the rest in order."""
        return await self._drive(self._view_steps())

    async def prompt(self) -> list[dict[str, Any]]:
        """What to send: system prompt (stable prefix), pinned items, the summary, the rest."""
        return await self._drive(self._prompt_steps())

    async def floor_tokens(self) -> int:
        """What every request carries besides the messages: system prompt and tool definitions."""
        return await self._drive(self._floor_tokens_steps())

    async def tokens(self) -> int:
        """Tokens the next request will carry: reported usage anchors the estimate."""
        return await self._drive(self._tokens_steps())

    async def needs_compaction(self) -> bool:
        """Whether the context is over the threshold (strict >)."""
        return await self._drive(self._needs_compaction_steps())

    async def turns_since_compaction(self) -> int:
        """User turns appended since the last compaction (or since the start)."""
        return await self._drive(self._turns_since_compaction_steps())

    async def compact_result(
        self,
        mode: CompactionMode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
        phase: str | None = None,
    ) -> CompactionResult:
        """Compact once: the stats, the summary and the new context; nothing changes on failure."""
        return await self._drive_off(self._compact_steps(mode, trigger, instructions, phase))

    async def compact(
        self,
        mode: CompactionMode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
        phase: str | None = None,
    ) -> CompactionStats:
        """Compact once and return what it did."""
        result = await self.compact_result(
            mode, trigger=trigger, instructions=instructions, phase=phase
        )
        return result.stats

    async def complete_phase(self, name: str) -> CompactionStats:
        """A sub-goal is done: compact at this natural break and record the phase."""
        return (await self.compact_result(None, trigger="phase_complete", phase=name)).stats

    async def maybe_compact(self) -> list[CompactionStats]:
        """Compact when a trigger fires; returns what ran (usually nothing). The summary is
        made behind (it commits over what is appended meanwhile, and its stats come with a
        later call); this waits only over the hard watermark."""
        return await self._checking(self._maybe_compact_steps())

    async def maybe_compact_counted(self) -> tuple[list[CompactionStats], int]:
        """`maybe_compact` and then `tokens` in one operation: the check's count of the context
        is the answer unless it compacted now (a service's append reads its context once)."""
        return await self._checking(self._counted_compact_steps())

    async def absorb(self, child: BaseSession, tool_call_id: str) -> Message:
        """A sub-agent's work returned as its brief only (S3): the result of call `tool_call_id`."""
        return await self._drive_off(self._absorb_steps(child, tool_call_id))

    async def recall(self, query: str, limit: int = 10) -> list[RecallHit]:
        """Search every original message, compacted away or not; best first."""
        return await self._drive_off(self._recall_steps(query, limit))

    async def history(self) -> list[Message]:
        """Every message ever appended, in order."""
        return await self._drive_off(self._history_steps())

    async def events(self) -> list[CompactionEvent]:
        """The compactions so far, oldest first."""
        return await self._drive(self._events_steps())


def _chars(item: Message | Mapping[str, Any]) -> int:
    """About how many characters a message to append carries (its text and its calls')."""
    if isinstance(item, Message):
        return len(item.content) + sum(len(c.arguments) for c in item.tool_calls)
    return _texts(item.get("content")) + _texts(item.get("tool_calls"))


def _texts(value: Any, depth: int = 3) -> int:
    """The characters of the strings in `value`, looked for no deeper than `depth` (a part's
    text, a call's arguments); nothing is converted, so a value the append refuses is
    refused there, with its own error."""
    if isinstance(value, str):
        return len(value)
    if depth == 0:
        return 0
    if isinstance(value, Mapping):
        return sum(_texts(v, depth - 1) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_texts(v, depth - 1) for v in value)
    return 0


class ThreadedSession(AsyncSession):
    """An `AsyncSession` whose operations run on a worker thread whatever its store, awaiting
    only what must be awaited on the loop: a service's loop stays free while one request
    compacts a megabyte, even in memory."""

    async def _drive(self, steps: Steps[SessionRequest, T]) -> T:
        """On the loop's executor, not a thread of its own: a service lends a session to one
        request at a time, and its many sessions share the executor's threads."""
        return await adrive_in_thread(steps)

    async def _drive_off(self, steps: Steps[SessionRequest, T]) -> T:
        """On the loop's executor too: every operation of this session is one hop."""
        return await adrive_in_thread(steps)


async def acompact_messages(
    messages: Iterable[Mapping[str, Any]],
    *,
    context_window: int,
    summarizer: Summarizer | None = None,
    settings: CompactionSettings | None = None,
    counter: TokenCounter | None = None,
    mode: CompactionMode | None = None,
) -> tuple[list[dict[str, Any]], CompactionStats]:
    """`compact_messages` inside an event loop."""
    base = replace(settings or CompactionSettings(), context_window=context_window)
    session = AsyncSession(MemoryStore(), "messages", counter, summarizer, base)
    return await session._drive_off(session._compact_list_steps(messages, mode))
