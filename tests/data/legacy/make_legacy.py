"""Made the legacy store fixtures in this folder; kept as documentation, no test runs it.

It drives precis itself (a `Session` over a real store, the extractive summarizer) to write two
conversations into a SQLite file and into a PostgreSQL schema, then records what that precis
read back from each store, so tests/test_legacy_stores.py can check that a later precis opens
these databases, migrates them forward and reads exactly the same things.

Run from the repository root at the commit named in README.md:

    PYTHONPATH=src .venv/bin/python tests/data/legacy/make_legacy.py \\
        --postgres postgresql://postgres@127.0.0.1:5432/test

It writes legacy.db, legacy-postgres.sql (pg_dump of the schema `precis_legacy`) and
expected-sqlite.json / expected-postgres.json beside itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from precis.core.messages import Message, ToolCall
from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.base import ConversationStore

HERE = Path(__file__).resolve().parent
SCHEMA = "precis_legacy"
# Queries whose hits the fixture records: FTS words, a short CJK term (the instr() path), a
# tool-call argument, a summary's text and a term no message holds.
RECALL_QUERIES = ("5433", "billing", "端口", "数据库", "kubectl", "replicas", "Friday", "nothing-x")


def deploy(store: ConversationStore) -> None:
    """Conversation one: tool calls and results, a pinned message, a compaction, later turns."""
    s = Session(store, "deploy", settings=CompactionSettings(context_window=4000))
    s.set_system_prompt("You are a careful deploy assistant for the billing team.")
    s.append(
        Message(role="user", content="Move the billing service to the new cluster this week."),
        Message(role="assistant", content="I will start by reading the deploy config."),
    )
    for turn in range(6):
        call = ToolCall(
            f"call_read_{turn}", "read_file", json.dumps({"path": f"deploy/{turn}.yaml"})
        )
        s.append(
            Message(role="assistant", content="", tool_calls=(call,)),
            Message(
                role="tool",
                tool_call_id=call.id,
                content=f"replicas: {turn + 2}\nport: 5433\nhost: db-internal-{turn}\n" * 4,
            ),
            Message(role="user", content=f"Step {turn}: keep the billing port at 5433, please."),
            Message(role="assistant", content=f"Noted for step {turn}; the config looks fine."),
        )
    (rule,) = s.append(Message(role="user", content="Never restart the database on a Friday."))
    s.pin(rule.id)
    s.append(
        Message(
            role="assistant",
            content="Understood: no database restarts on Fridays.",
            reasoning="The user set a red line about Fridays.",
            metadata={"source": "legacy-fixture", "turn": 7},
        )
    )
    asyncio.run(s.compact())
    shell = ToolCall("call_shell", "run_shell", json.dumps({"cmd": "kubectl get pods -n billing"}))
    s.append(
        Message.from_openai(
            {"role": "user", "content": "数据库端口是 5433，不要修改。", "name": "li"}
        ),
        Message(role="assistant", content="", tool_calls=(shell,)),
        Message(role="tool", tool_call_id=shell.id, content="billing-7f9c  Running  3/3"),
        Message(role="assistant", content="All three billing pods are running on the new cluster."),
    )


def notes(store: ConversationStore) -> None:
    """Conversation two: never compacted, a system prompt, a pin set after append."""
    s = Session(store, "notes")
    s.set_system_prompt("You keep short meeting notes.")
    first, _, _ = s.append(
        Message(role="user", content="Notes for the Friday sync: billing cutover is on track."),
        Message(role="assistant", content="Saved. Anything else for the notes?"),
        Message(role="user", content="Add that the replicas were scaled to 3."),
    )
    s.pin(first.id)
    call = ToolCall("call_notes", "save_notes", json.dumps({"title": "Friday sync"}))
    s.append(
        Message(role="assistant", content="Saving the notes now.", tool_calls=(call,)),
        Message(role="tool", tool_call_id=call.id, content="saved as notes/friday-sync.md"),
    )


def plain(value: Any) -> Any:
    """JSON data, as the test compares it."""
    return json.loads(json.dumps(value, ensure_ascii=False))


def readback(store: ConversationStore) -> dict[str, Any]:
    """Everything the store answers about each conversation."""
    out: dict[str, Any] = {}
    for cid in store.conversations():
        snap = store.context(cid)
        prompt, stale = store.system_prompt(cid)
        out[cid] = {
            "history": plain([asdict(m) for m in store.history(cid)]),
            "context": {
                "ids": [m.id for m in snap.messages],
                "pinned": [m.id for m in snap.messages if m.pinned],
                "version": snap.version,
                "last_seq": snap.last_seq,
                "compacted": snap.compacted,
            },
            "events": plain([asdict(e) for e in store.events(cid)]),
            "system_prompt": [prompt, stale],
            "recall": {
                q: plain([asdict(h) for h in store.recall(cid, q, limit=5)]) for q in RECALL_QUERIES
            },
        }
    return out


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def make_sqlite() -> None:
    from precis.stores.sqlite import SQLiteStore

    path = HERE / "legacy.db"
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    with SQLiteStore(path) as store:
        deploy(store)
        notes(store)
        write_json(HERE / "expected-sqlite.json", readback(store))
    # Closing the last connection checkpoints the WAL into the file: the one file holds it all.
    assert not path.with_name(path.name + "-wal").exists()


def make_postgres(url: str) -> None:
    import psycopg

    from precis.stores.postgres import PostgresStore

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    with PostgresStore(url, schema=SCHEMA) as store:
        deploy(store)
        notes(store)
        write_json(HERE / "expected-postgres.json", readback(store))
    dump = subprocess.run(
        ["pg_dump", f"--schema={SCHEMA}", "--no-owner", "--no-privileges", url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (HERE / "legacy-postgres.sql").write_text(dump, encoding="utf-8")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--postgres", required=True, help="a PostgreSQL URL to build the dump on")
    args = parser.parse_args()
    make_sqlite()
    make_postgres(args.postgres)
    return 0


if __name__ == "__main__":
    sys.exit(main())
