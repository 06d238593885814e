"""What the service lets out: no store URL, file or password in an answer a tenant reads, and no
query string (a token may ride in one) in the access log."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from live_server import serving

from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.server.errors import STORE_FAILED, STORE_UNAVAILABLE
from precis.server.keys import ApiKeys, digest

KEY_A = "team-a-key-0123456789"
PASSWORD = "hunter2-do-not-show"


class Relay:
    """A TCP relay on 127.0.0.1 in front of the PostgreSQL server, which `cut` takes down: the
    store's connections break and new ones are refused, as when the database goes away."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # cut
            server = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone would not)
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()


@pytest.fixture
def relayed_url(postgres_url: str) -> Iterator[tuple[str, Relay]]:
    """The test database's URL through a relay, with a password the service must never show."""
    parts = urlsplit(postgres_url)
    relay = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    user = parts.username or "postgres"
    url = urlunsplit(
        (parts.scheme, f"{user}:{PASSWORD}@127.0.0.1:{relay.port}", parts.path, "", "")
    )
    try:
        yield url, relay
    finally:
        relay.cut()


def _drop_schema(postgres_url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


# How the store fails under the service, and what a caller is told: the connection is lost
# (503, retry later), or the database answers with an error of its own (its tables are gone).
FAILURES = {"connection lost": STORE_UNAVAILABLE, "tables gone": STORE_FAILED}
# Neither is the caller's fault: away for now (retry later), or broken (the operator's to fix).
STATUSES = {"connection lost": 503, "tables gone": 500}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failed_postgresql_store_is_not_described_to_a_tenant(
    relayed_url: tuple[str, Relay],
    postgres_url: str,
    pg_schema: str,
    caplog: pytest.LogCaptureFixture,
    failure: str,
) -> None:
    from precis.stores.postgres import PostgresStore

    url, relay = relayed_url
    store = PostgresStore(url, schema=pg_schema, min_size=1, max_size=1, pool_timeout=2)
    app = create_app(
        store,
        settings=CompactionSettings(context_window=4000),
        api_keys=ApiKeys({digest(KEY_A): "team-a"}),
    )
    headers = {"Authorization": f"Bearer {KEY_A}"}
    try:
        with serving(app) as base, httpx.Client(base_url=base, headers=headers) as http:
            assert http.post("/v1/conversations", json={"id": "c"}).status_code == 201
            if failure == "connection lost":
                relay.cut()
            else:
                _drop_schema(postgres_url, pg_schema)
            answers = [
                http.get("/v1/conversations/c/history"),
                http.post(
                    "/v1/conversations/c/messages",
                    json={"messages": [{"role": "user", "content": "hi"}]},
                ),
                http.get("/v1/conversations"),
            ]
    finally:
        store.close()
    for answer in answers:
        assert answer.status_code == STATUSES[failure], answer.text
        assert answer.json() == {"detail": FAILURES[failure]}
        for secret in (PASSWORD, str(relay.port), "postgresql", pg_schema, "127.0.0.1"):
            assert secret not in answer.text
    # The operator's log says what failed, without the password.
    failures = [r.getMessage() for r in caplog.records if r.name == "precis.server"]
    assert len(failures) == len(answers)
    assert all(f"127.0.0.1:{relay.port}" in line for line in failures)
    assert not any(PASSWORD in line for line in failures)


def test_a_read_only_sqlite_store_is_not_named_to_a_tenant(tmp_path: Path) -> None:
    from precis.stores.sqlite import SQLiteStore

    path = tmp_path / "private-name" / "precis.db"
    SQLiteStore(path).close()
    store = SQLiteStore(path, read_only=True)
    try:
        with serving(create_app(store, settings=CompactionSettings())) as base:
            answer = httpx.post(f"{base}/v1/conversations", json={"id": "c"})
    finally:
        store.close()
    assert answer.status_code == 403
    assert "read-only" in answer.json()["detail"] and "private-name" not in answer.text


def _serve(home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PRECIS_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    for name in ("PRECIS_API_KEY", "PRECIS_API_KEYS", "PRECIS_STORE"):
        env.pop(name, None)
    command = [sys.executable, "-m", "precis.cli", "serve", "--port", "0"]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _started_port(child: subprocess.Popen[str]) -> int:
    """The port `precis serve` says it listens on, read from its log as it starts."""
    assert child.stderr is not None
    for line in child.stderr:
        if "Uvicorn running on http://127.0.0.1:" in line:
            return int(line.split("http://127.0.0.1:", 1)[1].split()[0])
    raise AssertionError("precis serve ended before it listened")


def test_the_access_log_names_paths_without_their_query_string(tmp_path: Path) -> None:
    child = _serve(tmp_path / "home")
    try:
        port = _started_port(child)
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/healthz?token=sk-live-secret-1").status_code == 200
        missing = httpx.get(f"{base}/v1/conversations/nope/history?api_key=sk-live-secret-2")
        assert missing.status_code == 404
    finally:
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    log = out + err
    assert '"GET /healthz HTTP/1.1" 200' in log
    assert '"GET /v1/conversations/nope/history HTTP/1.1" 404' in log
    assert "sk-live-secret" not in log and "?" not in out


def test_the_access_log_filter_cuts_the_query_from_uvicorns_record() -> None:
    # The record uvicorn makes: (client, method, path with query, HTTP version, status).
    import logging

    from precis.server.app import PathsWithoutQuery

    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/v1/conversations?token=t", "1.1", 200), None,
    )  # fmt: skip
    assert PathsWithoutQuery().filter(record)
    assert record.getMessage() == '127.0.0.1:5 - "GET /v1/conversations HTTP/1.1" 200'
