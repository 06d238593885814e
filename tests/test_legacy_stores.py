"""Stores written by an earlier precis open, migrate forward and read back exactly as they did.

The fixtures in tests/data/legacy/ were made by precis at commit 94ce01c (see its README): a SQLite
file and a pg_dump of a PostgreSQL schema, each with what that precis read back from it.

Recall is the one answer that changed on purpose: since m004 every store ranks by the rules of
stores/recall.py (the newest matches of each term, by term_score) instead of bm25 or ts_rank. So a
migrated store must find every message the older precis found when that precis found them all
(fewer hits than the limit), and rank exactly as a MemoryStore holding the same history does.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from precis.core.messages import KIND_SUMMARY, Message, ToolCall
from precis.stores import (
    CompactionEvent,
    ConversationStore,
    MemoryStore,
    SQLiteStore,
    StoreError,
    VersionConflict,
)
from precis.stores.migrations import MIGRATIONS, counted_steps

# The migrations the fixtures' precis had, and every migration this precis has.
LEGACY_NAMES = ["m001_core", "m002_recall", "m003_pins"]
NAMES = [
    *LEGACY_NAMES,
    "m004_bounded_recall",
    "m005_samples",
    "m006_compaction_count",
    "m007_idempotency_keys",
]

LEGACY = Path(__file__).resolve().parent / "data" / "legacy"
# The schema name the dump was taken from; each test loads it under a throwaway name.
DUMP_SCHEMA = "precis_legacy"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False))


def _readback(store: ConversationStore, queries: list[str]) -> dict[str, Any]:
    """What the store answers about each conversation, in the shape make_legacy.py recorded."""
    out: dict[str, Any] = {}
    for cid in store.conversations():
        snap = store.context(cid)
        prompt, stale = store.system_prompt(cid)
        out[cid] = {
            "history": _plain([asdict(m) for m in store.history(cid)]),
            "context": {
                "ids": [m.id for m in snap.messages],
                "pinned": [m.id for m in snap.messages if m.pinned],
                "version": snap.version,
                "last_seq": snap.last_seq,
                "compacted": snap.compacted,
            },
            "events": _plain([asdict(e) for e in store.events(cid)]),
            "system_prompt": [prompt, stale],
            "recall": {
                q: _plain([asdict(h) for h in store.recall(cid, q, limit=5)]) for q in queries
            },
        }
    return out


def _reference(store: ConversationStore) -> MemoryStore:
    """A MemoryStore holding the same histories (ids, seq and pins as stored)."""
    reference = MemoryStore()
    for cid in store.conversations():
        reference.append(cid, store.history(cid))
    return reference


def _check_reads_as_before(store: ConversationStore, expected_file: str) -> dict[str, Any]:
    expected = json.loads((LEGACY / expected_file).read_text(encoding="utf-8"))
    queries = list(expected["deploy"]["recall"])
    got = _readback(store, queries)
    reference = _readback(_reference(store), queries)
    assert sorted(got) == sorted(expected) == ["deploy", "notes"]
    for cid, want in expected.items():
        have = got[cid]
        for part in ("history", "context", "events", "system_prompt"):
            assert have[part] == want[part], (cid, part)
        for query, hits in want["recall"].items():
            found = have["recall"][query]
            if len(hits) < 5:
                assert {h["id"] for h in found} == {h["id"] for h in hits}, (cid, query)
                assert {(h["id"], h["snippet"]) for h in found} == {
                    (h["id"], h["snippet"]) for h in hits
                }, (cid, query)
            assert found == reference[cid]["recall"][query], (cid, query)
    # The fixture is what it claims to be: tool calls and results, pins, a committed compaction.
    deploy = expected["deploy"]
    assert any(m["tool_calls"] for m in deploy["history"])
    assert any(m["role"] == "tool" for m in deploy["history"])
    assert any(m["kind"] == KIND_SUMMARY for m in deploy["history"])
    assert deploy["context"]["version"] == 1 and len(deploy["events"]) == 1
    assert len(deploy["context"]["pinned"]) == 2 and expected["notes"]["context"]["pinned"]
    return expected


def _check_still_writes(store: ConversationStore, expected: dict[str, Any]) -> None:
    """Append, recall, pin, the prompt and a second compaction all work on the migrated store."""
    before = expected["deploy"]
    call = ToolCall("call_after", "read_file", '{"path": "deploy/after-upgrade.yaml"}')
    appended = store.append(
        "deploy",
        [
            Message(role="user", content="After the upgrade: the cache port is 6380."),
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(role="tool", tool_call_id=call.id, content="cache: redis\nport: 6380"),
            Message(role="assistant", content="The cache config is in place."),
        ],
    )
    count = len(before["history"]) + len(appended)
    assert store.count("deploy") == count
    assert {h.id for h in store.recall("deploy", "6380")} == {appended[0].id, appended[2].id}
    snap = store.context("deploy")
    assert snap.version == 1 and snap.last_seq == count
    assert [m.id for m in snap.messages] == [*before["context"]["ids"], *(m.id for m in appended)]

    summary = Message(
        role="user", kind=KIND_SUMMARY, id="summary-after-upgrade", content="Cache port 6380."
    )
    kept = [*before["context"]["pinned"], summary.id, *(m.id for m in appended)]
    event = CompactionEvent("manual", "sliding_window", {"kept": len(kept)}, summary.id, "later")
    after = store.commit_compaction(
        "deploy",
        expected_version=1,
        snapshot_last_seq=snap.last_seq,
        summary=summary,
        context_ids=kept,
        event=event,
    )
    assert after.version == 2 and after.last_seq == count + 1
    assert [m.id for m in after.messages] == kept
    assert [m.id for m in after.messages if m.pinned] == before["context"]["pinned"]
    with pytest.raises(VersionConflict):
        store.commit_compaction(
            "deploy",
            expected_version=1,
            snapshot_last_seq=snap.last_seq,
            summary=Message(role="user", kind=KIND_SUMMARY, id="late", content="late"),
            context_ids=["late"],
            event=CompactionEvent("manual", "all", {}, "late", "later"),
        )
    events = store.events("deploy")
    assert _plain([asdict(e) for e in events]) == [*before["events"], _plain(asdict(event))]
    (stored,) = store.history("deploy", offset=count)
    assert stored.kind == KIND_SUMMARY and stored.id == summary.id
    assert summary.id in {h.id for h in store.recall("deploy", "6380")}
    assert store.system_prompt("deploy") == (before["system_prompt"][0], True)
    store.set_system_prompt("deploy", "recompiled")
    assert store.system_prompt("deploy") == ("recompiled", False)
    # The untouched conversation is still as it was, and takes a new pin.
    notes = store.history("notes")
    assert _plain([asdict(m) for m in notes]) == expected["notes"]["history"]
    store.set_pinned("notes", notes[1].id, True)
    assert [m.pinned for m in store.context("notes").messages][:2] == [True, True]


def test_migrations_are_named_in_order() -> None:
    pytest.importorskip("psycopg")
    from precis.stores.postgres import PostgresDialect
    from precis.stores.sqlite import SQLiteDialect

    assert [fn.__name__ for fn in MIGRATIONS] == NAMES
    # What schema_version counts: the older precis's steps, one per migration added since.
    assert counted_steps(SQLiteDialect()) == [(name,) for name in NAMES]
    assert counted_steps(PostgresDialect()) == [
        ("m001_core", "m003_pins"),
        ("m002_recall",),
        ("m004_bounded_recall",),
        ("m005_samples",),
        ("m006_compaction_count",),
        ("m007_idempotency_keys",),
    ]


# --- SQLite -----------------------------------------------------------------------------------


def _sqlite_records(path: Path) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    with sqlite3.connect(path) as raw:
        names = raw.execute("SELECT name, applied_at FROM migrations ORDER BY name").fetchall()
        steps = raw.execute("SELECT version, applied_at FROM schema_version ORDER BY 1").fetchall()
    return names, steps


@pytest.fixture
def legacy_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "legacy.db"
    shutil.copyfile(LEGACY / "legacy.db", path)
    return path


def test_legacy_sqlite_store_reads_as_before_and_still_writes(legacy_sqlite: Path) -> None:
    with sqlite3.connect(legacy_sqlite) as raw:
        counted = raw.execute(
            "SELECT version, applied_at FROM schema_version ORDER BY 1"
        ).fetchall()
        assert not raw.execute("SELECT 1 FROM sqlite_master WHERE name = 'migrations'").fetchall()
    assert [v for v, _ in counted] == [1, 2, 3]
    with SQLiteStore(legacy_sqlite) as store:
        expected = _check_reads_as_before(store, "expected-sqlite.json")
        _check_still_writes(store, expected)
    # The count became names, each with the time its counted step was applied; each migration
    # added since is named and counted as one more step, so an older precis refuses the file
    # (which it could not read: m004 replaced the recall index it looks for).
    names, steps = _sqlite_records(legacy_sqlite)
    assert names[:3] == [(name, at) for name, (_, at) in zip(LEGACY_NAMES, counted, strict=True)]
    assert sorted(name for name, _ in names[3:]) == NAMES[3:]
    assert steps[:3] == counted and [v for v, _ in steps[3:]] == [4, 5, 6, 7]
    with SQLiteStore(legacy_sqlite) as again:
        assert again.context("deploy").version == 2
        assert again.samples("deploy") == []  # turns before the samples table have none
    assert _sqlite_records(legacy_sqlite) == (names, steps)
    with sqlite3.connect(legacy_sqlite) as raw:
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    assert {"messages_trigrams", "messages_pinned"} <= tables
    assert "messages_fts" not in tables  # m002's index, with positions, is gone


def test_sqlite_refuses_a_migration_it_does_not_know(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO migrations VALUES ('m999_future', 'later')")
    with pytest.raises(StoreError, match=r"m999_future.*newer"):
        SQLiteStore(path)


# --- PostgreSQL -------------------------------------------------------------------------------


def _load_dump(url: str, schema: str) -> None:
    """Load the plain-SQL dump under another schema name, as psql would (COPY blocks included)."""
    import psycopg

    text = (LEGACY / "legacy-postgres.sql").read_text(encoding="utf-8")
    lines = iter(re.sub(rf"\b{DUMP_SCHEMA}\b", schema, text).splitlines(keepends=True))
    with psycopg.connect(url, autocommit=True) as conn:
        pending: list[str] = []
        for line in lines:
            if line.startswith("\\"):  # psql meta-commands such as \restrict
                continue
            if line.startswith("COPY ") and line.rstrip().endswith("FROM stdin;"):
                conn.execute("".join(pending))
                pending = []
                rows: list[str] = []
                for row in lines:
                    if row.rstrip("\n") == "\\.":
                        break
                    rows.append(row)
                with conn.cursor() as cur, cur.copy(line.rstrip().rstrip(";")) as copy:
                    copy.write("".join(rows))
                continue
            pending.append(line)
        if "".join(pending).strip():
            conn.execute("".join(pending))


@pytest.fixture
def legacy_postgres(postgres_url: str, pg_schema: str) -> Iterator[str]:
    _load_dump(postgres_url, pg_schema)
    yield pg_schema


def test_legacy_postgres_store_reads_as_before_and_still_writes(
    postgres_url: str, legacy_postgres: str
) -> None:
    from precis.stores.postgres import PostgresStore

    counted = _pg_records(postgres_url, legacy_postgres, "schema_version")
    assert [v for v, _ in counted] == [1, 2]
    with PostgresStore(postgres_url, schema=legacy_postgres) as store:
        expected = _check_reads_as_before(store, "expected-postgres.json")
        _check_still_writes(store, expected)
    # PostgreSQL's count 1 stood for the core and the pins table, 2 for the recall indexes.
    (_, at_one), (_, at_two) = counted
    names = _pg_records(postgres_url, legacy_postgres, "migrations")
    assert names[:3] == [("m001_core", at_one), ("m002_recall", at_two), ("m003_pins", at_one)]
    assert sorted(name for name, _ in names[3:]) == NAMES[3:]
    # The older precis's count is kept, and each migration added since counts one step more.
    steps = _pg_records(postgres_url, legacy_postgres, "schema_version")
    assert steps[:2] == counted and [v for v, _ in steps[2:]] == [3, 4, 5, 6]
    with PostgresStore(postgres_url, schema=legacy_postgres) as again:
        assert again.context("deploy").version == 2
        assert again.samples("deploy") == []
    assert _pg_records(postgres_url, legacy_postgres, "schema_version") == steps


def _pg_records(url: str, schema: str, table: str) -> list[tuple[Any, str]]:
    import psycopg
    from psycopg import sql

    query = sql.SQL("SELECT * FROM {}.{} ORDER BY 1").format(
        sql.Identifier(schema), sql.Identifier(table)
    )
    with psycopg.connect(url) as conn:
        return [(row[0], str(row[1])) for row in conn.execute(query).fetchall()]


def test_postgres_at_count_one_gets_the_recall_indexes(postgres_url: str, pg_schema: str) -> None:
    """A schema an older precis left at step 1 (core and pins, no recall index yet)."""
    import psycopg
    from psycopg import sql

    from precis.stores.postgres import MIGRATIONS as STEPS
    from precis.stores.postgres import PostgresStore

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        with conn.cursor() as cur:
            STEPS[0](cur)  # counted step 1: m001_core and m003_pins
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
        conn.execute("INSERT INTO schema_version VALUES (1, 'then')")
        conn.execute("INSERT INTO conversations (id, next_seq, created_at) VALUES ('old', 2, 'x')")
        conn.execute(
            "INSERT INTO messages (conversation_id, seq, id, role, content, kind, created_at) "
            "VALUES ('old', 1, 'm1', 'user', 'legacy port 5433 数据库', 'message', 'x')"
        )
    with PostgresStore(postgres_url, schema=pg_schema) as store:
        assert [h.id for h in store.recall("old", "5433")] == ["m1"]
        assert [h.id for h in store.recall("old", "数据库")] == ["m1"]
        assert [h.id for h in store.recall("old", "据库")] == ["m1"]  # grams filled in by m004
    names = _pg_records(postgres_url, pg_schema, "migrations")
    assert [n for n, _ in names] == NAMES
    assert [at for n, at in names if n in ("m001_core", "m003_pins")] == ["then", "then"]
    counted = _pg_records(postgres_url, pg_schema, "schema_version")
    assert [v for v, _ in counted] == [1, 2, 3, 4, 5, 6]
