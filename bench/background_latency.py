"""What a slow summary adds to each model call of an `AsyncSession`, made behind the turns.

The shared conversations are replayed message by message into an `AsyncSession` whose
summarizer takes `--summary-seconds` (2 s) to answer, as a model would; before each model call
(after each message not followed by a tool result) the loop does what an agent does: append,
`maybe_compact`, `prompt`, then "calls the model" (`--model-seconds` of waiting, so the
summary runs beside turns as it would beside real model calls). The figure is the time of
`maybe_compact` per model call: what compaction adds to the call. Calls below the hard
watermark are reported apart from those over it, where the turn waits by design.

    .venv/bin/python bench/background_latency.py [--window 8000] [--conversations 3]
        [--summary-seconds 2] [--model-seconds 0.1] [--store memory|sqlite] [--foreground]

`--foreground` replays the same with `background_compaction=False`, for comparison. Each run
also replays the same loop with no compaction at all (no window: `maybe_compact` only checks),
the anchor its figures are read against.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
TRAJECTORIES = Path(os.environ.get("PRECIS_TRAJECTORIES", ROOT / "tests" / "data" / "trajectories"))


class SlowSummarizer:
    """Answers after `seconds`, as a model would: the summary text is the evicted text's head."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    def summarize(self, request: Any) -> str:
        raise NotImplementedError("an AsyncSession awaits asummarize")

    async def asummarize(self, request: Any) -> str:
        self.calls += 1
        await asyncio.sleep(self.seconds)
        return "SUMMARY: " + "\n".join(m.content for m in request.messages)[:200]


def model_calls(items: Sequence[dict[str, Any]]) -> set[int]:
    """Indices after which the agent calls the model: messages not followed by a tool result."""
    return {
        i
        for i in range(len(items))
        if not (i == 0 and items[0].get("role") == "system")
        and (i + 1 == len(items) or items[i + 1].get("role") != "tool")
    }


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of the values (not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def replay(
    path: Path, args: argparse.Namespace, store: Any, *, anchor: bool = False
) -> dict[str, Any]:
    """One conversation: the `maybe_compact` times below and over the hard watermark (with
    `anchor`, of a session that never compacts: no window)."""
    from precis.engine.settings import CompactionSettings
    from precis.eval import load_conversation
    from precis.session import AsyncSession

    items = load_conversation(path)
    settings = CompactionSettings(
        context_window=None if anchor else args.window,
        background_compaction=not args.foreground,
    )
    summarizer = SlowSummarizer(args.summary_seconds)
    behind: list[float] = []
    idle: list[float] = []
    over: list[float] = []
    calls = model_calls(items)
    name = f"{path.stem}-anchor" if anchor else path.stem
    async with AsyncSession(store, name, summarizer=summarizer, settings=settings) as s:
        hard = settings.hard_limit or math.inf
        for i, item in enumerate(items):
            if i == 0 and item.get("role") == "system":
                await s.set_system_prompt(item["content"])
                continue
            await s.append(item)
            if i not in calls:
                continue
            tokens = await s.tokens()  # not timed: which side of the hard watermark this call is
            assert s.behind is not None
            was = s.behind.running
            start = time.perf_counter()
            await s.maybe_compact()
            ms = (time.perf_counter() - start) * 1000
            if tokens > hard:
                over.append(ms)
            else:  # with a summary under way (running, or started by this call), or none
                (behind if was or s.behind.running else idle).append(ms)
            await s.prompt()
            await asyncio.sleep(args.model_seconds)  # the model call
        events = len(await s.events())
    return {
        "behind": behind,
        "idle": idle,
        "over": over,
        "summaries": summarizer.calls,
        "compactions": events,
    }


async def main_async(args: argparse.Namespace) -> int:
    paths = sorted(TRAJECTORIES.glob("*.jsonl"))[: args.conversations]
    behind: list[float] = []
    idle: list[float] = []
    over: list[float] = []
    anchor: list[float] = []
    compactions = summaries = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            if args.store == "sqlite":
                from precis.stores.sqlite import SQLiteStore

                store: Any = SQLiteStore(Path(tmp) / f"{path.stem}.db")
            else:
                from precis.stores.memory import MemoryStore

                store = MemoryStore()
            with store:
                found = await replay(path, args, store)
                # The anchor, interleaved so both see the same load on the machine.
                plain = await replay(path, args, store, anchor=True)
            anchor += plain["idle"] + plain["behind"]
            behind += found["behind"]
            idle += found["idle"]
            over += found["over"]
            compactions += found["compactions"]
            summaries += found["summaries"]
    mode = "foreground" if args.foreground else "background"
    print(
        f"AsyncSession, {mode} compaction, window {args.window}, {args.store} store, "
        f"{len(paths)} conversations, summarizer {args.summary_seconds:g} s, "
        f"model call {args.model_seconds:g} s"
    )
    below = behind + idle
    print(f"model calls: {len(below) + len(over)} ({len(over)} over the hard watermark)")
    print(f"compactions committed: {compactions}; summarizer calls: {summaries}")
    for label, values in (
        ("below the hard watermark, all", below),
        ("  with a summary under way", behind),
        ("  with none", idle),
    ):
        if values:
            print(
                f"maybe_compact {label} ({len(values)} calls): "
                f"p50 {percentile(values, 50):.2f} ms, p99 {percentile(values, 99):.2f} ms, "
                f"max {max(values):.2f} ms"
            )
    if anchor and below:
        a50, a99 = percentile(anchor, 50), percentile(anchor, 99)
        print(
            f"anchor, the same loop with no compaction at all ({len(anchor)} calls): "
            f"p50 {a50:.2f} ms, p99 {a99:.2f} ms, max {max(anchor):.2f} ms; below the hard "
            f"watermark / anchor: p50 {percentile(below, 50) / a50:.2f}x, "
            f"p99 {percentile(below, 99) / a99:.2f}x"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if over:
        print(
            "maybe_compact over the hard watermark (waits by design): "
            f"p50 {percentile(over, 50):.2f} ms, max {max(over):.2f} ms"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--summary-seconds", type=float, default=2.0)
    parser.add_argument("--model-seconds", type=float, default=0.1)
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--foreground", action="store_true", help="background_compaction=False")
    args = parser.parse_args(argv)
    if args.window < 1 or args.conversations < 1:
        parser.error("--window and --conversations must be positive")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
