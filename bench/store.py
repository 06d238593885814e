"""Times the SQLite store as history grows: append throughput and the 50-message context read.

Run: .venv/bin/python bench/store.py [--sizes 1000,100000,1000000]
The claim under test (DESIGN §8): append is O(1) and reading the context is O(in-context),
so context-read(1M) / context-read(1k) should stay within 2x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from precis.core.messages import KIND_SUMMARY, Message
from precis.stores import CompactionEvent, SQLiteStore

CID = "bench"
IN_CONTEXT = 50
BUILD_BATCH = 20_000
SINGLE_APPENDS = 2_000
BATCH_SIZE = 100
BATCHED_CALLS = 20
CONTEXT_READS = 300


def make_message(i: int) -> Message:
    """A plausible agent turn of ~80 chars, alternating user and assistant."""
    text = f"step {i}: read src/module_{i % 97}.py, found {i * 7 % 1000} issues near line {i % 400}"
    return Message(role="user" if i % 2 == 0 else "assistant", content=text)


def build(store: SQLiteStore, size: int) -> None:
    """Append `size` messages in large batches (one transaction each), then compact to 50."""
    for start in range(0, size, BUILD_BATCH):
        store.append(CID, [make_message(i) for i in range(start, min(size, start + BUILD_BATCH))])
    # Pay the FTS5 merge debt of the bulk load now, as an import would, not in the append timings.
    store.optimize()
    last_seq = store.count(CID)
    # The newest 49 via a history page: reading the never-compacted context would load them all.
    kept = [m.id for m in store.history(CID, offset=max(0, last_seq - (IN_CONTEXT - 1)))]
    summary = Message(role="user", kind=KIND_SUMMARY, id="summary-1", content="summary of it all")
    store.commit_compaction(
        CID,
        expected_version=0,
        snapshot_last_seq=last_seq,
        summary=summary,
        context_ids=[summary.id, *kept],
        event=CompactionEvent("manual", "sliding_window", {}, summary.id, "2025-01-01T00:00:00Z"),
    )


def per_second(count: int, action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return count / (time.perf_counter() - start)


def single_appends(store: SQLiteStore) -> None:
    for i in range(SINGLE_APPENDS):
        store.append(CID, [make_message(i)])


def batched_appends(store: SQLiteStore) -> None:
    for call in range(BATCHED_CALLS):
        store.append(CID, [make_message(call * BATCH_SIZE + i) for i in range(BATCH_SIZE)])


def context_read_ms(store: SQLiteStore) -> float:
    """Median wall time of one context() read, after a warm-up read."""
    store.context(CID)
    times: list[float] = []
    for _ in range(CONTEXT_READS):
        start = time.perf_counter()
        snap = store.context(CID)
        times.append(time.perf_counter() - start)
    assert len(snap.messages) >= IN_CONTEXT
    return statistics.median(times) * 1000


def run(sizes: list[int]) -> int:
    header = (
        f"{'history':>9} {'build s':>8} {'db MB':>7} {'ctx read ms':>12} "
        f"{'append 1/call msg/s':>20} {'append 100/call msg/s':>22}"
    )
    print(
        f"SQLite store (WAL, FTS5), {IN_CONTEXT} messages in context. ctx read: median of "
        f"{CONTEXT_READS} context() calls; append: {SINGLE_APPENDS} calls of 1 message, "
        f"{BATCHED_CALLS} calls of {BATCH_SIZE}, each call one transaction"
    )
    print(header)
    print("-" * len(header))
    reads: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="precis-bench-") as tmp:
        for size in sizes:
            path = Path(tmp) / f"h{size}" / "precis.db"
            with SQLiteStore(path) as store:
                start = time.perf_counter()
                build(store, size)
                build_s = time.perf_counter() - start
                reads[size] = context_read_ms(store)
                # Appending after the read keeps it at exactly IN_CONTEXT messages above.
                single = per_second(SINGLE_APPENDS, lambda s=store: single_appends(s))
                batched = per_second(BATCHED_CALLS * BATCH_SIZE, lambda s=store: batched_appends(s))
            megabytes = sum(f.stat().st_size for f in path.parent.iterdir()) / 1e6
            print(
                f"{size:>9,} {build_s:>8.1f} {megabytes:>7.0f} {reads[size]:>12.3f} "
                f"{single:>20,.0f} {batched:>22,.0f}"
            )
            sys.stdout.flush()
    smallest, largest = min(sizes), max(sizes)
    if smallest != largest:
        ratio = reads[largest] / reads[smallest]
        verdict = "ok" if ratio <= 2.0 else "over target"
        print(
            f"\ncontext-read({largest:,}) / context-read({smallest:,}) = {ratio:.2f}x "
            f"(target <= 2x: {verdict})"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,100000,1000000", help="history sizes, comma-sep")
    args = parser.parse_args()
    return run([int(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    raise SystemExit(main())
