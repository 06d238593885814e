"""What the async face costs: the same agent-shaped loop through `Session` and `AsyncSession`.

Each turn appends a user and an assistant message, reads the prompt and asks `maybe_compact`
(the extractive summarizer, SQLite file store). AsyncSession runs every store call on a worker
thread so the event loop stays free; this reports its time per turn as a ratio to the sync
session's, measured in the same run.

    .venv/bin/python bench/sessions.py [--turns 300] [--window 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from precis import AsyncSession, CompactionSettings, Session
from precis.stores.sqlite import SQLiteStore

TEXT = "please check the deployment checklist for the payments service, release 2.{n}. " * 3


def sync_run(folder: Path, turns: int, window: int) -> list[float]:
    session = Session(
        SQLiteStore(folder / "sync.db"), "c", settings=CompactionSettings(context_window=window)
    )
    times = []
    for n in range(turns):
        start = time.perf_counter()
        session.append({"role": "user", "content": TEXT.format(n=n)})
        session.append({"role": "assistant", "content": "Noted: " + TEXT.format(n=n)})
        session.prompt()
        session.maybe_compact()
        times.append(time.perf_counter() - start)
    return times


async def async_run(folder: Path, turns: int, window: int) -> list[float]:
    session = AsyncSession(
        SQLiteStore(folder / "async.db"), "c", settings=CompactionSettings(context_window=window)
    )
    times = []
    for n in range(turns):
        start = time.perf_counter()
        await session.append({"role": "user", "content": TEXT.format(n=n)})
        await session.append({"role": "assistant", "content": "Noted: " + TEXT.format(n=n)})
        await session.prompt()
        await session.maybe_compact()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--window", type=int, default=4000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain = sync_run(folder, args.turns, args.window)
        awaited = asyncio.run(async_run(folder, args.turns, args.window))
    p50_sync, p50_async = statistics.median(plain), statistics.median(awaited)
    print(f"turns: {args.turns}, window: {args.window}")
    print(f"Session       median turn {p50_sync * 1000:.2f} ms")
    print(f"AsyncSession  median turn {p50_async * 1000:.2f} ms")
    print(f"ratio async / sync: {p50_async / p50_sync:.2f}")


if __name__ == "__main__":
    main()
