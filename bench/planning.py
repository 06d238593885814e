"""The planner beside letta-code's own, on letta's benchmark input, and how planning scales.

    .venv/bin/python bench/planning.py --setup     # once: npm pack @letta-ai/letta-code@0.32.18
    .venv/bin/python bench/planning.py [--rounds 7] [--sizes 1000,10000,100000]

Part 1 times, in one run and on the same conversation, letta-code's planner under node and
`plan_sliding_window` with letta's estimate, two ways:

- fresh: a new `LettaEstimator` per call, so every call counts from nothing (what letta does);
- warm: one estimator kept across calls, as a `Session` keeps its counter.

The conversation is letta's own benchmark one (`bench/letta_planner.mjs` builds it for node, this
file for precis): user text / assistant text with one Read call / a 400-character tool result,
repeated; the window is half the estimated tokens. Both sides are timed alike: one call to warm
up, then rounds of several calls, garbage collection on; a figure is the median of the rounds'
mean time per call, and node runs before and after precis so that load on the machine falls on
both. Wall clock is what the goals are judged on; CPU time (of the whole process: node's
collector has threads of its own) is printed beside it, because on a shared machine the wall
clock also measures waiting for a core. The total estimate and the cut must agree with letta's,
or the row says so.

Part 2 divides the planner's time by one Python pass over the token list at 1k / 10k / 100k
messages: linear planning keeps the ratio flat and small; a quadratic one would grow it 10x a row.

Exit status 1 when a goal is missed: fresh <= 1.0x letta and warm <= 0.5x letta at 10k and 100k
messages, plan/pass below 20.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from precis.core.jscompat import js_json_stringify
from precis.core.messages import Message, ToolCall
from precis.core.planning import plan_sliding_window
from precis.core.tokens import LettaEstimator

LETTA_PACKAGE = "@letta-ai/letta-code"
LETTA_VERSION = "0.32.18"
CACHE = Path(os.environ.get("PRECIS_BENCH_CACHE", Path.home() / ".cache" / "precis-bench"))
BUNDLE = CACHE / f"letta-code-{LETTA_VERSION}" / "letta.js"
TIMER = Path(__file__).with_name("letta_planner.mjs")
SIZES = (1_000, 10_000, 100_000)
GOAL_SIZES = (10_000, 100_000)
FRESH_GOAL = 1.0
WARM_GOAL = 0.5


def calls_per_round(n: int) -> int:
    """Enough calls that a round spans a few plans at every size (and amortises collection)."""
    return max(3, 60_000 // n)


# --- Part 1: letta's benchmark input, both planners ---------------------------------------------


def letta_conversation(n: int) -> list[Message]:
    """letta's benchmark conversation as precis holds it (what tests/letta_shape.py makes of it)."""
    messages: list[Message] = []
    for i in range(n):
        mid = f"m{i}"
        if i % 3 == 0:
            content = f"please look at src/app.py and fix the bug number {i}"
            messages.append(Message(role="user", content=content, id=mid))
        elif i % 3 == 1:
            arguments = js_json_stringify({"path": "src/app.py", "line": i})
            call = ToolCall(f"c{i}", "Read", arguments)
            messages.append(
                Message(role="assistant", content="reading the file", id=mid, tool_calls=(call,))
            )
        else:
            messages.append(
                Message(role="tool", content="x" * 400, id=mid, tool_call_id=f"c{i - 1}")
            )
    return messages


def round_means(action: Callable[[], object], calls: int, rounds: int) -> Rounds:
    """Wall-clock and CPU ms per call of each round, after one call to warm up (collection on)."""
    action()
    wall, cpu = [], []
    for _ in range(rounds):
        start, used = time.perf_counter(), time.process_time()
        for _ in range(calls):
            action()
        cpu.append((time.process_time() - used) * 1e3 / calls)
        wall.append((time.perf_counter() - start) * 1e3 / calls)
    return {"wall": wall, "cpu": cpu}


