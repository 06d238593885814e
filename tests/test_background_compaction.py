"""An async session's summary made behind its turns: the turn waits for it only over the hard
watermark, and it commits by compare-and-set over whatever was appended meanwhile.

The summarizer is held on an event the test sets, so every interleaving is chosen, not timed;
the stores are the real ones (memory, a SQLite file, a PostgreSQL schema).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from precis.core.errors import StoreUnavailable, VersionConflict
from precis.core.messages import KIND_SUMMARY, Message
from precis.core.tokens import TextEstimator
from precis.engine.results import CompactionStats
from precis.engine.settings import CompactionSettings
from precis.integrations import Sessions
from precis.session import AsyncSession, Session
from precis.session._behind import Behind
from precis.stores.base import ConversationStore
from precis.stores.memory import MemoryStore
from precis.summarize.base import SummaryRequest

T = TypeVar("T")
WINDOW = 2000
# Over the soft watermark (1,000 tokens) after 12 such messages, under the hard one (1,900)
# with a few more; past it with many more.
WORDS = "the deploy of service {n} touched files, ports and the release notes " * 6
# A guard against a hang only (a turn that waits where it must not never ends): no assertion
# rests on it, and a correct run never comes near it.
HANG_GUARD = 60.0


def settings(**changes: Any) -> CompactionSettings:
    base = {
        "context_window": WINDOW,
        "soft_watermark": 0.5,
        "hard_watermark": 0.95,
        "background_compaction": True,
    }
    return CompactionSettings(**(base | changes))


def say(n: int) -> Message:
    return Message(role="user" if n % 2 == 0 else "assistant", content=f"{n}: {WORDS.format(n=n)}")


class Held:
    """A summarizer that answers only once the test releases it (or fails, when told to)."""

    name = "held"

    def __init__(self, error: Exception | None = None) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.error = error
        self.calls = 0
        self.on_call: Callable[[], None] = lambda: None

    def summarize(self, request: SummaryRequest) -> str:
        raise AssertionError("an async session awaits asummarize")

    async def asummarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        self.started.set()
        await self.release.wait()
        self.on_call()
        if self.error is not None:
            raise self.error
        return f"Summary {self.calls}: the user deployed services and kept the release notes."


class Watched(Behind):
    """`Behind` that says when a turn starts waiting for it."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(conversation_id)
        self.waiting = asyncio.Event()

    async def wait(self) -> list[CompactionStats]:
        self.waiting.set()
        return await super().wait()


async def guarded(work: Coroutine[Any, Any, T]) -> T:
    return await asyncio.wait_for(work, HANG_GUARD)


async def fill(session: AsyncSession, start: int, count: int) -> list[Message]:
    appended: list[Message] = []
    for n in range(start, start + count):
        appended += await session.append(say(n))
    return appended


async def started_behind(session: AsyncSession, held: Held) -> list[Message]:
    """Fill past the soft watermark and start the compaction; it is held in the summarizer."""
    appended = await fill(session, 0, 12)
    assert await session.tokens() > (session.settings.threshold or 0)
    assert await guarded(session.maybe_compact()) == []
    await guarded(held.started.wait())
    assert session.behind is not None and session.behind.running
    return appended


def test_messages_appended_during_a_background_compaction_stay_after_it_in_order(
    any_store: ConversationStore,
) -> None:
    async def main() -> None:
        held = Held()
        async with AsyncSession(any_store, "c", summarizer=held, settings=settings()) as s:
            before = await started_behind(s, held)
            meanwhile = await fill(s, 12, 3)  # stored while the summary is being made
            assert not held.release.is_set()
            held.release.set()
            (stats,) = await guarded(s.settle())
            assert stats.messages_count_after < stats.messages_count_before
            context = await s.context()
            history = await s.history()
        summaries = [i for i, m in enumerate(context) if m.kind == KIND_SUMMARY]
        assert len(summaries) == 1
        # The appended ones are the newest, in the order they were appended, after the summary.
        assert [m.id for m in context[-3:]] == [m.id for m in meanwhile]
        assert summaries[0] < len(context) - 3
        # None lost: every message is in the history in order, the summary after the 12.
        ids = [m.id for m in history if m.kind != KIND_SUMMARY]
        assert ids == [m.id for m in before + meanwhile]

    asyncio.run(main())


def test_a_turn_below_the_hard_watermark_does_not_wait_for_the_summarizer() -> None:
    async def main() -> None:
        held = Held()
        async with AsyncSession(MemoryStore(), "c", summarizer=held, settings=settings()) as s:
            await started_behind(s, held)
            # A whole turn while the summary is held: store, check, view, prompt.
            await guarded(s.append(say(12)))
            assert await guarded(s.maybe_compact()) == []
            view = await guarded(s.view())
            prompt = await guarded(s.prompt())
            assert not held.release.is_set() and s.behind is not None and s.behind.running
            assert view[-1].content.startswith("12: ") and len(prompt) == len(view)
            assert held.calls == 1  # one compaction at a time: the check started no other
            held.release.set()
            assert len(await guarded(s.settle())) == 1

    asyncio.run(main())


