"""Which messages to summarize and which to keep: letta-code's planners, plus opt-in improvements.

With the defaults, `plan_sliding_window` reproduces letta-code's local sliding-window planner to
the index, quirks included (JavaScript rounding, the float sequence of the eviction percentage and
the `e >= 1.0` post-check). Improvements are parameters and change nothing unless asked for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter

from precis.core.errors import PlanningError
from precis.core.jscompat import js_round
from precis.core.messages import Message
from precis.core.tokens import TokenCounter
from precis.core.types import PlanMode

DEFAULT_PERCENTAGE = 0.3
NOT_ENOUGH_MESSAGES = "Not enough messages for sliding window compaction."
NO_ASSISTANT_MESSAGE = "No assistant message found for sliding window compaction."


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The planner's answer: summarize `summarize`, keep `pinned` then `keep` verbatim."""

    mode: PlanMode
    cutoff: int | None
    summarize: tuple[Message, ...]
    keep: tuple[Message, ...]
    pinned: tuple[Message, ...] = ()


def normalize_percentage(value: float | None) -> float:
    """letta's clamp: missing or non-finite → 0.3, non-positive → 0.1, above 1 → 1."""
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return DEFAULT_PERCENTAGE
    if value <= 0:
        return 0.1
    if value > 1:
        return 1.0
    return float(value)


def eviction_steps(percentage: float | None) -> list[float]:
    """The eviction steps letta tries (float accumulation): 0.3 → 0.4 … 1.0999999999999999."""
    e = normalize_percentage(percentage)
    steps: list[float] = []
    while e < 1.0:
        e += 0.1
        steps.append(e)
    return steps


def has_pending_tool_call(message: Message) -> bool:
    return message.role == "assistant" and bool(message.tool_calls)


def token_list(messages: Sequence[Message], tokens: Sequence[int] | TokenCounter) -> list[int]:
    """Per-message token counts, from a ready list or a counter."""
    # A plain list or tuple is no counter (it has no count_text): skip the slow protocol check.
    if type(tokens) is not list and type(tokens) is not tuple and isinstance(tokens, TokenCounter):
        return [tokens.count(m) for m in messages]
    if len(tokens) != len(messages):
        raise ValueError(f"tokens has {len(tokens)} entries for {len(messages)} messages")
    return list(tokens)


def plan_sliding_window(
    messages: Sequence[Message],
    *,
    tokens: Sequence[int] | TokenCounter,
    context_window: int | None,
    percentage: float | None = None,
    reserved_tokens: int = 0,
    user_boundary_fallback: bool = False,
) -> CompactionPlan:
    """Evict the oldest messages in steps of 10 % until the kept tail fits the goal.

    `reserved_tokens` (system prompt, tools, expected summary) counts against the goal, so the
    tail really fits; with it set, a pass that met the goal is accepted even at the last step.
    Pinned messages (and the tool pair they belong to) are never summarized. With
    `user_boundary_fallback`, a cut before a user message is accepted when no assistant cut is.
    """
    n = len(messages)
    if n < 4:
        raise PlanningError(NOT_ENOUGH_MESSAGES)
    counts = token_list(messages, tokens)
    pins = pinned_mask(messages)
    max_cut = n - 2 if has_pending_tool_call(messages[-1]) else n - 1
    p = normalize_percentage(percentage)
    args = (messages, counts, pins, p, context_window, max_cut, reserved_tokens)
    try:
        cut = _search_cut(*args, roles=("assistant",))
    except PlanningError:
        if not user_boundary_fallback:
            raise
        cut = _search_cut(*args, roles=("assistant", "user"))
    head = messages[:cut]
    return CompactionPlan(
        mode="sliding_window",
        cutoff=cut,
        summarize=tuple(m for m, pin in zip(head, pins, strict=False) if not pin),
        keep=tuple(messages[cut:]),
        pinned=tuple(m for m, pin in zip(head, pins, strict=False) if pin),
    )


def _search_cut(
    messages: Sequence[Message],
    counts: list[int],
    pins: list[bool],
    p: float,
    context_window: int | None,
    max_cut: int,
    reserved: int,
    roles: tuple[str, ...],
) -> int:
    n = len(messages)
    goal = None if context_window is None else (1 - p) * context_window
    approx: float = math.inf if context_window is None else context_window
    # Kept tokens = the tail from the cut plus pinned messages before it, kept as running sums
    # because the cut only moves forward: the whole search is one pass over the counts.
    total = sum(counts)
    any_pinned = any(pins)
    evicted = 0
    scanned = 0
    cut: int | None = None
    e = p
    while (cut is None if goal is None else approx + reserved >= goal) and e < 1.0:
        e += 0.1
        idx = min(js_round(e * n), n - 1)
        cut = _last_valid_cut(messages, idx, max_cut, roles)
        if cut is None:
            continue
        if cut > scanned:
            evicted += sum(counts[scanned:cut])
            if any_pinned:
                evicted -= sum(compress(counts[scanned:cut], pins[scanned:cut]))
            scanned = cut
        approx = total - evicted
    met_goal = goal is not None and approx + reserved < goal
    if cut is None or (e >= 1.0 and not (reserved > 0 and met_goal)):
        raise PlanningError(NO_ASSISTANT_MESSAGE)
    return cut


def _last_valid_cut(
    messages: Sequence[Message], idx: int, max_cut: int, roles: tuple[str, ...]
) -> int | None:
    for i in range(min(idx, max_cut - 1), 0, -1):
        if messages[i].role in roles:
            return i
    return None


_PINNED = attrgetter("pinned")


def call_groups(messages: Sequence[Message]) -> list[tuple[int, ...]]:
    """Indices grouped so that a tool call and its results are one unit; others stand alone."""
    groups: list[list[int]] = []
    owner: dict[str, int] = {}  # tool call id → index of the group of the message that issued it
    for i, message in enumerate(messages):
        if message.role == "tool" and message.tool_call_id in owner:
            groups[owner[message.tool_call_id]].append(i)
        else:
            groups.append([i])
        for call in message.tool_calls:
            owner[call.id] = len(groups) - 1
    return [tuple(g) for g in groups]


def pinned_mask(messages: Sequence[Message]) -> list[bool]:
    """Pinned flags, widened so a pinned call keeps its results and a pinned result its call."""
    mask = list(map(_PINNED, messages))
    if any(mask):
        for group in call_groups(messages):
            if any(mask[i] for i in group):
                for i in group:
                    mask[i] = True
    return mask


def plan_all(messages: Sequence[Message], *, keep_newest: bool = False) -> CompactionPlan:
    """Summarize everything, except a trailing assistant message whose tool call is pending.

    With `keep_newest`, the newest message (with its tool call, when it is a result) is kept
    too, so the turn the agent is answering is never summarized away.
    """
    pins = pinned_mask(messages)
    start = len(messages)
    if messages and has_pending_tool_call(messages[-1]):
        start = len(messages) - 1
    elif messages and keep_newest:
        start = len(messages) - 1
        while start > 0 and messages[start].role == "tool":
            start -= 1  # back to the assistant message that issued these results
    head, keep = messages[:start], tuple(messages[start:])
    head_mask = pins[:start]
    return CompactionPlan(
        mode="all",
        cutoff=None,
        summarize=tuple(m for m, pin in zip(head, head_mask, strict=True) if not pin),
        keep=keep,
        pinned=tuple(m for m, pin in zip(head, head_mask, strict=True) if pin),
    )