Rounds = dict[str, list[float]]


def time_letta(sizes: tuple[int, ...], rounds: int) -> dict[int, dict[str, Any]]:
    """letta's rows from node: the round means, its token total and its cut."""
    spec = [f"{n}:{calls_per_round(n)}" for n in sizes]
    run = subprocess.run(
        ["node", str(TIMER), str(BUNDLE), str(rounds), *spec],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise RuntimeError(f"node {TIMER.name} failed: {run.stderr.strip()}")
    return {row["n"]: row for row in map(json.loads, run.stdout.splitlines())}


def time_precis(n: int, rounds: int) -> dict[str, Any]:
    messages = letta_conversation(n)
    total = sum(LettaEstimator().count_many(messages))
    window = total // 2
    calls = calls_per_round(n)
    warm = LettaEstimator()

    def fresh_plan() -> object:
        return plan_sliding_window(messages, tokens=LettaEstimator(), context_window=window)

    def warm_plan() -> object:
        return plan_sliding_window(messages, tokens=warm, context_window=window)

    return {
        "total_tokens": total,
        "cutoff": plan_sliding_window(messages, tokens=warm, context_window=window).cutoff,
        "fresh": round_means(fresh_plan, calls, rounds),
        "warm": round_means(warm_plan, calls, rounds),
    }


def versus_letta(sizes: tuple[int, ...], rounds: int) -> bool:
    """Part 1; True when every goal is met (or letta could not run, which is said loudly)."""
    node = shutil.which("node")
    if node is None or not BUNDLE.exists():
        why = "node is not installed" if node is None else f"no {BUNDLE} (run with --setup)"
        print(f"letta-code not run: {why}. Part 1 skipped.")
        return True
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    print(
        f"Part 1: letta's benchmark input, {LETTA_PACKAGE} {LETTA_VERSION} under node {version} "
        f"vs precis (Python {sys.version.split()[0]})"
    )
    print(
        f"ms per call, median of {rounds} rounds (node: {2 * rounds}, before and after precis); "
        "CPU = the whole process, node's collector threads included"
    )
    before = time_letta(sizes, rounds)
    ours = {n: time_precis(n, rounds) for n in sizes}
    after = time_letta(sizes, rounds)
    print(
        f"{'':>9} {'wall clock':-^42} {'CPU time':-^42}\n{'messages':>9}"
        + f" {'letta':>8} {'fresh':>8} {'ratio':>6} {'warm':>8} {'ratio':>6}" * 2
        + "  same total and cut"
    )
    met = True
    for n in sizes:
        same = (
            ours[n]["total_tokens"] == before[n]["total_tokens"]
            and ours[n]["cutoff"] == before[n]["cutoff"]
        )
        row = f"{n:>9}"
        for clock in ("wall", "cpu"):
            letta_ms = statistics.median([*before[n][clock], *after[n][clock]])
            fresh_ms = statistics.median(ours[n]["fresh"][clock])
            warm_ms = statistics.median(ours[n]["warm"][clock])
            fresh_ratio, warm_ratio = fresh_ms / letta_ms, warm_ms / letta_ms
            row += f" {letta_ms:>8.3f} {fresh_ms:>8.3f} {fresh_ratio:>5.2f}x"
            row += f" {warm_ms:>8.3f} {warm_ratio:>5.2f}x"
            if clock == "wall" and n in GOAL_SIZES:
                met = met and fresh_ratio <= FRESH_GOAL and warm_ratio <= WARM_GOAL
        total, cutoff = ours[n]["total_tokens"], ours[n]["cutoff"]
        print(row + "  " + ("yes" if same else f"NO: precis {total} tokens, cut {cutoff}"))
        met = met and same
    goals = ", ".join(f"{n // 1000}k" for n in GOAL_SIZES)
    print(
        f"goals (wall clock) at {goals}: fresh <= {FRESH_GOAL}x, warm <= {WARM_GOAL}x letta: "
        + ("met" if met else "MISSED")
    )
    return met


def setup() -> int:
    """Fetch letta-code's published bundle with npm (its registry only) into the cache."""
    if shutil.which("npm") is None:
        print("npm is not installed", file=sys.stderr)
        return 1
    BUNDLE.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        spec = f"{LETTA_PACKAGE}@{LETTA_VERSION}"
        packed = subprocess.run(
            ["npm", "pack", spec, "--pack-destination", tmp, "--silent"],
            capture_output=True,
            text=True,
            check=False,
        )
        if packed.returncode != 0:
            print(f"npm pack {spec} failed: {packed.stderr.strip()}", file=sys.stderr)
            return 1
        tarball = Path(tmp) / packed.stdout.strip().splitlines()[-1]
        with tarfile.open(tarball) as archive:
            member = archive.extractfile("package/letta.js")
            if member is None:
                print(f"{tarball.name} has no package/letta.js", file=sys.stderr)
                return 1
            BUNDLE.write_bytes(member.read())
    print(f"wrote {BUNDLE}")
    return 0


# --- Part 2: linear planning ------------------------------------------------------------------


def conversation(n: int, rng: random.Random) -> tuple[list[Message], list[int]]:
    """User turns, assistant replies and tool rounds, with token counts of real-looking sizes."""
    messages: list[Message] = []
    tokens: list[int] = []
    call = 0
    while len(messages) < n:
        messages.append(Message(role="user", content="task", id=f"m{len(messages)}"))
        tokens.append(rng.randint(5, 200))
        for _ in range(rng.randint(0, 3)):
            cid = f"c{call}"
            call += 1
            messages.append(
                Message(
                    role="assistant",
                    tool_calls=(ToolCall(cid, "run", "{}"),),
                    id=f"m{len(messages)}",
                )
            )
            tokens.append(rng.randint(10, 80))
            messages.append(
                Message(role="tool", content="out", tool_call_id=cid, id=f"m{len(messages)}")
            )
            tokens.append(rng.randint(20, 2000))
        messages.append(Message(role="assistant", content="done", id=f"m{len(messages)}"))
        tokens.append(rng.randint(10, 400))
    return messages[:n], tokens[:n]


def python_pass(tokens: list[int]) -> int:
    total = 0
    for t in tokens:
        total += t
    return total


def best_ms(fn: Callable[[], object], number: int) -> float:
    return min(round_means(fn, number, 7)["wall"])


def scaling(sizes: tuple[int, ...]) -> bool:
    rng = random.Random(7)
    print("Part 2: planner time / one Python pass over the token list")
    print(f"{'messages':>9} {'plan (ms)':>10} {'pass (ms)':>10} {'plan/pass':>10}")
    worst = 0.0
    for n in sizes:
        messages, tokens = conversation(n, rng)
        window = sum(tokens) // 2  # half the conversation must go: a real multi-step search
        number = max(1, 200_000 // n)
        plan = partial(plan_sliding_window, messages, tokens=tokens, context_window=window)
        plan_t = best_ms(plan, number)
        pass_t = best_ms(partial(python_pass, tokens), number)
        worst = max(worst, plan_t / pass_t)
        print(f"{n:>9} {plan_t:>10.3f} {pass_t:>10.3f} {plan_t / pass_t:>10.2f}")
    print(f"worst plan/pass ratio: {worst:.2f} (limit 20)")
    return worst < 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", action="store_true", help="fetch letta-code's bundle and exit")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per figure")
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="message counts, comma-separated (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.setup:
        return setup()
    try:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: comma-separated message counts expected")
    if args.rounds < 1 or min(sizes) < 4:
        parser.error("--rounds must be positive and every size at least 4 messages")
    met = versus_letta(sizes, args.rounds)
    print()
    linear = scaling(sizes)
    return 0 if met and linear else 1


if __name__ == "__main__":
    sys.exit(main())
