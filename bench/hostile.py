"""Hostile text at full size: every extractor and a whole compaction on a megabyte run of each
character class (tests/test_hostile_input.py's RUNS), beside the same on a quarter of it.

For each extractor and run it prints the CPU seconds on `--size` characters, the ratio
t(size) / t(size / 4) (about 4 for a linear scan, about 16 for a quadratic one) and the time as
a multiple of an anchor measured in the same run: one `str.split` and one `str.lower` of the
same text. The compaction rows put the run in one `--place` of a seven-message conversation
(append, compact, prompt). The suite holds the shape of this (cost ratios at a few thousand
characters); the figures on a megabyte are this script's (bench/README.md).

    .venv/bin/python bench/hostile.py [--size 1000000] [--runs spaces,tabs] [--only NAME,...]
        [--place user|assistant|arguments|tool|all] [--no-extractors] [--no-compaction]
        [--show-all]

It prints only the rows over `--show` seconds or a ratio over 6 unless `--show-all`, then the
slowest row of each part, and exits 1 when a row is over 2 s or its ratio over 8.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import test_hostile_input as hostile  # noqa: E402  (the suite's runs and extractors)

from precis.engine.settings import CompactionSettings  # noqa: E402
from precis.session import Session  # noqa: E402
from precis.stores.memory import MemoryStore  # noqa: E402

BOUND_SECONDS = 2.0
BOUND_RATIO = 8.0


def cpu(work: Callable[[], Any]) -> float:
    """CPU seconds of this thread on `work`, the collector held off."""
    gc.disable()
    try:
        start = time.thread_time()
        work()
        return time.thread_time() - start
    finally:
        gc.enable()


def anchor(text: str) -> float:
    """The anchor: one split and one lowering of `text`, linear passes any scan makes."""
    return cpu(lambda: (text.split(), text.lower()))


def compaction(text: str, place: str) -> None:
    """An append, a masking, a summary and a prompt over a conversation with `text` in `place`."""
    places = hostile._places(text) if place == "all" else (place,)
    if "arguments" in places and hostile.nested_too_deep(text):  # refused there, unwritten
        places = tuple(p for p in places if p != "arguments")
    session = Session(MemoryStore(), "c", settings=CompactionSettings(context_window=8_000_000))
    session.append(*hostile._conversation(text, places))
    session.compact(trigger="manual")  # the policy's own choice: the masking tier first
    session.compact("sliding_window", trigger="manual")  # a summary, whatever masking freed
    session.prompt()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--runs", default="", help="names from RUNS, comma-separated")
    parser.add_argument("--only", default="", help="extractor names, comma-separated")
    parser.add_argument("--place", default="user", choices=(*hostile.PLACES, "all"))
    parser.add_argument("--no-extractors", action="store_true")
    parser.add_argument("--no-compaction", action="store_true")
    parser.add_argument("--show", type=float, default=0.5)
    parser.add_argument("--show-all", action="store_true")
    args = parser.parse_args()
    runs = {k: v for k, v in hostile.RUNS.items() if not args.runs or k in args.runs.split(",")}
    works: dict[str, Callable[[str], Any]] = {}
    if not args.no_extractors:
        only = args.only.split(",") if args.only else list(hostile.EXTRACTORS)
        works.update({k: v for k, v in hostile.EXTRACTORS.items() if k in only})
    if not args.no_compaction:
        works[f"compaction ({args.place})"] = lambda t: compaction(t, args.place)
    print(f"{len(runs)} runs x {len(works)} scans, {args.size:,} characters each")
    print(f"{'run':<14} {'scan':<30} {'s':>7} {'ratio':>6} {'x anchor':>9}")
    worst: dict[bool, tuple[float, str]] = {}
    over = 0
    for run_name, unit in runs.items():
        full, quarter = hostile.run_of(unit, args.size), hostile.run_of(unit, args.size // 4)
        base = max(anchor(full), 1e-6)
        for name, work in works.items():
            small = cpu(partial(hostile.consume, work, quarter))
            big = cpu(partial(hostile.consume, work, full))
            ratio = big / max(small, 1e-6)
            bad = big > BOUND_SECONDS or (ratio > BOUND_RATIO and big > 0.05)
            over += bad
            is_compaction = name.startswith("compaction")
            if big > worst.get(is_compaction, (-1.0, ""))[0]:
                worst[is_compaction] = (big, f"{run_name} / {name}")
            if args.show_all or bad or big > args.show or (ratio > 6 and big > 0.05):
                flag = "  OVER" if bad else ""
                print(
                    f"{run_name:<14} {name:<30} {big:7.3f} {ratio:6.1f} {big / base:9.0f}{flag}",
                    flush=True,
                )
    for is_compaction, (seconds, where) in sorted(worst.items()):
        part = "compaction" if is_compaction else "extractor"
        print(f"slowest {part}: {where}: {seconds:.3f} s")
    print(f"{over} rows over {BOUND_SECONDS:g} s or a ratio of {BOUND_RATIO:g}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
