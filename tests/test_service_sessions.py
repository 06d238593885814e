"""The service keeps a bounded number of sessions between requests: a conversation's next request
finds what its last one remembered, and the worker holds no more sessions (nor memos) however
many conversations it has served. Real uvicorn on 127.0.0.1, a real SQLite file."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from live_server import serving

from precis.core.memo import Memo
from precis.engine.settings import CompactionSettings
from precis.server import ServiceLimits, create_app
from precis.server.deps import Service
from precis.session._base import BaseSession
from precis.stores import SQLiteStore

KEPT = 3
SETTINGS = CompactionSettings(context_window=2000)
USER = (
    "turn {n}: the payments deploy failed on host db-{n}.internal at port 5433 because the "
    "migration 00{n}_orders.sql locked the orders table; check /var/log/deploy-{n}.log"
)
REPLY = "Turn {n}: rolled back release 2.{n}; the lock came from migration 00{n}_orders.sql."


def _turn(n: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": USER.format(n=n)},
        {"role": "assistant", "content": REPLY.format(n=n)},
    ]


def _live(kind: type) -> int:
    """How many objects of `kind` are alive in this process now."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "precis.db")
    yield opened
    opened.close()


def _service(app: object) -> Service:
    service = app.state.service  # type: ignore[attr-defined]
    assert isinstance(service, Service)
    return service


def test_sessions_and_memos_stay_bounded_however_many_conversations(store: SQLiteStore) -> None:
    """After 24 conversations (appends and compactions each), the app holds at most KEPT idle
    sessions, and no more sessions or memos are alive than it holds."""
    app = create_app(store, settings=SETTINGS, limits=ServiceLimits(idle_sessions=KEPT))
    service = _service(app)
    sessions_before, memos_before = _live(BaseSession), _live(Memo)
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        for c in range(24):
            assert client.post("/v1/conversations", json={"id": f"c{c}"}).status_code == 201
            for n in range(6):
                path = f"/v1/conversations/c{c}/messages"
                assert client.post(path, json={"messages": _turn(n)}).status_code == 201
            assert client.post(f"/v1/conversations/c{c}/compact", json={}).status_code == 200
            assert client.get(f"/v1/conversations/c{c}/context").status_code == 200
        assert len(service.idle) == KEPT
        assert _live(BaseSession) - sessions_before <= KEPT
        assert _live(Memo) - memos_before <= KEPT


def test_next_request_finds_what_the_last_remembered(store: SQLiteStore) -> None:
    """A request's session is kept for the conversation's next request, with its memo: the
    next compaction reads the facts the last one found, not a cold memo."""
    app = create_app(store, settings=SETTINGS, limits=ServiceLimits(idle_sessions=KEPT))
    service = _service(app)
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.post("/v1/conversations", json={"id": "warm"}).status_code == 201
        path = "/v1/conversations/warm/messages"
        assert client.post(path, json={"messages": _turn(1)}).status_code == 201
        assert client.post("/v1/conversations/warm/compact", json={}).status_code == 200
        kept = service.idle.take("warm")
        assert kept is not None and kept.memo.entries() > 0
        service.idle.give(kept)
        assert client.post(path, json={"messages": _turn(2)}).status_code == 201
        assert service.idle.take("warm") is kept  # lent to that request and given back


@contextmanager
def two_workers(store: SQLiteStore, tmp_path: Path) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two live workers over one SQLite file, `store` the first's: a client for each."""
    other_store = SQLiteStore(tmp_path / "precis.db")
    first = create_app(store, settings=SETTINGS, limits=ServiceLimits(idle_sessions=KEPT))
    second = create_app(other_store, settings=SETTINGS, limits=ServiceLimits(idle_sessions=KEPT))
    try:
        with (
            serving(first) as one,
            serving(second) as two,
            httpx.Client(base_url=one, timeout=60) as a,
            httpx.Client(base_url=two, timeout=60) as b,
        ):
            yield a, b
    finally:
        other_store.close()


