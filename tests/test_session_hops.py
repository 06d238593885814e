"""What one session operation costs in store work and thread hops (#34 items 1 and 3): an append
is one SQLite transaction; a model call's check and prompt read the context rows once; an
`AsyncSession` makes its store calls on the loop when they need not wait (no hop), a call that
would wait (another writer, a checkpoint due, the store's lock held) on its own thread, and an
operation that computes at length (a compaction, a search) in one hop to that thread."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from precis import AsyncSession, CompactionSettings, Session
from precis.core.messages import KIND_MESSAGE
from precis.engine.hooks import Hooks
from precis.session._async import LOOP_APPEND_CHARS
from precis.session._io import OwnThread
from precis.stores.base import ContextSnapshot
from precis.stores.dialect import Handle
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import WRITES_BETWEEN_CHECKPOINTS, SQLiteStore
from precis.summarize.base import LocalSummarizer


class CountingSQLite(SQLiteStore):
    """A real SQLite store that counts its transactions and the message rows it reads."""

    def __init__(self, path: Path) -> None:
        self.transactions = 0
        self.rows_read = 0
        self.threads: list[int] = []
        super().__init__(path)

    def _transaction(self, *, write: bool) -> AbstractContextManager[Handle]:
        self.transactions += 1
        self.threads.append(threading.get_ident())
        return super()._transaction(write=write)

    def context(self, conversation_id: str, *, since: ContextSnapshot | None = None) -> Any:
        snapshot = super().context(conversation_id, since=since)
        whole = since is None or snapshot.version != since.version
        self.rows_read += len(snapshot.messages) - (0 if whole else len(since.messages))
        return snapshot


def test_an_append_is_one_sqlite_transaction(tmp_path: Path) -> None:
    store = CountingSQLite(tmp_path / "c.db")
    session = Session(store, "c", settings=CompactionSettings(context_window=4000))
    session.append({"role": "user", "content": "Deploy the payments service, release 2.1."})
    before = store.transactions
    session.append({"role": "assistant", "content": "Deploying release 2.1 now."})
    assert store.transactions - before == 1
    assert [s.turn for s in store.samples("c")] == [1, 2]  # the append's sample came with it


def test_a_model_call_reads_the_context_rows_once(tmp_path: Path) -> None:
    store = CountingSQLite(tmp_path / "c.db")
    session = Session(store, "c", settings=CompactionSettings(context_window=100_000))
    for n in range(5):
        session.append({"role": "user", "content": f"step {n}: check the build"})
        session.append({"role": "assistant", "content": f"build {n} is green"})
    session.maybe_compact()
    session.prompt()
    read = store.rows_read
    session.append({"role": "user", "content": "and the deploy?"})
    assert session.maybe_compact() == []
    prompt = session.prompt()
    # The new message came with the append (its transaction saw the context as last read):
    # the check and the prompt read no message row again.
    assert store.rows_read - read == 0
    assert prompt[-1]["content"] == "and the deploy?" and len(prompt) == 11


def test_an_async_session_in_memory_makes_no_hop() -> None:
    calls: list[int] = []

    class Recording(MemoryStore):
        def append(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(threading.get_ident())
            return super().append(*args, **kwargs)

        def context(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(threading.get_ident())
            return super().context(*args, **kwargs)

    async def main() -> int:
        session = AsyncSession(Recording(), "c", settings=CompactionSettings(context_window=4000))
        await session.append({"role": "user", "content": "Fix the flaky test."})
        await session.maybe_compact()
        await session.prompt()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert calls and set(calls) == {loop_thread}


def test_an_async_operation_on_sqlite_makes_its_store_calls_on_the_loop_when_none_waits(
    tmp_path: Path,
) -> None:
    store = CountingSQLite(tmp_path / "c.db")

    async def main() -> tuple[int, list[int]]:
        session = AsyncSession(store, "c", settings=CompactionSettings(context_window=4000))
        await session.append({"role": "user", "content": "Fix the flaky test."})
        store.threads.clear()
        await session.append({"role": "assistant", "content": "Running the tests now."})
        await session.maybe_compact()
        await session.prompt()  # the system prompt and the context: two transactions
        await session.aclose()
        return threading.get_ident(), list(store.threads)

    loop_thread, threads = asyncio.run(main())
    assert len(threads) >= 4 and set(threads) == {loop_thread}


def test_an_append_that_meets_another_writer_waits_on_the_sessions_thread_not_the_loop(
    tmp_path: Path,
) -> None:
    # Another connection (a CLI import, another process) holds the write lock: the append made
    # on the loop is refused at once (nothing written) and made again on the session's thread,
    # which waits there for the lock while the loop goes on serving other tasks.
    path = tmp_path / "c.db"
    store = CountingSQLite(path)
    other = sqlite3.connect(path, isolation_level=None)

    async def main() -> tuple[int, list[int], int, list[str]]:
        session = AsyncSession(store, "c", settings=CompactionSettings(context_window=4000))
        await session.append({"role": "user", "content": "Fix the flaky test."})
        other.execute("BEGIN IMMEDIATE")
        store.threads.clear()
        append = asyncio.create_task(
            session.append({"role": "assistant", "content": "Running the tests now."})
        )
        turns = 0
        while len(store.threads) < 2:  # refused on the loop, then begun on its thread
            turns += 1  # the loop is free: this task runs while the append waits
            await asyncio.sleep(0)
        assert not append.done()  # it waits for the other writer, off the loop
        other.execute("COMMIT")
        await append
        contents = [m.content for m in await session.history()]
        await session.aclose()
        return threading.get_ident(), list(store.threads), turns, contents

    loop_thread, threads, turns, contents = asyncio.run(main())
    other.close()
    assert threads[0] == loop_thread and threads[1] != loop_thread and turns >= 1
    assert contents == ["Fix the flaky test.", "Running the tests now."]  # stored once


def test_writes_on_the_loop_neither_wait_nor_checkpoint_and_a_checkpoint_comes_in_time(
    tmp_path: Path,
) -> None:
    # A write made on the loop must not wait for another writer (busy timeout 0) nor run a
    # checkpoint at its commit (an fsync): one write in WRITES_BETWEEN_CHECKPOINTS + 1 goes to
    # the session's thread with both, so SQLite's own checkpoint keeps the log short.
    seen: list[tuple[int, int, int]] = []

    class Watching(SQLiteStore):
        @contextlib.contextmanager
        def _transaction(self, *, write: bool) -> Iterator[Handle]:
            with super()._transaction(write=write) as db:
                if write:
                    busy = db.execute("PRAGMA busy_timeout").fetchone()[0]
                    pages = db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
                    seen.append((threading.get_ident(), busy, pages))
                yield db

    store = Watching(tmp_path / "c.db")
    opened = seen[:]  # the migrations' writes, made the waiting way
    writes = 2 * WRITES_BETWEEN_CHECKPOINTS + 3

    async def main() -> int:
        session = AsyncSession(store, "c", settings=CompactionSettings(context_window=100_000))
        await session.set_system_prompt("You fix tests.")
        seen.clear()
        for n in range(writes):
            await session.append({"role": "user", "content": f"step {n}: run the tests"})
        await session.aclose()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert opened and all(busy > 0 and pages > 0 for _, busy, pages in opened)
    on_loop = [(busy, pages) for thread, busy, pages in seen if thread == loop_thread]
    off_loop = [(busy, pages) for thread, busy, pages in seen if thread != loop_thread]
    assert set(on_loop) == {(0, 0)} and len(seen) >= writes  # an append, the odd sample
    assert len(off_loop) >= 2 and all(busy > 0 and pages > 0 for busy, pages in off_loop)
    run = 0  # writes on the loop since the last one made the waiting way
    for thread, _, _ in seen:
        run = run + 1 if thread == loop_thread else 0
        assert run <= WRITES_BETWEEN_CHECKPOINTS


def _thread(ident: int) -> threading.Thread:
    return next(t for t in threading.enumerate() if t.ident == ident)


def test_an_async_sessions_compactions_hop_to_its_own_thread_which_ends_at_close(
    tmp_path: Path,
) -> None:
    store = CountingSQLite(tmp_path / "c.db")
    settings = CompactionSettings(context_window=2000, background_compaction=False)

    async def main() -> tuple[int, list[int], threading.Thread]:
        session = AsyncSession(store, "c", settings=settings)
        for n in range(20):
            await session.append({"role": "user", "content": f"step {n}: " + "check it. " * 30})
        store.threads.clear()
        assert (await session.compact()).mode != "none"
        threads = list(store.threads)
        own = _thread(threads[-1])
        await session.aclose()
        own.join(60)  # a hang guard: it ends once its operation is done
        assert not own.is_alive() and not session.thread.alive
        await session.recall("check")
        assert session.thread.alive  # the next operation off the loop started another
        await session.aclose()
        return threading.get_ident(), threads, own

    loop_thread, threads, own = asyncio.run(main())
    assert set(threads) == {own.ident} and loop_thread not in threads


def test_an_idle_session_thread_ends_and_the_next_hop_starts_another() -> None:
    async def main() -> None:
        own = OwnThread(idle=0)  # ends as soon as it has nothing to do
        first = await own.run(threading.current_thread)
        first.join(60)  # a hang guard: it ends on its own
        second = await own.run(threading.current_thread)
        assert not first.is_alive() and second is not first
        assert second is not threading.current_thread()
        own.close()

    asyncio.run(main())


def test_a_session_call_made_while_its_thread_is_busy_runs_beside_it(tmp_path: Path) -> None:
    # An async pre-compaction hook that reads the session runs while the compaction holds the
    # session's thread: its read goes to another thread instead of waiting for the compaction.
    seen: list[tuple[int, int]] = []

    async def main() -> None:
        session: AsyncSession

        async def hook(context: Any) -> None:
            seen.append((len(await session.context()), threading.get_ident()))

        settings = CompactionSettings(context_window=2000, background_compaction=False)
        store = CountingSQLite(tmp_path / "c.db")
        session = AsyncSession(store, "c", settings=settings, hooks=Hooks(pre=[hook]))
        for n in range(20):
            await session.append({"role": "user", "content": f"step {n}: " + "check it. " * 30})
        store.threads.clear()
        stats = await session.compact()
        assert stats.mode != "none" and len(set(store.threads)) == 2  # its own, and the hook's
        await session.aclose()

    asyncio.run(main())
    assert seen and seen[0][0] == 20


def test_context_variables_reach_the_store_on_the_session_thread(tmp_path: Path) -> None:
    tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")
    seen: list[str] = []

    class Reading(SQLiteStore):
        def recall(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(f"{tenant.get()} on {threading.current_thread().name}")
            return super().recall(*args, **kwargs)

    async def main() -> None:
        session = AsyncSession(Reading(tmp_path / "c.db"), "c")
        tenant.set("acme")
        await session.append({"role": "user", "content": "Fix the flaky test."})
        await session.recall("flaky")  # a search: on the session's thread
        await session.aclose()

    asyncio.run(main())
    assert seen == ["acme on precis-session"]


def test_a_cancelled_operation_frees_the_session_thread_for_the_next(tmp_path: Path) -> None:
    class Hanging(LocalSummarizer):
        """Holds the compaction on the session's thread until the test lets it go."""

        name = "hanging"

        def __init__(self) -> None:
            self.entered = threading.Event()
            self.release = threading.Event()

        def summarize(self, request: Any) -> str:
            self.entered.set()
            self.release.wait(60)  # a hang guard
            return "The tests were run."

    async def main() -> None:
        summarizer = Hanging()
        settings = CompactionSettings(context_window=2000, background_compaction=False)
        session = AsyncSession(
            SQLiteStore(tmp_path / "c.db"), "c", summarizer=summarizer, settings=settings
        )
        for n in range(20):
            await session.append({"role": "user", "content": f"step {n}: " + "check it. " * 30})
        compaction = asyncio.create_task(session.compact("all"))
        await asyncio.to_thread(summarizer.entered.wait, 60)
        compaction.cancel()
        with pytest.raises(asyncio.CancelledError):
            await compaction
        await session.append({"role": "user", "content": "beside the abandoned compaction"})
        summarizer.release.set()
        free = session.thread._lane.free  # held until the abandoned logic ends, at its next ask
        assert await asyncio.to_thread(free.acquire, True, 60)  # a hang guard
        free.release()
        assert await session.events() == []  # abandoned: nothing committed
        await session.append({"role": "user", "content": "on the session's thread again"})
        await session.aclose()

    asyncio.run(main())


