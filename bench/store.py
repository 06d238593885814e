"""The stores as history grows: append rate, context read, recall per query class, disk, and
Session.append on a conversation never compacted.

Run: .venv/bin/python bench/store.py [--messages 1000000] [--database-url URL [--pg-messages N]]

One conversation of `--messages` messages from bench/corpus.py (agent turns, ~1.2 KB of text per
message) is bulk-loaded, compacted to 50 messages in context, and measured; with a PostgreSQL URL
the same is done in the schema `precis_bench` (dropped first) at `--pg-messages`. The claims under
test (DESIGN §8, issue #15): append is O(1) and the context read O(in-context), so the read at N
stays within 2x of the read at 1,000; recall answers every query class in <= 50 ms p95; the store
takes <= 2x the bytes of the text it holds; Session.append at 4,000 messages never compacted costs
<= 2x what it costs at 100.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import corpus

from precis import Session
from precis.core.messages import KIND_SUMMARY, Message
from precis.stores import CompactionEvent, ConversationStore, SQLiteStore
from precis.stores.base import search_text

CID = "bench"
IN_CONTEXT = 50
BUILD_BATCH = 10_000
SINGLE_APPENDS = 1_000
BATCH_SIZE = 100
BATCHED_CALLS = 10
CONTEXT_READS = 200
RECALL_ROUNDS = 8
SMALL = 1_000
PG_SCHEMA = "precis_bench"
# With --reuse-pg, the text of this many messages (scaled) stands for the text of them all.
REUSE_SAMPLE = 20_000
# Session.append is timed over this many appends around each length.
SESSION_SAMPLE = 60
SESSION_LENGTHS = (100, 4_000)

# What recall is asked, by class; every query here matches at least one corpus message.
QUERIES: dict[str, list[str]] = {
    "CJK, 1-2 chars": ["端口", "数据", "端", "配置", "错误", "超时", "库", "日志"],
    "common word": ["error", "the", "request", "timeout", "config", "INFO", "cache", "retry"],
    "several words": [
        "database connection",
        "permission denied",
        "request timed out",
        "deploy staging cluster",
        "cache replica latency",
        "数据库 端口",
        "端口 5433",
        "migration lock 迁移",
    ],
    "identifier": [
        "src/billing/module_17.py",
        "src/auth/module_391.py",
        "ConnectionError",
        "tenant_id",
        "grep_repository",
        "KeyError",
        "module_250",
        "db-7",
    ],
    "port / number": ["5433", "8080", "27017", "11211", "port=9200", "took", "0042", "503"],
}


def query_classes(messages: int) -> dict[str, list[str]]:
    """QUERIES, and request ids (each in exactly one message) spread over the history."""
    turns = messages // 4
    return {**QUERIES, "unique id": [corpus.request_id(turns * k // 8) for k in range(8)]}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


# --- building ---------------------------------------------------------------------------------


def build(store: ConversationStore, size: int) -> tuple[float, int]:
    """Append `size` corpus messages in large batches, then compact to IN_CONTEXT messages.

    Returns the seconds the store spent and the bytes of text it was given."""
    spent = 0.0
    text = 0
    for start in range(0, size, BUILD_BATCH):
        batch = list(corpus.messages(start, min(size, start + BUILD_BATCH)))
        text += sum(len(search_text(m).encode()) for m in batch)
        began = time.perf_counter()
        store.append(CID, batch)
        spent += time.perf_counter() - began
    began = time.perf_counter()
    store.optimize()  # type: ignore[attr-defined]  # both SQL stores have it: pay the merges now
    spent += time.perf_counter() - began
    compact(store)
    return spent, text


def compact(store: ConversationStore) -> None:
    """Keep the newest 49 and a summary, as a compaction would."""
    last_seq = store.count(CID)
    kept = [m.id for m in store.history(CID, offset=max(0, last_seq - (IN_CONTEXT - 1)))]
    version = store.context(CID).version
    summary = Message(
        role="user", kind=KIND_SUMMARY, id=f"summary-{version + 1}", content="summary of it all"
    )
    store.commit_compaction(
        CID,
        expected_version=version,
        snapshot_last_seq=last_seq,
        summary=summary,
        context_ids=[summary.id, *kept],
        event=CompactionEvent("manual", "sliding_window", {}, summary.id, "2026-12-01T00:00:00Z"),
    )


# --- measuring --------------------------------------------------------------------------------


def context_read_ms(store: ConversationStore) -> float:
    """Median wall time of one context() read, after a warm-up read."""
    store.context(CID)
    times: list[float] = []
    for _ in range(CONTEXT_READS):
        start = time.perf_counter()
        snap = store.context(CID)
        times.append(time.perf_counter() - start)
    assert len(snap.messages) == IN_CONTEXT
    return statistics.median(times) * 1000


def append_rates(store: ConversationStore, size: int) -> tuple[float, float]:
    """Messages per second: one message per call, and BATCH_SIZE per call."""
    began = time.perf_counter()
    for i in range(SINGLE_APPENDS):
        store.append(CID, [corpus.message(size + i)])
    single = SINGLE_APPENDS / (time.perf_counter() - began)
    began = time.perf_counter()
    for call in range(BATCHED_CALLS):
        first = size + SINGLE_APPENDS + call * BATCH_SIZE
        store.append(CID, list(corpus.messages(first, first + BATCH_SIZE)))
    batched = BATCHED_CALLS * BATCH_SIZE / (time.perf_counter() - began)
    return single, batched


def recall_ms(store: ConversationStore, size: int) -> dict[str, tuple[float, float, int]]:
    """p50, p95 (ms) and the fewest hits of any query, per class; one warm-up pass first."""
    classes = query_classes(size)
    for queries in classes.values():
        for query in queries:
            store.recall(CID, query)
    out: dict[str, tuple[float, float, int]] = {}
    for name, queries in classes.items():
        times: list[float] = []
        fewest = 1 << 30
        for _ in range(RECALL_ROUNDS):
            for query in queries:
                began = time.perf_counter()
                hits = store.recall(CID, query)
                times.append((time.perf_counter() - began) * 1000)
                fewest = min(fewest, len(hits))
        out[name] = (percentile(times, 0.5), percentile(times, 0.95), fewest)
    return out


def session_append_ms(store: ConversationStore) -> dict[int, float]:
    """Median Session.append of one message around each length, never compacted."""
    session = Session(store, "session-bench")
    out: dict[int, float] = {}
    done = 0
    for length in SESSION_LENGTHS:
        while done < length - SESSION_SAMPLE // 2:
            session.append(corpus.message(done))
            done += 1
        times: list[float] = []
        for _ in range(SESSION_SAMPLE):
            message = corpus.message(done)
            began = time.perf_counter()
            session.append(message)
            times.append((time.perf_counter() - began) * 1000)
            done += 1
        out[length] = statistics.median(times)
    assert store.context("session-bench").version == 0
    return out


# --- the stores -------------------------------------------------------------------------------


def sqlite_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.parent.iterdir() if f.name.startswith(path.name))


def pg_bytes(url: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def drop_pg_schema(url: str, schema: str = PG_SCHEMA) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def pg_schema(name: str) -> str:
    """The schema of one of run_store's stores: the large one in PG_SCHEMA, the others beside it
    (so that the large one can be kept, see --reuse-pg)."""
    return PG_SCHEMA if name == "large" else f"{PG_SCHEMA}_{name}"


def pg_messages(url: str, schema: str) -> int:
    """How many messages of CID the schema holds (0 when it has no store)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url) as conn:
        exists = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.conversations",)
        ).fetchone()
        if not exists or not exists[0]:
            return 0
        row = conn.execute(
            sql.SQL("SELECT next_seq - 1 FROM {}.conversations WHERE id = %s").format(
                sql.Identifier(schema)
            ),
            (CID,),
        ).fetchone()
    return int(row[0]) if row else 0