def test_at_the_hard_watermark_the_turn_waits_for_the_background_compaction() -> None:
    async def main() -> None:
        held = Held()
        s = AsyncSession(MemoryStore(), "c", summarizer=held, settings=settings())
        s.behind = watched = Watched(s.conversation_id)
        await started_behind(s, held)
        await fill(s, 12, 10)
        assert await s.tokens() > (s.settings.hard_limit or 0)
        turn = asyncio.create_task(s.maybe_compact())
        await guarded(watched.waiting.wait())
        assert not turn.done()  # waiting on the held summarizer
        held.release.set()
        done = await guarded(turn)
        assert done and done[0].trigger == "context_window_limit"
        assert await s.tokens() <= (s.settings.hard_limit or 0)
        await s.aclose()

    asyncio.run(main())


def test_a_pin_during_the_background_compaction_makes_it_plan_again() -> None:
    async def main() -> None:
        held = Held()
        async with AsyncSession(MemoryStore(), "c", summarizer=held, settings=settings()) as s:
            before = await started_behind(s, held)
            await s.pin(before[1].id)  # bumps the version: the planned commit must not land
            meanwhile = await fill(s, 12, 2)
            held.release.set()
            (stats,) = await guarded(s.settle())
            context = await s.context()
            history = await s.history()
        assert held.calls >= 2  # planned again against the pinned context, and committed
        assert before[1].id in {m.id for m in context if m.pinned}
        # The new plan is of the context as it stands, the appended messages in it: the newest
        # is kept, and every one is in the history in order.
        assert context[-1].id == meanwhile[-1].id
        ids = [m.id for m in history if m.kind != KIND_SUMMARY]
        assert ids == [m.id for m in before + meanwhile]
        assert stats.messages_count_before == len(before) + len(meanwhile)

    asyncio.run(main())


def test_a_pin_at_every_attempt_fails_the_background_compaction_cleanly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        held = Held()
        store = MemoryStore()
        s = AsyncSession(store, "c", summarizer=held, settings=settings(commit_retries=0))
        before = await started_behind(s, held)
        pins = iter(before[:6])
        # Another writer pins a message while each attempt's summary is made: none can commit.
        held.on_call = lambda: store.set_pinned("c", next(pins).id, True)
        held.release.set()
        assert await guarded(s.settle()) == []
        assert s.behind is not None and isinstance(s.behind.failures[-1], VersionConflict)
        snapshot = store.context("c")
        # Nothing written: no summary, the same context, the next turn still answered.
        assert not snapshot.compacted
        assert not any(m.kind == KIND_SUMMARY for m in store.history("c"))
        assert [m.id for m in snapshot.messages] == [m.id for m in before]
        held.on_call = lambda: None
        assert await guarded(s.maybe_compact()) == []  # starts the next one
        assert (await guarded(s.settle()))[0].messages_count_after < len(before)
        await s.aclose()

    with caplog.at_level(logging.WARNING, "precis.session"):
        asyncio.run(main())
    assert "background compaction failed (VersionConflict)" in caplog.text


def test_two_users_interleaved_each_keep_their_own_messages_in_order(
    sql_store: ConversationStore,
) -> None:
    async def main() -> None:
        held = Held()
        sessions = Sessions(sql_store, summarizer=held, settings=settings())
        alice, bob = sessions.session("alice"), sessions.session("bob")
        first = {"alice": await fill(alice, 0, 12), "bob": await fill(bob, 100, 12)}
        assert await alice.maybe_compact() == [] and await bob.maybe_compact() == []
        later: dict[str, list[Message]] = {"alice": [], "bob": []}
        for n in range(12, 16):  # turns of the two, interleaved, while both summaries are held
            later["alice"] += await alice.append(say(n))
            later["bob"] += await bob.append(say(100 + n))
        assert alice.behind is not None and bob.behind is not None
        assert alice.behind.running and bob.behind.running
        held.release.set()
        await guarded(sessions.aclose())
        for name, session in (("alice", alice), ("bob", bob)):
            assert session.behind is not None and not session.behind.running
            assert len(session.behind.take()) == 1
            context = await session.context()
            assert [m.id for m in context[-4:]] == [m.id for m in later[name]]
            ids = [m.id for m in await session.history() if m.kind != KIND_SUMMARY]
            assert ids == [m.id for m in first[name] + later[name]]

    asyncio.run(main())


