"""Appends many writers can trust: a pin during a compaction is kept, the tool-call check and the
write are one transaction, an error means nothing was written (503 when the store is down) and
an idempotency key makes a retry safe — on every store, through the library and the service."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import serving

from precis import AsyncSession, Session
from precis.core.errors import IdempotencyConflict, InvalidMessage, StoreUnavailable
from precis.core.messages import Message, ToolCall
from precis.core.validity import check
from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.stores import MemoryStore, SQLiteStore
from precis.stores.base import ConversationStore
from precis.stores.samples import Sample
from precis.summarize.base import LocalSummarizer, SummaryRequest
from precis.summarize.mock import MockSummarizer

CID = "safe"
# Rounds of each concurrent-writers race: on main, 63/100 (PostgreSQL) and 69/100 (SQLite)
# rounds accepted both a tool call and the user message that leaves it unanswered.
ROUNDS = 100


def user(text: str) -> Message:
    return Message(role="user", content=text)


def call(call_id: str) -> Message:
    return Message(role="assistant", tool_calls=(ToolCall(call_id, "run", "{}"),))


# --- a pin made during a compaction -------------------------------------------------------------


class PinsWhileSummarizing(LocalSummarizer):
    """The mock summary, but its first call pins a message it was asked to summarize, as another
    writer would between the compaction's snapshot and its commit."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.pinned: list[str] = []
        self.calls = 0

    @property
    def name(self) -> str:
        return "pins-while-summarizing"

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        if not self.pinned:
            target = next(m for m in request.messages if m.role == "assistant" and not m.pinned)
            self.store.set_pinned(CID, target.id, True)
            self.pinned.append(target.id)
        return MockSummarizer().summarize(request)


def test_a_message_pinned_during_a_compaction_stays_in_context(
    any_store: ConversationStore,
) -> None:
    summarizer = PinsWhileSummarizing(any_store)
    session = Session(any_store, CID, summarizer=summarizer)
    for n in range(12):
        session.append(
            user(f"question {n} about the release"), Message(role="assistant", content=f"reply {n}")
        )
    result = session.compact_result()
    assert result.compacted and summarizer.calls >= 2  # the first commit was refused, retried
    (pinned_id,) = summarizer.pinned
    kept = {m.id: m for m in session.context()}
    assert pinned_id in kept and kept[pinned_id].pinned
    assert len(session.events()) == 1


# --- the pairing check and the write: one transaction -------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def two_writers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[ConversationStore, ConversationStore]]:
    """Two store objects over the same data, as two service processes would hold."""
    if request.param == "memory":
        shared = MemoryStore()
        yield shared, shared
        return
    stores: list[ConversationStore]
    if request.param == "sqlite":
        stores = [SQLiteStore(tmp_path / "p.db"), SQLiteStore(tmp_path / "p.db")]
    else:
        from precis.stores.postgres import PostgresStore

        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("pg_schema")
        stores = [PostgresStore(url, schema=schema, max_size=2) for _ in range(2)]
    yield stores[0], stores[1]
    for store in stores:
        store.close()


def _race(
    writers: tuple[ConversationStore, ConversationStore],
    conversation_id: str,
    batches: tuple[list[Message], list[Message]],
) -> tuple[bool, bool]:
    """Append the two batches at once, each through its own session; which were accepted."""
    barrier = threading.Barrier(2)

    def append(store: ConversationStore, batch: list[Message]) -> bool:
        session = Session(store, conversation_id)
        barrier.wait()
        try:
            session.append(*batch)
        except InvalidMessage:
            return False
        return True

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(append, s, b) for s, b in zip(writers, batches, strict=True)]
        first, second = (f.result() for f in futures)
    return first, second


def test_a_tool_call_and_a_user_message_at_once_never_break_the_pairing(
    two_writers: tuple[ConversationStore, ConversationStore],
) -> None:
    reader = two_writers[0]
    for n in range(ROUNDS):
        cid = f"round-{n}"
        reader.append(cid, [user("go")])
        made_call, said_more = _race(two_writers, cid, ([call(f"c{n}")], [user("and also")]))
        context = reader.context(cid).messages
        assert check(context) == [], f"round {n}: {check(context)}"
        assert made_call or said_more
        if made_call and said_more:  # only in the order that keeps the rules
            assert [m.role for m in context] == ["user", "user", "assistant"], f"round {n}"