# A store, and how to read its size on disk once it is closed.
Opened = tuple[ConversationStore, Callable[[], int]]
Opener = Callable[[str], AbstractContextManager[Opened]]


@contextmanager
def sqlite_store(folder: Path, name: str) -> Iterator[Opened]:
    path = folder / name / "precis.db"
    with SQLiteStore(path) as store:  # closing it folds the WAL into the file
        yield store, lambda: sqlite_bytes(path)


@contextmanager
def pg_store(url: str, schema: str, *, keep: bool = False) -> Iterator[Opened]:
    """The store in `schema`, dropped first unless `keep`."""
    from precis.stores.postgres import PostgresStore

    if not keep:
        drop_pg_schema(url, schema)
    with PostgresStore(url, schema=schema) as store:
        yield store, lambda: pg_bytes(url, schema)


# --- report -----------------------------------------------------------------------------------


def run_store(label: str, opener: Opener, size: int, *, built: bool = False) -> bool:
    """Measure one backend at `size` (the context read at SMALL too); True if all targets met.

    `built`: the large store already holds the history (compacted), so it is not built again."""
    print(f"\n== {label}: {size:,} messages ==")
    sys.stdout.flush()
    reads: dict[int, float] = {}
    with opener("small") as (store, _):
        build(store, SMALL)
        reads[SMALL] = context_read_ms(store)
    with opener("large") as (store, disk):
        if built:
            # The text of the first REUSE_SAMPLE messages, scaled: generating them all again
            # would take a minute. ANALYZE again, so that earlier runs' appends are counted.
            sample = min(size, REUSE_SAMPLE)
            text = sum(len(search_text(m).encode()) for m in corpus.messages(0, sample))
            text = text * size // sample
            store.optimize()  # type: ignore[attr-defined]
            compact(store)  # the appends of the last run are in context
            print("build: reused the store already built (text bytes estimated)")
        else:
            spent, text = build(store, size)
            rate = size / spent
            print(
                f"build: {spent:.0f} s in the store, {rate:,.0f} msg/s (batches of {BUILD_BATCH:,})"
            )
        sys.stdout.flush()
        reads[size] = context_read_ms(store)
        recall = recall_ms(store, size)
        single, batched = append_rates(store, size)
    stored = disk()
    ok = True
    ratio = reads[size] / reads[SMALL]
    ok &= ratio <= 2
    print(
        f"append: {single:,.0f} msg/s one per call, {batched:,.0f} msg/s {BATCH_SIZE} per call "
        f"(at {size:,} messages, each call one transaction)"
    )
    print(
        f"context read ({IN_CONTEXT} in context, median of {CONTEXT_READS}): "
        f"{reads[SMALL]:.3f} ms at {SMALL:,}, {reads[size]:.3f} ms at {size:,} = {ratio:.2f}x "
        f"(target <= 2x)"
    )
    per_message = stored / size
    text_per_message = text / size
    disk_ratio = per_message / text_per_message
    ok &= disk_ratio <= 2
    print(
        f"disk: {stored / 1e6:,.0f} MB, {per_message:,.0f} B per message for "
        f"{text_per_message:,.0f} B of text = {disk_ratio:.2f}x (target <= 2x)"
    )
    print(f"recall, limit 10, {RECALL_ROUNDS} rounds of each class (target p95 <= 50 ms):")
    print(f"  {'class':<16} {'p50 ms':>8} {'p95 ms':>8} {'fewest hits':>12}")
    for name, (p50, p95, fewest) in recall.items():
        ok &= p95 <= 50 and fewest > 0
        print(f"  {name:<16} {p50:>8.1f} {p95:>8.1f} {fewest:>12}")
    sys.stdout.flush()
    return ok


