"""How planning scales: plan_sliding_window against one pass over the token list, same process.

Prints, for 1k, 10k and 100k messages, the planner's time divided by the time of one Python pass
that sums the token list (and, for reference, by the builtin C `sum`). Linear planning keeps the
first ratio flat and small; a quadratic planner would grow it 10x per row.
"""

from __future__ import annotations

import random
import sys
import timeit
from collections.abc import Callable

from precis.core.messages import Message, ToolCall
from precis.core.planning import plan_sliding_window

SIZES = (1_000, 10_000, 100_000)


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


def best_of(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number


def measure(messages: list[Message], tokens: list[int]) -> tuple[float, float, float]:
    """Seconds per call of the planner, of a Python pass and of the builtin sum."""
    window = sum(tokens) // 2  # half the conversation must go: a real multi-step search
    number = max(1, 200_000 // len(messages))
    plan_t = best_of(
        lambda: plan_sliding_window(messages, tokens=tokens, context_window=window), number
    )
    return (
        plan_t,
        best_of(lambda: python_pass(tokens), number),
        best_of(lambda: sum(tokens), number),
    )


def main() -> int:
    rng = random.Random(7)
    print(
        f"{'messages':>9} {'plan (ms)':>10} {'pass (ms)':>10} {'plan/pass':>10} {'plan/sum()':>11}"
    )
    worst = 0.0
    for n in SIZES:
        plan_t, pass_t, sum_t = measure(*conversation(n, rng))
        ratio = plan_t / pass_t
        worst = max(worst, ratio)
        row = f"{n:>9} {plan_t * 1e3:>10.3f} {pass_t * 1e3:>10.3f} {ratio:>10.2f}"
        print(f"{row} {plan_t / sum_t:>11.2f}")
    print(f"worst plan/pass ratio: {worst:.2f} (limit 20)")
    return 0 if worst < 20 else 1


if __name__ == "__main__":
    sys.exit(main())