def test_a_long_append_is_made_on_the_sessions_thread_and_a_short_one_on_the_loop(
    tmp_path: Path,
) -> None:
    # Indexing and counting a long message takes milliseconds (80 ms at a megabyte), whose
    # SQLite share lets the loop run when it is made on the session's thread.
    store = CountingSQLite(tmp_path / "c.db")
    long_text = "the deploy log says " * (LOOP_APPEND_CHARS // 20 + 1)
    long_call = {"type": "function", "function": {"name": "read", "arguments": long_text}}

    async def main() -> tuple[int, list[list[int]]]:
        session = AsyncSession(store, "c", settings=CompactionSettings(context_window=10**6))
        made: list[list[int]] = []
        for item in (
            {"role": "user", "content": "Read the deploy log."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", **long_call}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": [{"type": "text", "text": long_text}]},
        ):
            store.threads.clear()
            await session.append(item)
            made.append(list(store.threads))
        await session.aclose()
        return threading.get_ident(), made

    loop_thread, made = asyncio.run(main())
    on_loop = [all(t == loop_thread for t in threads) for threads in made]
    assert on_loop == [True, False, True, False]
    assert all(threads for threads in made)


def test_two_sessions_on_one_sqlite_store_interleave_with_compactions_behind_and_lose_nothing(
    tmp_path: Path,
) -> None:
    # Two users' sessions share one store object (one connection, one lock) on one loop while
    # each one's summaries are made behind its turns on worker threads, so the loop's calls
    # meet the lock held whenever a commit runs there (and then go to a thread): every message
    # lands once, in its own conversation, and both compact.
    store = CountingSQLite(tmp_path / "c.db")
    settings = CompactionSettings(context_window=1500)
    rounds = 40

    async def user(name: str) -> tuple[list[str], int]:
        session = AsyncSession(store, name, settings=settings)
        compactions = 0
        for n in range(rounds):
            await session.append({"role": "user", "content": f"{name} step {n}: " + "go. " * 40})
            compactions += len(await session.maybe_compact())
            await session.prompt()
        compactions += len(await session.settle())
        said = [m.content for m in await session.history() if m.kind == KIND_MESSAGE]
        await session.aclose()
        return said, compactions

    async def main() -> tuple[int, list[tuple[list[str], int]]]:
        both = await asyncio.gather(user("ana"), user("bo"))
        return threading.get_ident(), list(both)

    loop_thread, both = asyncio.run(main())
    for name, (said, compactions) in zip(("ana", "bo"), both, strict=True):
        assert said == [f"{name} step {n}: " + "go. " * 40 for n in range(rounds)]
        assert compactions >= 1 and store.events(name)
    assert loop_thread in store.threads and len(set(store.threads)) >= 2  # the loop, a thread