def run_session(label: str, opener: Opener) -> bool:
    with opener("session") as (store, _):
        times = session_append_ms(store)
    short, long = SESSION_LENGTHS
    ratio = times[long] / times[short]
    print(
        f"Session.append, never compacted ({label}, median of {SESSION_SAMPLE}): "
        f"{times[short]:.2f} ms at {short:,}, {times[long]:.2f} ms at {long:,} = {ratio:.2f}x "
        "(target <= 2x)"
    )
    return ratio <= 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=100_000, help="history length (SQLite)")
    parser.add_argument("--database-url", help="also measure PostgreSQL at this URL")
    parser.add_argument("--pg-messages", type=int, help="history length on PostgreSQL")
    parser.add_argument("--skip-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--reuse-pg",
        action="store_true",
        help="keep the large PostgreSQL store afterwards, and reuse it instead of building it "
        "again when it already holds the messages (appends of earlier runs stay in it)",
    )
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="precis-bench-") as tmp:
        folder = Path(tmp)

        def sqlite_opener(name: str) -> AbstractContextManager[Opened]:
            return sqlite_store(folder, name)

        if not args.skip_sqlite:
            label = "SQLite (WAL, one FTS5 trigram table)"
            ok &= run_store(label, sqlite_opener, args.messages)
            ok &= run_session("SQLite", sqlite_opener)
    if args.database_url:
        url = args.database_url

        size = args.pg_messages or args.messages
        built = args.reuse_pg and pg_messages(url, PG_SCHEMA) >= size

        def pg_opener(name: str) -> AbstractContextManager[Opened]:
            return pg_store(url, pg_schema(name), keep=built and name == "large")

        label = "PostgreSQL (one GIN index: windows, grams, pg_trgm)"
        ok &= run_store(label, pg_opener, size, built=built)
        ok &= run_session("PostgreSQL", pg_opener)
        for name in ("small", "session") if args.reuse_pg else ("small", "session", "large"):
            drop_pg_schema(url, pg_schema(name))
    print("\nall targets met" if ok else "\nsome target missed")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
