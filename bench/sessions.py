"""What the async face costs: `AsyncSession` beside `Session`, per append and per compaction.

The shared conversations are replayed message by message into each face, in memory and on a
SQLite file, with the extractive summarizer and `CompactionSettings(context_window=W)`; before
every model call (after each message not followed by a tool result) the loop asks
`maybe_compact`, then builds the prompt, as an agent does. Each append and each `maybe_compact`
that compacted is timed; the faces take turns conversation by conversation, so both see the
same minutes of the machine. It prints, per store, the median append and compaction of each
face and the async face's as a ratio to the sync one's, measured in the same run (target ≤ 1.25×),
and "paired": the median over the conversations of that wall ratio taken in each conversation
(its two replays ran within seconds of each other), which a machine whose load moves over the
minutes of the run sways less.

A compaction is timed until it has committed, on both faces: `AsyncSession` keeps its default
(`background_compaction`), so its `maybe_compact` only starts the summary behind the turn, and
the loop awaits `settle()` right after it, inside the timing; `Session` compacts in the call. So
the two rows compare the same work (check, compaction, commit, sample), and no async append is
timed while a compaction runs beside it on another thread (in this loop, with no model call
between the turns, it would wait for the interpreter's lock and be timed as the append's cost).

    .venv/bin/python bench/sessions.py [--window 8000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from peers import conversations, has_system, load, model_calls  # noqa: E402

from precis import AsyncSession, CompactionSettings, Session  # noqa: E402
from precis.stores.base import ConversationStore  # noqa: E402
from precis.stores.memory import MemoryStore  # noqa: E402
from precis.stores.sqlite import SQLiteStore  # noqa: E402

# Per step ("append", "compaction"): each call's (wall seconds, process CPU seconds, pair), the
# pair being the conversation and round both faces replayed one after the other. The CPU time
# counts the worker threads too, and not the waits for a core that a loaded machine adds.
Times = dict[str, list[tuple[float, float, int]]]


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float], pair: int) -> tuple[float, float, int]:
    wall, cpu = _now()
    return wall - start[0], cpu - start[1], pair


def _settings(window: int) -> CompactionSettings:
    return CompactionSettings(context_window=window)


def sync_replay(
    store: ConversationStore,
    name: str,
    items: Sequence[Mapping[str, Any]],
    window: int,
    times: Times,
    pair: int,
) -> None:
    """One conversation through `Session`: each append's and each compaction's time."""
    session = Session(store, name, settings=_settings(window))
    calls = set(model_calls(items))
    for i, item in enumerate(items):
        if i == 0 and has_system(items):
            session.set_system_prompt(item["content"])
            continue
        start = _now()
        session.append(item)
        times["append"].append(_since(start, pair))
        if i in calls:
            start = _now()
            done = session.maybe_compact()
            if done:
                times["compaction"].append(_since(start, pair))
            session.prompt()


async def async_replay(
    store: ConversationStore,
    name: str,
    items: Sequence[Mapping[str, Any]],
    window: int,
    times: Times,
    pair: int,
) -> None:
    """The same conversation through `AsyncSession`."""
    session = AsyncSession(store, name, settings=_settings(window))
    calls = set(model_calls(items))
    for i, item in enumerate(items):
        if i == 0 and has_system(items):
            await session.set_system_prompt(item["content"])
            continue
        start = _now()
        await session.append(item)
        times["append"].append(_since(start, pair))
        if i in calls:
            start = _now()
            done = await session.maybe_compact()
            done += await session.settle()  # until the compaction started behind has committed
            if done:
                times["compaction"].append(_since(start, pair))
            await session.prompt()
    await session.aclose()


def run(window: int, rounds: int) -> dict[str, dict[str, Times]]:
    """Per store kind and face, every append's and compaction's seconds over all rounds."""
    loaded = [(path.stem, load(path)) for path in conversations()]
    out: dict[str, dict[str, Times]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, Callable[[str], ConversationStore]] = {
            "memory": lambda _: MemoryStore(),
            "sqlite": lambda tag: SQLiteStore(Path(tmp) / f"{tag}.db"),
        }
        for kind, make in stores.items():
            faces: dict[str, Times] = {
                face: {"append": [], "compaction": []} for face in ("sync", "async")
            }
            for r in range(rounds):
                for n, (name, items) in enumerate(loaded):
                    # Alternate which face goes first, so neither always meets a warmer cache.
                    order = ("sync", "async") if (n + r) % 2 == 0 else ("async", "sync")
                    pair = r * len(loaded) + n
                    for face in order:
                        store = make(f"{kind}-{face}-{r}-{n}")
                        if face == "sync":
                            sync_replay(store, name, items, window, faces[face], pair)
                        else:
                            slow = async_replay(store, name, items, window, faces[face], pair)
                            asyncio.run(slow)
                        store.close()
            out[kind] = faces
    return out


def paired(
    sync: Sequence[tuple[float, float, int]], slow: Sequence[tuple[float, float, int]]
) -> float:
    """The median over the pairs of async ÷ sync wall medians: each pair's two replays ran
    within seconds of each other, so a load that moves over minutes cancels in its ratio."""
    ratios = []
    for pair in sorted({t[2] for t in sync} & {t[2] for t in slow}):
        one = statistics.median(t[0] for t in sync if t[2] == pair)
        other = statistics.median(t[0] for t in slow if t[2] == pair)
        ratios.append(other / one)
    return statistics.median(ratios)


def figures(results: Mapping[str, Mapping[str, Times]]) -> list[dict[str, Any]]:
    """Per store and step: each face's median wall and CPU time, async ÷ sync of each, and the
    median of the pairs' wall ratios."""
    rows = []
    for kind, faces in results.items():
        for step in ("append", "compaction"):
            row: dict[str, Any] = {"store": kind, "step": step}
            row["count"] = len(faces["sync"][step])
            row["async_count"] = len(faces["async"][step])
            for n, clock in enumerate(("wall", "cpu")):
                sync = statistics.median(t[n] for t in faces["sync"][step])
                slow = statistics.median(t[n] for t in faces["async"][step])
                row |= {f"sync_{clock}_ms": sync * 1000, f"async_{clock}_ms": slow * 1000}
                row[f"{clock}_ratio"] = slow / sync
            row["paired_ratio"] = paired(faces["sync"][step], faces["async"][step])
            rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = figures(run(args.window, args.rounds))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"window {args.window}, {args.rounds} rounds of {len(conversations())} conversations")
    print("medians, wall clock (CPU of the process, worker threads included); n: Session/Async")
    head = f"{'store':<7} {'step':<11} {'n':>9} {'Session ms':>16} {'AsyncSession ms':>16}"
    print(f"{head} {'async/sync':>15} {'paired':>7}")
    for r in rows:
        n = f"{r['count']}/{r['async_count']}"
        print(
            f"{r['store']:<7} {r['step']:<11} {n:>9} "
            f"{r['sync_wall_ms']:>7.3f} ({r['sync_cpu_ms']:.3f}) "
            f"{r['async_wall_ms']:>7.3f} ({r['async_cpu_ms']:.3f}) "
            f"{r['wall_ratio']:>6.2f}× ({r['cpu_ratio']:.2f}×) {r['paired_ratio']:>6.2f}×"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
