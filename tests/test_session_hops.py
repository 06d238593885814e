"""What one session operation costs in store work and thread hops (#34 items 1 and 3): an append
is one SQLite transaction; a model call's check and prompt read the context rows once; an
`AsyncSession` on a store whose calls never wait makes no hop, and on SQLite one per operation."""

from __future__ import annotations

import asyncio
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from precis import AsyncSession, CompactionSettings, Session
from precis.stores.base import ContextSnapshot
from precis.stores.dialect import Handle
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import SQLiteStore


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
    assert store.rows_read - read == 1  # the one new message, read once for check and prompt
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


def test_an_async_operation_on_sqlite_runs_its_store_calls_on_one_thread(tmp_path: Path) -> None:
    store = CountingSQLite(tmp_path / "c.db")

    async def main() -> tuple[int, list[int]]:
        session = AsyncSession(store, "c", settings=CompactionSettings(context_window=4000))
        await session.append({"role": "user", "content": "Fix the flaky test."})
        store.threads.clear()
        await session.prompt()  # the system prompt and the context: two transactions
        return threading.get_ident(), list(store.threads)

    loop_thread, threads = asyncio.run(main())
    assert len(threads) >= 2 and len(set(threads)) == 1 and loop_thread not in threads
