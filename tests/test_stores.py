"""Runs the store contract against every backend, plus what only the SQLite file can show."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from precis.core.messages import Message
from precis.stores import (
    ConversationStore,
    MemoryStore,
    SQLiteStore,
    StoreError,
    VersionConflict,
    open_store,
)
from precis.stores.base import json_safe
from precis.stores.sqlite import CONTEXT_SQL, MIGRATIONS

try:  # tests/ as a package, or as a plain directory on sys.path (pytest's default)
    from .store_contract import *  # noqa: F403
    from .store_contract import CID, assistant, compact, fill, user
except ImportError:
    from store_contract import *  # type: ignore[no-redef]  # noqa: F403
    from store_contract import CID, assistant, compact, fill, user  # type: ignore[no-redef]

# One entry per backend; a PostgreSQL backend joins the contract by adding a parameter here.
BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    backend: ConversationStore
    if request.param == "memory":
        backend = MemoryStore()
    elif request.param == "postgres":
        from precis.stores.postgres import PostgresStore

        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("pg_schema")
        backend = PostgresStore(url, schema=schema, max_size=5)
    else:
        backend = SQLiteStore(tmp_path / "home" / "precis.db")
    yield backend
    backend.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "precis.db"


def test_backends_satisfy_the_protocol(tmp_path: Path) -> None:
    assert isinstance(MemoryStore(), ConversationStore)
    with SQLiteStore(tmp_path / "x.db") as sqlite_store:
        assert isinstance(sqlite_store, ConversationStore)


# --- open_store -------------------------------------------------------------------------------


def test_open_store_forms(tmp_path: Path) -> None:
    assert isinstance(open_store("memory", home=tmp_path), MemoryStore)
    assert isinstance(open_store("memory:", home=tmp_path), MemoryStore)
    default = open_store(None, home=tmp_path / "h")
    assert isinstance(default, SQLiteStore) and default.path == tmp_path / "h" / "precis.db"
    default.close()
    named = open_store("sqlite", home=tmp_path)
    assert isinstance(named, SQLiteStore) and named.path == tmp_path / "precis.db"
    named.close()
    target = tmp_path / "elsewhere" / "x.db"
    explicit = open_store(f"sqlite://{target}", home=tmp_path)
    assert isinstance(explicit, SQLiteStore) and explicit.path == target
    explicit.close()
    assert target.exists()


@pytest.mark.parametrize(
    "url", ["postgres://", "postgresql:///", "mysql://x", "sqlite:", "sqlite:///", "mem", ""]
)
def test_open_store_rejects_unknown_urls(tmp_path: Path, url: str) -> None:
    with pytest.raises(StoreError, match="accepted") as info:
        open_store(url, home=tmp_path)
    assert repr(url) in str(info.value)


# --- SQLite only ------------------------------------------------------------------------------


def test_sqlite_reopen_keeps_everything(db_path: Path) -> None:
    first = SQLiteStore(db_path)
    first.create(CID, system_prompt="prompt")
    (port,) = first.append(CID, [user("our database port is 5433")])
    fill(first, 6)
    snap = compact(first, CID, keep=2)
    history, events = first.history(CID), first.events(CID)
    first.close()
    with pytest.raises(StoreError, match="closed"):
        first.count(CID)

    again = SQLiteStore(db_path)
    assert again.context(CID) == snap
    assert again.history(CID) == history
    assert again.events(CID) == events
    assert again.system_prompt(CID) == ("prompt", True)
    assert [h.id for h in again.recall(CID, "5433")] == [port.id]
    more = fill(again, 1, prefix="after")
    assert again.context(CID).messages[-1] == more[0]
    again.close()


def _schema_versions(path: Path) -> list[int]:
    with sqlite3.connect(path) as raw:
        return [row[0] for row in raw.execute("SELECT version FROM schema_version ORDER BY 1")]


def test_sqlite_schema_version_and_idempotent_migrations(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    expected = list(range(1, len(MIGRATIONS) + 1))
    assert _schema_versions(db_path) == expected
    with SQLiteStore(db_path) as s:
        s.append(CID, [user("x")])
    with SQLiteStore(db_path) as s:
        assert s.count(CID) == 1
    assert _schema_versions(db_path) == expected
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_applies_only_missing_migrations(db_path: Path) -> None:
    """A database at step 1 (no recall index yet) gets the later steps and its index backfilled."""
    db_path.parent.mkdir(parents=True)
    raw = sqlite3.connect(db_path, isolation_level=None)
    raw.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
    MIGRATIONS[0](raw)
    raw.execute("INSERT INTO schema_version VALUES (1, 'then')")
    raw.execute("INSERT INTO conversations (id, next_seq, created_at) VALUES ('old', 2, 'then')")
    raw.execute(
        "INSERT INTO messages (row_id, conversation_id, seq, id, role, content, kind, created_at)"
        " VALUES (1, 'old', 1, 'm1', 'user', 'legacy port 5433', 'message', 'then')"
    )
    raw.close()
    with SQLiteStore(db_path) as s:
        assert [h.id for h in s.recall("old", "5433")] == ["m1"]
        assert [h.id for h in s.recall("old", "legacy")] == ["m1"]
        assert s.history("old")[0].content == "legacy port 5433"
    with sqlite3.connect(db_path) as raw2:
        rows = raw2.execute("SELECT version, applied_at FROM schema_version ORDER BY 1").fetchall()
    assert rows[0] == (1, "then") and [r[0] for r in rows] == list(range(1, len(MIGRATIONS) + 1))


def test_sqlite_refuses_a_newer_schema(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    with sqlite3.connect(db_path) as raw:
        raw.execute("INSERT INTO schema_version VALUES (99, 'future')")
    with pytest.raises(StoreError, match="newer"):
        SQLiteStore(db_path)


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, just some bytes" * 200)
    with pytest.raises(StoreError, match=r"junk\.db"):
        SQLiteStore(junk)


def test_sqlite_messages_are_immutable_rows(db_path: Path) -> None:
    with SQLiteStore(db_path) as s:
        s.append(CID, [user("x")])
    with sqlite3.connect(db_path) as raw, pytest.raises(sqlite3.DatabaseError, match="immutable"):
        raw.execute("UPDATE messages SET content = 'y'")


def test_sqlite_two_objects_see_each_other(db_path: Path) -> None:
    a, b = SQLiteStore(db_path), SQLiteStore(db_path)
    (written,) = a.append(CID, [user("from a")])
    assert b.history(CID) == [written]
    b.append(CID, [user("from b")])
    assert a.count(CID) == 2
    stale = a.context(CID)
    compact(b, CID, keep=1)
    assert a.context(CID).version == 1
    with pytest.raises(VersionConflict):
        compact(a, CID, keep=1, snapshot=stale, summary_id="late")
    assert [e.summary_id for e in a.events(CID)] == ["sum_v1"]
    a.close()
    b.close()


CHILD = textwrap.dedent(
    """
    import sys
    from precis.core.messages import Message
    from precis.stores import SQLiteStore

    store = SQLiteStore(sys.argv[1])
    for i in range(200):
        store.append("shared", [Message(role="user", content=f"child {i}")])
    print(store.count("shared"))
    store.close()
    """
)


def test_sqlite_shared_with_another_process(db_path: Path) -> None:
    parent = SQLiteStore(db_path)
    parent.create("shared")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for i in range(200):
        parent.append("shared", [Message(role="assistant", content=f"parent {i}")])
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert 200 <= int(out) <= 400
    history = parent.history("shared")
    assert len(history) == parent.count("shared") == 400
    assert len({m.id for m in history}) == 400
    assert [m.content for m in history if m.role == "user"] == [f"child {i}" for i in range(200)]
    assert [m.content for m in history if m.role == "assistant"] == [
        f"parent {i}" for i in range(200)
    ]
    with SQLiteStore(db_path) as other:
        assert other.history("shared") == history
    parent.close()


def _plan(raw: sqlite3.Connection, sql: str, *params: object) -> list[str]:
    return [str(row[3]) for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


def _steps(raw: sqlite3.Connection, sql: str, *params: object) -> int:
    """How many VDBE instructions a query runs: a cost measure that no machine load can skew."""
    counter = [0]

    def tick() -> int:
        counter[0] += 1
        return 0

    raw.set_progress_handler(tick, 1)
    raw.execute(sql, params).fetchall()
    raw.set_progress_handler(None, 1)
    return counter[0]


def test_sqlite_context_read_is_independent_of_history(tmp_path: Path) -> None:
    steps: dict[int, int] = {}
    for size in (1_000, 20_000):
        path = tmp_path / f"h{size}.db"
        with SQLiteStore(path) as s:
            s.append("noise", [user(f"noise {i}") for i in range(500)])
            s.append(CID, [user(f"message {i}") for i in range(size)])
            snap = compact(s, CID, keep=49)
            assert len(snap.messages) == 50
        with sqlite3.connect(path) as raw:
            plan = _plan(raw, CONTEXT_SQL, CID)
            steps[size] = _steps(raw, CONTEXT_SQL, CID)
        assert any(p.startswith("SEARCH c USING PRIMARY KEY") for p in plan), plan
        assert any("SEARCH m USING INDEX" in p for p in plan), plan
        assert not any(p.startswith("SCAN") for p in plan), plan
        assert not any("TEMP B-TREE" in p for p in plan), plan
    assert steps[20_000] <= steps[1_000] * 1.1, steps


def test_sqlite_append_is_indexed(db_path: Path) -> None:
    """The statements append runs look rows up by index; none scans the message log."""
    SQLiteStore(db_path).close()
    with sqlite3.connect(db_path) as raw:
        for sql, params in [
            ("SELECT version, next_seq, next_position FROM conversations WHERE id = ?", (CID,)),
            ("SELECT coalesce(max(row_id), 0) FROM messages", ()),
            ("SELECT id FROM messages WHERE conversation_id = ? AND id IN (?)", (CID, "x")),
            ("SELECT id FROM messages WHERE conversation_id = ? AND seq > ?", (CID, 3)),
        ]:
            plan = _plan(raw, sql, *params)
            assert not any(p.startswith("SCAN") for p in plan), (sql, plan)


# --- PostgreSQL only --------------------------------------------------------------------------


def _pg_versions(url: str, schema: str) -> list[int]:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url) as conn:
        query = sql.SQL("SELECT version FROM {}.schema_version ORDER BY 1").format(
            sql.Identifier(schema)
        )
        return [int(row[0]) for row in conn.execute(query).fetchall()]


def test_postgres_satisfies_the_protocol(postgres_url: str, pg_schema: str) -> None:
    from precis.stores import PostgresStore as Exported
    from precis.stores.postgres import PostgresStore

    assert Exported is PostgresStore
    with PostgresStore(postgres_url, schema=pg_schema) as pg:
        assert isinstance(pg, ConversationStore)


def test_postgres_optimize_after_a_bulk_load(postgres_url: str, pg_schema: str) -> None:
    """optimize() moves the recall index's pending entries into it and ANALYZEs; recall finds
    the same before and after."""
    from precis.stores.postgres import PostgresStore

    with PostgresStore(postgres_url, schema=pg_schema) as pg:
        pg.append(CID, [user(f"port {i} of src/billing/module_{i}.py") for i in range(300)])
        before = [h.id for h in pg.recall(CID, "src/billing/module_17.py")]
        pg.optimize()
        assert [h.id for h in pg.recall(CID, "src/billing/module_17.py")] == before
        assert len(before) == 1


def test_postgres_reopen_keeps_everything(postgres_url: str, pg_schema: str) -> None:
    from precis.stores.postgres import PostgresStore

    first = PostgresStore(postgres_url, schema=pg_schema)
    first.create(CID, system_prompt="prompt")
    (port,) = first.append(CID, [user("our database port is 5433")])
    fill(first, 6)
    compact(first, CID, keep=2)
    first.set_pinned(CID, port.id, True)
    snap, history, events = first.context(CID), first.history(CID), first.events(CID)
    first.close()
    with pytest.raises(StoreError, match="closed"):
        first.count(CID)

    again = PostgresStore(postgres_url, schema=pg_schema)
    assert again.context(CID) == snap
    assert again.history(CID) == history and history[0].pinned
    assert again.events(CID) == events
    assert again.system_prompt(CID) == ("prompt", True)
    assert [h.id for h in again.recall(CID, "5433")] == [port.id]
    more = fill(again, 1, prefix="after")
    assert again.context(CID).messages[-1] == more[0]
    again.close()


def test_postgres_schema_version_and_idempotent_migrations(
    postgres_url: str, pg_schema: str
) -> None:
    from precis.stores.postgres import MIGRATIONS, PostgresStore

    PostgresStore(postgres_url, schema=pg_schema).close()
    expected = list(range(1, len(MIGRATIONS) + 1))
    assert _pg_versions(postgres_url, pg_schema) == expected
    with PostgresStore(postgres_url, schema=pg_schema) as s:
        s.append(CID, [user("x")])
    # Several stores opening at once (as workers do) migrate once and see the same data.
    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda _: _count_in_new_store(postgres_url, pg_schema), range(4)))
    assert counts == [1, 1, 1, 1]
    assert _pg_versions(postgres_url, pg_schema) == expected


def _count_in_new_store(url: str, schema: str) -> int:
    from precis.stores.postgres import PostgresStore

    with PostgresStore(url, schema=schema) as s:
        return s.count(CID)


def test_postgres_refuses_a_newer_schema(postgres_url: str, pg_schema: str) -> None:
    import psycopg
    from psycopg import sql

    from precis.stores.postgres import PostgresStore

    PostgresStore(postgres_url, schema=pg_schema).close()
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_version VALUES (99, 'future')").format(
                sql.Identifier(pg_schema)
            )
        )
    with pytest.raises(StoreError, match="newer"):
        PostgresStore(postgres_url, schema=pg_schema)


def test_postgres_messages_are_immutable_rows(postgres_url: str, pg_schema: str) -> None:
    import psycopg
    from psycopg import sql

    from precis.stores.postgres import PostgresStore

    with PostgresStore(postgres_url, schema=pg_schema) as s:
        s.append(CID, [user("x")])
    with (
        psycopg.connect(postgres_url) as conn,
        pytest.raises(psycopg.Error, match="immutable"),
    ):
        conn.execute(
            sql.SQL("UPDATE {}.messages SET content = 'y'").format(sql.Identifier(pg_schema))
        )


def test_postgres_recall_chinese_uses_the_recall_index(postgres_url: str, pg_schema: str) -> None:
    import psycopg
    from psycopg import sql

    from precis.stores.postgres import PostgresStore

    with PostgresStore(postgres_url, schema=pg_schema) as s:
        s.append("noise", [user(f"无关的消息 {i}") for i in range(50)])
        (fact,) = s.append(CID, [user("数据库端口是 5433")])
        s.append(CID, [assistant("好的，我记住了。"), user("端口号不对吗？")])
        for query in ("数据库", "5433", "数据库 端口", "端口 5433"):
            hits = s.recall(CID, query)
            assert hits and hits[0].id == fact.id, (query, hits)
            assert "端口" in hits[0].snippet and hits[0].score > 0
        assert sorted(h.seq for h in s.recall(CID, "端口")) == [1, 3]
        assert s.recall(CID, "端") and s.recall(CID, "口号")
        assert s.recall(CID, "配置文件") == []
    with psycopg.connect(postgres_url) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            str(row[0])
            for row in conn.execute(
                "EXPLAIN SELECT id FROM messages "
                "WHERE (content || E'\\n' || calls_text) ILIKE '%端口号%'"
            )
        )
    assert "messages_recall" in plan, plan


def test_postgres_error_names_the_store_and_hides_the_password() -> None:
    from precis.stores.postgres import PostgresStore

    url = "postgresql://someone:s3cret@127.0.0.1:1/nowhere"
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1/nowhere") as info:
        PostgresStore(url, connect_timeout=2)
    assert "s3cret" not in str(info.value)
    with pytest.raises(StoreError, match="schema name"):
        PostgresStore(url, schema="no; drop")


def test_open_store_postgres_urls(postgres_url: str, tmp_path: Path) -> None:
    import uuid

    import psycopg

    from precis.stores.postgres import DEFAULT_SCHEMA, PostgresStore

    # A database of its own: the default schema of the shared one may hold another run's data.
    database = f"precis_urls_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
    server = postgres_url.split("://", 1)[1].rsplit("/", 1)[0]
    try:
        for scheme in ("postgresql://", "postgres://"):
            opened = open_store(f"{scheme}{server}/{database}", home=tmp_path)
            assert isinstance(opened, PostgresStore) and opened.schema == DEFAULT_SCHEMA
            opened.close()
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)
_DATA = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
        st.dictionaries(st.integers(0, 3), inner, max_size=2),
    ),
    max_leaves=20,
)


@pytest.mark.property
@given(st.dictionaries(st.text(max_size=4), _DATA, max_size=5))
def test_json_safe_is_the_json_round_trip(value: dict[str, object]) -> None:
    """json_safe copies plain data without encoding it; the copy is what the round trip gives,
    types, key order, NaN and all (repr tells a tuple from a list and shows NaN as nan)."""
    trip = json.loads(json.dumps(value, ensure_ascii=False)) if value else {}
    copied = json_safe(value, "value")
    assert repr(copied) == repr(trip)
    assert copied is not value


def test_json_safe_refuses_what_the_round_trip_refuses() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    deep: object = "leaf"
    for _ in range(150):
        deep = [deep]
    with pytest.raises(StoreError, match="not JSON-serialisable"):
        json_safe({"x": {1, 2}}, "metadata")
    with pytest.raises(StoreError, match="not JSON-serialisable"):
        json_safe({"x": cycle}, "metadata")
    assert json_safe({"x": deep}, "metadata") == {"x": deep}
