"""The inspector's server time at scale: a 22,500-message conversation (20,000 originals and
2,500 compactions, written straight to the store), each page timed in-process over a warm
service, on SQLite and, with --database-url, on PostgreSQL.

    .venv/bin/python bench/inspector_scale.py [--rounds N] [--database-url URL]

Per page: its size (raw and gzipped), its median and p95 wall-clock time and median CPU time
(on a loaded machine the wall clock counts the wait for a core), and its median time as ratios
to two anchors timed in the same run, between the pages' rounds: reading the conversation's
context once (`context()`), and reading its every sample once (`samples()`, what the page read
before it read only what it shows: below 1x means the page costs less than that one read). The
budget is 200 ms and 300 KB per page (the browser test holds the size).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from inspector_data import long_conversation  # noqa: E402

from precis import CompactionSettings  # noqa: E402
from precis.server import create_app  # noqa: E402
from precis.stores import PostgresStore, SQLiteStore  # noqa: E402
from precis.stores.base import ConversationStore  # noqa: E402

PAGES = (
    "/ui/c/{id}",
    "/ui/c/{id}/chart",
    "/ui/c/{id}/chart.json",
    "/ui/c/{id}/context",
    "/ui/c/{id}/compactions",
    "/ui/c/{id}/compactions/2500",
)
BUDGET_MS = 200.0
IDENTITY = {"accept-encoding": "identity"}
SCHEMA = "precis_bench_ui"


def _drop(url: str) -> None:
    """The bench's own schema gone, before and after."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))


def _ms(call: Callable[[], object], cpu: list[float] | None = None) -> float:
    """Wall-clock ms of one call; with `cpu`, also the process's CPU ms (every thread's: the
    server's worker thread and event loop, and the in-process client's small share)."""
    start, used = time.perf_counter(), time.process_time()
    call()
    if cpu is not None:
        cpu.append((time.process_time() - used) * 1000)
    return (time.perf_counter() - start) * 1000


def _p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(store: ConversationStore, cid: str, rounds: int, label: str) -> bool:
    """Print each page's figures; whether every page kept to the budget at its median."""
    print(f"{label}: {store.count(cid):,} messages, {len(store.events(cid)):,} compactions")
    ok = True
    with TestClient(create_app(store, settings=CompactionSettings(8000))) as client:
        for template in PAGES:
            path = template.format(id=cid)
            raw = client.get(path, headers=IDENTITY)
            zipped = client.get(path)
            times: list[float] = []
            cpu: list[float] = []
            context: list[float] = []
            samples: list[float] = []
            for _ in range(rounds):
                context.append(_ms(lambda: store.context(cid)))
                samples.append(_ms(lambda: store.samples(cid)))
                times.append(_ms(functools.partial(client.get, path, headers=IDENTITY), cpu))
            gzipped = int(zipped.headers.get("content-length", len(zipped.content)))
            median, p95 = statistics.median(times), _p95(times)
            anchor_c, anchor_s = statistics.median(context), statistics.median(samples)
            ok = ok and median <= BUDGET_MS
            print(
                f"  {template:28} {raw.status_code} {len(raw.content) / 1000:6.1f} KB raw "
                f"{gzipped / 1000:5.1f} KB gzip | median {median:6.1f} ms, p95 {p95:6.1f} ms, "
                f"CPU {statistics.median(cpu):5.1f} ms | "
                f"÷ context read ({anchor_c:.2f} ms) {median / anchor_c:6.0f}× | "
                f"÷ all-samples read ({anchor_s:.1f} ms) {median / anchor_s:5.2f}×"
            )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--database-url", help=f"also on PostgreSQL (schema {SCHEMA}, dropped before and after)"
    )
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as home:
        store = SQLiteStore(Path(home) / "precis.db")
        long_conversation(store, "long")
        ok = measure(store, "long", args.rounds, "SQLite") and ok
        store.close()
    if args.database_url:
        _drop(args.database_url)
        pg = PostgresStore(args.database_url, schema=SCHEMA)
        try:
            long_conversation(pg, "long")
            pg.optimize()
            ok = measure(pg, "long", args.rounds, "PostgreSQL") and ok
        finally:
            pg.close()
            _drop(args.database_url)
    if not ok:
        print(f"a page's median is over {BUDGET_MS:.0f} ms")
        sys.exit(1)


if __name__ == "__main__":
    main()
