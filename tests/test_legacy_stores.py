"""Stores written by an earlier precis open, migrate forward and read back exactly as they did.

The fixtures in tests/data/legacy/ were made by precis at commit 94ce01c (see its README): a SQLite
file and a pg_dump of a PostgreSQL schema, each with what that precis read back from it.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from precis.core.messages import KIND_SUMMARY, Message, ToolCall
from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores import ConversationStore, SQLiteStore

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


def _check_reads_as_before(store: ConversationStore, expected_file: str) -> dict[str, Any]:
    expected = json.loads((LEGACY / expected_file).read_text(encoding="utf-8"))
    queries = list(expected["deploy"]["recall"])
    got = _readback(store, queries)
    assert sorted(got) == sorted(expected) == ["deploy", "notes"]
    for cid, want in expected.items():
        have = got[cid]
        for part in ("history", "context", "events", "system_prompt"):
            assert have[part] == want[part], (cid, part)
        for query, hits in want["recall"].items():
            assert [(h["id"], h["snippet"]) for h in have["recall"][query]] == [
                (h["id"], h["snippet"]) for h in hits
            ], (cid, query)
            assert [h["score"] for h in have["recall"][query]] == pytest.approx(
                [h["score"] for h in hits]
            ), (cid, query)
    # The fixture is what it claims to be: tool calls and results, pins, a committed compaction.
    deploy = expected["deploy"]
    assert any(m["tool_calls"] for m in deploy["history"])
    assert any(m["role"] == "tool" for m in deploy["history"])
    assert any(m["kind"] == KIND_SUMMARY for m in deploy["history"])
    assert deploy["context"]["version"] == 1 and len(deploy["events"]) == 1
    assert len(deploy["context"]["pinned"]) == 2 and expected["notes"]["context"]["pinned"]
    return expected


def _check_still_writes(store: ConversationStore, expected: dict[str, Any]) -> None:
    """Append, pin, recall and a second compaction all work on the migrated store."""
    before = expected["deploy"]
    session = Session(store, "deploy", settings=CompactionSettings(context_window=4000))
    call = ToolCall("call_after", "read_file", '{"path": "deploy/after-upgrade.yaml"}')
    appended = session.append(
        Message(role="user", content="After the upgrade: the cache port is 6380."),
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", tool_call_id=call.id, content="cache: redis\nport: 6380"),
        Message(role="assistant", content="The cache config is in place."),
    )
    count = len(before["history"]) + len(appended)
    assert store.count("deploy") == count
    assert {h.id for h in store.recall("deploy", "6380")} == {appended[0].id, appended[2].id}
    context = store.context("deploy")
    assert context.version == 1 and [m.id for m in context.messages][-4:] == [
        m.id for m in appended
    ]
    asyncio.run(session.compact())
    after = store.context("deploy")
    assert after.version == 2 and after.last_seq == count + 1
    events = store.events("deploy")
    assert len(events) == 2 and _plain(asdict(events[0])) == before["events"][0]
    summary = store.history("deploy", offset=count)
    assert [m.kind for m in summary] == [KIND_SUMMARY] and summary[0].id == events[1].summary_id
    assert summary[0].id in {m.id for m in after.messages}
    # The pinned task and red line survive the second compaction.
    assert set(before["context"]["pinned"]) <= {m.id for m in after.messages if m.pinned}
    assert store.system_prompt("deploy") == (before["system_prompt"][0], True)
    session.set_system_prompt("recompiled")
    assert store.system_prompt("deploy") == ("recompiled", False)
    # The untouched conversation is still as it was.
    notes = store.history("notes")
    assert _plain([asdict(m) for m in notes]) == expected["notes"]["history"]
    store.set_pinned("notes", notes[1].id, True)
    assert [m.pinned for m in store.context("notes").messages][:2] == [True, True]


# --- SQLite -----------------------------------------------------------------------------------


@pytest.fixture
def legacy_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "legacy.db"
    shutil.copyfile(LEGACY / "legacy.db", path)
    return path


def test_legacy_sqlite_store_reads_as_before_and_still_writes(legacy_sqlite: Path) -> None:
    with SQLiteStore(legacy_sqlite) as store:
        expected = _check_reads_as_before(store, "expected-sqlite.json")
        _check_still_writes(store, expected)
    with SQLiteStore(legacy_sqlite) as again:
        assert again.context("deploy").version == 2


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

    with PostgresStore(postgres_url, schema=legacy_postgres) as store:
        expected = _check_reads_as_before(store, "expected-postgres.json")
        _check_still_writes(store, expected)
    with PostgresStore(postgres_url, schema=legacy_postgres) as again:
        assert again.context("deploy").version == 2