def test_two_tool_calls_at_once_one_is_refused(
    two_writers: tuple[ConversationStore, ConversationStore],
) -> None:
    reader = two_writers[0]
    for n in range(ROUNDS):
        cid = f"round-{n}"
        reader.append(cid, [user("go")])
        accepted = _race(two_writers, cid, ([call(f"a{n}")], [call(f"b{n}")]))
        assert sorted(accepted) == [False, True], f"round {n}: both {accepted}"
        context = reader.context(cid).messages
        assert check(context) == [] and len(context) == 2


# --- idempotency keys, through the library -------------------------------------------------------


def test_a_retried_library_append_is_stored_once(any_store: ConversationStore) -> None:
    session = Session(any_store, CID)
    first = session.append(user("deploy to staging"), idempotency_key="req-1")
    again = session.append(user("deploy to staging"), idempotency_key="req-1")
    assert again == first and first[0].pinned  # the task pin is what the first stored
    assert len(session.history()) == 1
    with pytest.raises(IdempotencyConflict, match="'req-1'"):
        session.append(user("something else"), idempotency_key="req-1")
    assert len(session.history()) == 1
    assert len(any_store.samples(CID)) == 1  # the replay recorded no turn either


def test_a_retried_async_append_is_stored_once(any_store: ConversationStore) -> None:
    async def twice() -> tuple[list[Message], list[Message]]:
        session = AsyncSession(any_store, CID)
        call_first = await session.append(call("c1"), idempotency_key="k")
        return call_first, await session.append(call("c1"), idempotency_key="k")

    first, again = asyncio.run(twice())
    assert first == again and any_store.count(CID) == 1


# --- store unavailable: an error, nothing written -----------------------------------------------


@contextmanager
def full_disk(store: SQLiteStore) -> Iterator[None]:
    """The file may not grow past its size now: SQLite's "database or disk is full"."""
    with store._lock:
        db = store._connection()
        pages = int(db.execute("PRAGMA page_count").fetchone()[0])
        limit = int(db.execute("PRAGMA max_page_count").fetchone()[0])
        db.execute(f"PRAGMA max_page_count = {pages}")
    try:
        yield
    finally:
        with store._lock:
            db.execute(f"PRAGMA max_page_count = {limit}")


BIG = "a long tool output line\n" * 20_000  # far more than the free space of any page


def test_a_full_disk_is_unavailable_and_writes_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    session = Session(store, CID)
    session.append(user("before"))
    with full_disk(store), pytest.raises(StoreUnavailable, match="full"):
        session.append(user(BIG), idempotency_key="k")
    assert store.count(CID) == 1
    session.append(user(BIG), idempotency_key="k")  # the retry, once there is room
    assert store.count(CID) == 2
    store.close()


def test_a_file_locked_by_another_writer_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    store = SQLiteStore(path, busy_timeout_ms=0)
    store.append(CID, [user("before")])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write transaction, held
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            store.append(CID, [user("while locked")])
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert [m.content for m in store.history(CID)] == ["before"]
    store.close()


def test_a_postgres_store_at_a_closed_port_is_unavailable() -> None:
    pytest.importorskip("psycopg")
    from precis.stores.postgres import PostgresStore

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(StoreUnavailable, match="cannot open"):
        PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/test", connect_timeout=5)


class DownAfterAppend(SQLiteStore):
    """A real SQLite store whose reads and sample writes fail right after an append commits, as
    in an outage that begins just then."""

    down = False

    def append(self, *args: Any, **kwargs: Any) -> list[Message]:
        stored = super().append(*args, **kwargs)
        self.down = True
        return stored

    def system_prompt(self, conversation_id: str) -> tuple[str, bool]:
        if self.down:
            raise StoreUnavailable("the store went down")
        return super().system_prompt(conversation_id)

    def add_sample(
        self, conversation_id: str, sample: Sample, *, grow: bool = False
    ) -> Sample | None:
        if self.down:
            raise StoreUnavailable("the store went down")
        return super().add_sample(conversation_id, sample, grow=grow)