def test_a_kept_session_sees_what_another_worker_wrote(store: SQLiteStore, tmp_path: Path) -> None:
    """Two workers over one database: a worker's kept session answers with the messages and
    the compaction the other worker committed since its last request."""
    with two_workers(store, tmp_path) as (a, b):
        assert a.post("/v1/conversations", json={"id": "shared"}).status_code == 201
        path = "/v1/conversations/shared/messages"
        for n in range(4):
            assert a.post(path, json={"messages": _turn(n)}).status_code == 201
        assert b.post(path, json={"messages": _turn(9)}).status_code == 201
        assert b.post("/v1/conversations/shared/compact", json={}).status_code == 200
        context = a.get("/v1/conversations/shared/context").json()
        contents = [m["content"] for m in context["messages"]]
        assert context["version"] == 1
        assert any(m["kind"] == "summary" for m in context["messages"])
        assert contents[-1] == REPLY.format(n=9)
        appended = a.post(path, json={"messages": _turn(10)}).json()
        tokens = b.get("/v1/conversations/shared/context").json()["tokens"]
        assert appended["tokens"] == tokens


def test_two_workers_appending_in_turn_each_report_the_tokens_the_store_holds(
    store: SQLiteStore, tmp_path: Path
) -> None:
    """An append hands its check the context its transaction read only when the worker's last
    read is that context: appends by two workers to one conversation, in turn and by runs, with
    compactions between, each answer the tokens a fresh read of the other worker counts."""
    with two_workers(store, tmp_path) as (a, b):
        assert a.post("/v1/conversations", json={"id": "shared"}).status_code == 201
        path = "/v1/conversations/shared/messages"
        clients = {"a": (a, b), "b": (b, a)}
        for n, who in enumerate("aabbabaaabbbab"):
            writer, reader = clients[who]
            answer = writer.post(path, json={"messages": _turn(n)})
            assert answer.status_code == 201
            fresh = reader.get("/v1/conversations/shared/context").json()
            assert answer.json()["tokens"] == fresh["tokens"], (n, who)
            assert fresh["messages"][-1]["content"] == REPLY.format(n=n)
            if n % 5 == 4:
                assert writer.post("/v1/conversations/shared/compact", json={}).status_code in (
                    200,
                    409,
                )


def test_every_route_on_a_conversation_gives_its_session_back(store: SQLiteStore) -> None:
    """Each route that borrows the conversation's session gives that same session back when it
    succeeds (the route does, not a dependency's exit), so the next request finds its memo; a
    refused request lets it go."""
    app = create_app(store, settings=SETTINGS, limits=ServiceLimits(idle_sessions=KEPT))
    service = _service(app)
    base = "/v1/conversations/lent"
    requests = [
        ("POST", f"{base}/messages", {"messages": _turn(6)}, 201),
        ("GET", f"{base}/context", None, 200),
        ("GET", f"{base}/prompt", None, 200),
        ("POST", f"{base}/compact", {}, 200),
        ("GET", f"{base}/recall?q=migration", None, 200),
        ("GET", f"{base}/events", None, 200),
        ("GET", f"{base}/events/stream?since=0&max_events=1", None, 200),
    ]
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.post("/v1/conversations", json={"id": "lent"}).status_code == 201
        for n in range(6):  # enough that the compaction commits, and the stream has its event
            assert client.post(f"{base}/messages", json={"messages": _turn(n)}).status_code == 201
        kept = service.idle.take("lent")
        assert kept is not None
        for method, path, body, status in requests:
            service.idle.give(kept)
            response = client.request(method, path, json=body)
            assert response.status_code == status, (path, response.text)
            if path.endswith("/compact"):
                assert response.json()["compacted"], response.text
            assert service.idle.take("lent") is kept, path
        service.idle.give(kept)
        refused = client.post(f"{base}/messages", json={"messages": [{"role": "bogus"}]})
        assert refused.status_code == 422
        many = {"messages": [{"role": "user", "content": "x"}] * 1001}
        assert client.post(f"{base}/messages", json=many).status_code == 413
        assert service.idle.take("lent") is None