def test_a_failing_summarizer_behind_the_turns_falls_back_and_the_next_turn_is_answered() -> None:
    async def main() -> None:
        held = Held(error=RuntimeError("the summary model is down"))
        held.release.set()
        async with AsyncSession(MemoryStore(), "c", summarizer=held, settings=settings()) as s:
            await fill(s, 0, 12)
            assert await s.maybe_compact() == []
            await fill(s, 12, 1)
            (stats,) = await guarded(s.settle())
            assert stats.fallback is not None and "the summary model is down" in (
                stats.fallback_reason or ""
            )
            assert (await s.view())[-1].content.startswith("12: ")

    asyncio.run(main())


class CommitDown(MemoryStore):
    """A store whose compaction commit is unavailable (appends and reads work)."""

    def commit_compaction(self, conversation_id: str, **kwargs: Any) -> Any:
        raise StoreUnavailable("the database is restarting")


def test_a_background_compaction_that_fails_is_logged_and_kept_and_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        held = Held()
        held.release.set()
        store = CommitDown()
        async with AsyncSession(store, "c", summarizer=held, settings=settings()) as s:
            appended = await fill(s, 0, 12)
            assert await s.maybe_compact() == []
            appended += await fill(s, 12, 1)  # the turn goes on
            assert await guarded(s.settle()) == []
            assert s.behind is not None
            assert isinstance(s.behind.failures[-1], StoreUnavailable)
            assert [m.id for m in await s.context()] == [m.id for m in appended]

    with caplog.at_level(logging.WARNING, "precis.session"):
        asyncio.run(main())
    assert "background compaction failed (StoreUnavailable)" in caplog.text


def test_closing_with_cancel_stops_the_held_compaction_and_writes_nothing() -> None:
    async def main() -> None:
        held = Held()
        store = MemoryStore()
        s = AsyncSession(store, "c", summarizer=held, settings=settings())
        before = await started_behind(s, held)
        task = s.behind.task if s.behind is not None else None
        await s.aclose(cancel=True)
        assert task is not None and task.cancelled()
        assert s.behind is not None and not s.behind.running
        assert [m.id for m in store.context("c").messages] == [m.id for m in before]

    asyncio.run(main())


def test_a_sync_session_compacts_within_the_call() -> None:
    s = Session(MemoryStore(), "c", settings=settings())
    for n in range(12):
        s.append(say(n))
    (stats,) = s.maybe_compact()
    assert stats.trigger == "context_window_limit" and s.behind is None


def test_background_compaction_off_makes_the_async_turn_wait() -> None:
    async def main() -> None:
        held = Held()
        held.release.set()
        s = AsyncSession(
            MemoryStore(), "c", summarizer=held, settings=settings(background_compaction=False)
        )
        await fill(s, 0, 12)
        (stats,) = await s.maybe_compact()
        assert stats.trigger == "context_window_limit"
        assert s.behind is not None and s.behind.task is None

    asyncio.run(main())


def test_a_prompt_recompiled_after_a_compaction_behind_is_counted_before_the_turn_goes() -> None:
    """The compaction behind commits and leaves the system prompt to recompile: the next check
    must count it as it will be sent (a compiler may write a much longer one), else a turn just
    under the hard watermark by the stale prompt goes out over the window."""
    memory = "Memory: " + "the deploy notes, ports and owners of every service " * 40

    def compile_prompt(text: str, context: list[Message]) -> str:
        return f"{text.partition(chr(10))[0]}\n{memory}"  # the first line, and the memory

    async def main() -> None:
        held = Held()
        counter = TextEstimator()
        hard = settings().hard_limit or 0
        async with AsyncSession(
            MemoryStore(), "c", counter, held, settings(), compile_system_prompt=compile_prompt
        ) as s:
            await s.set_system_prompt("You deploy services.")
            await started_behind(s, held)
            held.release.set()
            assert len(await guarded(s.settle())) == 1  # committed: the prompt is stale now
            stale = counter.count_text("You deploy services.")
            n = 12
            # Messages of a turn, appended before its check: up to just under the hard
            # watermark as the stale prompt counts, over the window with the compiled one.
            while stale + sum(map(counter.count, await s.context())) + 150 < hard:
                await s.append(say(n))
                n += 1
            held.release.clear()  # a compaction this check starts stays behind the turn
            await guarded(s.maybe_compact())
            system = await s.system_prompt()
            assert memory in system
            sent = counter.count_text(system) + sum(map(counter.count, await s.view()))
            held.release.set()
        assert counter.count_text(system) - stale > WINDOW - hard  # what the check must see
        assert sent <= WINDOW, sent

    asyncio.run(main())