def test_an_append_acknowledged_after_its_commit_even_if_later_work_fails(
    tmp_path: Path,
) -> None:
    store = DownAfterAppend(tmp_path / "p.db")
    stored = Session(store, CID).append(user("kept"))  # returns: the caller must not retry
    store.down = False
    assert store.history(CID) == stored
    app = create_app(store, settings=CompactionSettings(context_window=4000))
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        response = client.post(
            f"/v1/conversations/{CID}/messages",
            json={"messages": [{"role": "user", "content": "x"}]},
        )
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["tokens"] is None and [m["content"] for m in body["messages"]] == ["x"]
    store.down = False
    assert [m.content for m in store.history(CID)] == ["kept", "x"]
    store.close()


# --- the service: 503 with Retry-After, idempotent retries --------------------------------------


@contextmanager
def service(store: ConversationStore) -> Iterator[httpx.Client]:
    app = create_app(store, settings=CompactionSettings(context_window=100_000))
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/v1/conversations", json={"id": CID}).status_code == 201
        yield client


def post(client: httpx.Client, text: str, key: str | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    body = {"messages": [{"role": "user", "content": text}]}
    return client.post(f"/v1/conversations/{CID}/messages", json=body, headers=headers)


def total(client: httpx.Client) -> int:
    count: int = client.get(f"/v1/conversations/{CID}/history").json()["total"]
    return count


def test_a_full_disk_answers_503_and_the_retry_is_stored_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    with service(store) as client:
        assert post(client, "before").status_code == 201
        with full_disk(store):
            refused = post(client, BIG, key="retry-me")
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "5"
        assert refused.json() == {"detail": "the store is unavailable just now; retry later"}
        assert total(client) == 1
        first, again = post(client, BIG, key="retry-me"), post(client, BIG, key="retry-me")
        assert first.status_code == again.status_code == 201
        assert [m["id"] for m in again.json()["messages"]] == [
            m["id"] for m in first.json()["messages"]
        ]
        assert total(client) == 2
    store.close()


def test_a_killed_postgres_connection_answers_503_then_recovers(
    postgres_url: str, pg_schema: str
) -> None:
    import psycopg

    from precis.stores.postgres import PostgresStore

    joiner = "&" if "?" in postgres_url else "?"
    store = PostgresStore(f"{postgres_url}{joiner}application_name={pg_schema}", schema=pg_schema)
    with service(store) as client:
        assert post(client, "before").status_code == 201
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) "
                "FROM pg_stat_activity WHERE application_name = %s",
                (pg_schema,),
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        # Each killed pooled connection fails the call that borrows it (the first one does),
        # and is replaced: retries with one key then succeed and store the message once.
        answers = [post(client, "after", key="k") for _ in range(killed[0] + 1)]
        statuses = [answer.status_code for answer in answers]
        assert statuses[0] == 503 and statuses[-1] == 201, statuses
        assert answers[0].headers["Retry-After"] == "5"
        assert set(statuses[statuses.index(201) :]) == {201}
        assert total(client) == 2
    store.close()


def test_an_idempotency_key_through_the_service(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    with service(store) as client:
        first, again = post(client, "once", key="req-7"), post(client, "once", key="req-7")
        assert first.status_code == again.status_code == 201
        assert again.json()["messages"] == first.json()["messages"]
        assert total(client) == 1
        reused = post(client, "another", key="req-7")
        assert reused.status_code == 422
        assert "idempotency key 'req-7' was already used" in reused.json()["detail"]
        assert post(client, "k", key="bad key").status_code == 422  # a space: not a token
        # Concurrent duplicates: four requests with one key, stored once, answered alike.
        barrier = threading.Barrier(4)

        def send(_: int) -> httpx.Response:
            barrier.wait()
            return post(client, "at once", key="burst")

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(send, range(4)))
        assert [a.status_code for a in answers] == [201] * 4
        assert len({a.json()["messages"][0]["id"] for a in answers}) == 1
        assert total(client) == 2
    store.close()
