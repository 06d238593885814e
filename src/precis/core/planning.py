"""Which messages to summarize and which to keep: letta-code's planners, plus opt-in improvements.

With the defaults, `plan_sliding_window` reproduces letta-code's local sliding-window planner to
the index, quirks included (JavaScript rounding, the float sequence of the eviction percentage and
the `e >= 1.0` post-check). Improvements are parameters and change nothing unless asked for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, islice
from operator import attrgetter, not_

from precis.core.errors import PlanningError
from precis.core.jscompat import js_round
from precis.core.messages import Message
from precis.core.tokens import TokenCounter, count_all
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
    return list(_steps(normalize_percentage(percentage)))


def _steps(e: float) -> tuple[float, ...]:
    """`eviction_steps` of a normalized percentage."""
    steps: list[float] = []
    while e < 1.0:
        e += 0.1
        steps.append(e)
    return tuple(steps)


def has_pending_tool_call(message: Message) -> bool:
    return message.role == "assistant" and bool(message.tool_calls)


def token_list(messages: Sequence[Message], tokens: Sequence[int] | TokenCounter) -> list[int]:
    """Per-message token counts, from a ready list or a counter."""
    # A plain list or tuple is no counter (it has no count_text): skip the slow protocol check.
    if type(tokens) is not list and type(tokens) is not tuple and isinstance(tokens, TokenCounter):
        return count_all(tokens, messages)
    if len(tokens) != len(messages):
        raise ValueError(f"tokens has {len(tokens)} entries for {len(messages)} messages")
    return list(tokens)


class _TailCounts:
    """Token counts of messages[start:], counted towards the front only as the search asks.

    Counts are held newest first (`backwards[j]` is message n-1-j), so that counting further
    back appends. A count is checked not to be negative: kept tokens only grow as the cut moves
    back, which is what lets the search stop early.
    """

    __slots__ = ("backwards", "counter", "messages", "start", "total", "unseen")

    def __init__(self, messages: Sequence[Message], tokens: Sequence[int] | TokenCounter):
        self.messages = messages
        if (
            type(tokens) is not list
            and type(tokens) is not tuple
            and isinstance(tokens, TokenCounter)
        ):
            self.counter: TokenCounter | None = tokens
            self.backwards: list[int] = []
            self.start = len(messages)
            # A counter that has counted nothing is asked about each part of this list once: it
            # need not look any of them up.
            self.unseen = getattr(tokens, "remembers_nothing", False) is True
        else:
            self.counter = None
            self.unseen = False
            self.backwards = _non_negative(token_list(messages, tokens), 0)[::-1]
            self.start = 0
        self.total = sum(self.backwards)  # of messages[start:]

    def sum(self, start: int, end: int) -> int:
        """The tokens of messages[start:end], counting what is not counted yet."""
        if start < self.start:
            assert self.counter is not None
            part = self.messages[start : self.start]
            counted = _non_negative(count_all(self.counter, part, unseen=self.unseen), start)
            self.backwards.extend(reversed(counted))
            tokens = sum(counted)
            self.total += tokens
            counted_to, self.start = self.start, start
            if end == counted_to:  # what was asked for is what was just counted
                return tokens
        n = len(self.messages)
        return sum(self.backwards[n - end : n - start])

    def at_least(self, start: int, end: int) -> int | None:
        """A lower bound on the tokens of messages[start:end] that costs far less than counting
        them (the counter's `tokens_at_least`), or None when there is none."""
        if start >= self.start:
            return self.sum(start, end)
        bound = getattr(self.counter, "tokens_at_least", None)
        return None if bound is None else int(bound(self.messages[start:end]))

    def per_message(self) -> float:
        """Mean tokens of the messages counted so far (1 when none)."""
        counted = len(self.messages) - self.start
        return self.total / counted if counted and self.total else 1.0

    def of(self, indices: Sequence[int]) -> list[int]:
        """The counts of the messages at these indices."""
        if self.counter is None:
            n = len(self.messages)
            return [self.backwards[n - 1 - i] for i in indices]
        counted = count_all(self.counter, [self.messages[i] for i in indices])
        for i, count in zip(indices, counted, strict=True):
            _non_negative([count], i)
        return counted


def _non_negative(counts: list[int], offset: int) -> list[int]:
    if counts and min(counts) < 0:
        i = next(i for i, c in enumerate(counts) if c < 0)
        raise ValueError(f"token count {counts[i]} of message {offset + i} is negative")
    return counts


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
    counts = _TailCounts(messages, tokens)
    pins = pinned_mask(messages) if _any_pinned(messages) else None
    max_cut = n - 2 if has_pending_tool_call(messages[-1]) else n - 1
    p = normalize_percentage(percentage)
    args = (messages, counts, pins, p, context_window, max_cut, reserved_tokens)
    try:
        cut = _search_cut(*args, roles=("assistant",))
    except PlanningError:
        if not user_boundary_fallback:
            raise
        cut = _search_cut(*args, roles=("assistant", "user"))
    # islice: one pass over each part (a list slice and its tuple would touch every message
    # three times to count references, which at 100k messages is most of a warm plan).
    summarize: tuple[Message, ...] = tuple(islice(messages, cut))
    pinned: tuple[Message, ...] = ()
    if pins is not None and any(pins[:cut]):
        head = summarize
        summarize = tuple(compress(head, map(not_, pins)))
        pinned = tuple(compress(head, pins))
    return CompactionPlan(
        mode="sliding_window",
        cutoff=cut,
        summarize=summarize,
        keep=tuple(islice(messages, cut, None)),
        pinned=pinned,
    )


def plan_to_target(
    messages: Sequence[Message],
    *,
    tokens: Sequence[int] | TokenCounter,
    target_tokens: int,
    reserved_tokens: int = 0,
) -> CompactionPlan:
    """Summarize the fewest oldest messages that bring what stays within `target_tokens`.

    What stays is the kept tail, the pinned messages before the cut and `reserved_tokens`
    (system prompt, tools, the summary to come). A cut is made before any message but a tool
    result, so no call is parted from its results; when no cut reaches the target, everything
    but the newest unsplittable turn (and the pinned messages) is summarized.
    """
    n = len(messages)
    last = n - 1
    while last > 0 and messages[last].role == "tool":
        last -= 1  # back to the call these results answer: the newest turn stays whole
    if last < 1:
        raise PlanningError(NOT_ENOUGH_MESSAGES)
    counts = _non_negative(token_list(messages, tokens), 0)
    pins = pinned_mask(messages) if _any_pinned(messages) else [False] * n
    stays = sum(counts) + reserved_tokens  # with the cut at 0
    cut = 0
    evicts = False  # whether any message before the cut is unpinned
    for i in range(1, last + 1):
        if not pins[i - 1]:
            stays -= counts[i - 1]
            evicts = True
        if evicts and messages[i].role != "tool":
            cut = i
            if stays <= target_tokens:
                break
    if cut == 0:
        raise PlanningError(NOT_ENOUGH_MESSAGES)
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
    counts: _TailCounts,
    pins: list[bool] | None,
    p: float,
    context_window: int | None,
    max_cut: int,
    reserved: int,
    roles: tuple[str, ...],
) -> int:
    """letta's loop, run backwards: the same cut with the fewest messages counted.

    letta steps the eviction percentage up from `p` by 0.1 and stops at the first step whose
    cut leaves a kept tail (plus pinned messages before the cut) that fits the goal; after the
    last step (e >= 1.0) it refuses unless a reserve was given and met. Kept tokens only shrink
    as the cut moves forward, so that first step is found from the last cut back: the tail is
    counted from the end until it no longer fits, and nothing before is ever counted.
    """
    if context_window is None:  # no goal: the first cut is the answer
        first = next(_cuts(messages, p, max_cut, roles), None)
        if first is not None and first[0] < 1.0:
            return first[1]
        raise PlanningError(NO_ASSISTANT_MESSAGE)
    goal = (1 - p) * context_window
    if context_window + reserved < goal:  # letta never steps
        raise PlanningError(NO_ASSISTANT_MESSAGE)
    if counts.counter is None:  # every count is given: the cuts are weighed forwards
        return _first_fitting(_cuts(messages, p, max_cut, roles), counts, pins, goal, reserved)
    found = _candidate_cuts(messages, p, max_cut, roles)
    if not found:
        raise PlanningError(NO_ASSISTANT_MESSAGE)
    pinned: dict[int, int] = {}  # index -> tokens of each pinned message
    if pins:
        pinned_at = list(compress(range(len(messages)), pins))
        pinned = dict(zip(pinned_at, counts.of(pinned_at), strict=True))
    best = len(found) - 1
    cut = found[best][1]
    kept = counts.sum(cut, len(messages)) + sum(t for i, t in pinned.items() if i < cut)
    if kept + reserved >= goal:  # not even the last cut fits
        raise PlanningError(NO_ASSISTANT_MESSAGE)
    while best > 0:
        earlier = found[best - 1][1]
        # kept(earlier) = kept(cut) + the unpinned tokens between them. When those look likely
        # to pass the goal (at the mean so far) and a cheap lower bound of them does, the
        # earlier cut cannot fit: nothing more is counted. (Worth it when counting is dear:
        # a counter that knows nothing yet; a warm one looks its counts up faster.)
        likely = kept + (cut - earlier) * counts.per_message() + reserved >= goal
        if likely and counts.unseen and not any(earlier <= i < cut for i in pinned):
            floor = counts.at_least(earlier, cut)
            if floor is not None and kept + floor + reserved >= goal:
                break
        # Else count back from the cut, in steps of about half the messages the room left would
        # hold, so that the walk stops soon after the goal is passed and asks the counter little.
        end = cut
        while end > earlier and kept + reserved < goal:
            room = goal - reserved - kept
            step = min(2048, max(64, int(room / counts.per_message() / 2)))
            start = max(earlier, end - step)
            kept += counts.sum(start, end)
            kept -= sum(t for i, t in pinned.items() if start <= i < end)
            end = start
        if kept + reserved >= goal:
            break
        best -= 1
        cut = earlier
    e, cut = found[best]
    if e >= 1.0 and reserved <= 0:  # the quirk: the last step fails unless a reserve was met
        raise PlanningError(NO_ASSISTANT_MESSAGE)
    return cut


def _first_fitting(
    found: Iterable[tuple[float, int]],
    counts: _TailCounts,
    pins: list[bool] | None,
    goal: float,
    reserved: int,
) -> int:
    """`_search_cut`'s answer when every count is given (a list): the kept tokens of a cut
    are all the tokens but the unpinned ones before it, which only grow as the cut moves on, so
    the first step whose cut fits is the one the walk back from the last cut stops at; the
    front up to it is summed once (the walk sums the tail after it)."""
    backwards = counts.backwards
    n = len(backwards)
    pinned_at = list(compress(range(n), pins)) if pins else []
    total, before, at, k = counts.total, 0, 0, 0  # the unpinned tokens before index `at`
    for e, cut in found:
        if cut > at:
            before += sum(backwards[n - cut : n - at])
            while k < len(pinned_at) and pinned_at[k] < cut:
                before -= backwards[n - 1 - pinned_at[k]]
                k += 1
            at = cut
        if total - before + reserved < goal:
            if e >= 1.0 and reserved <= 0:  # the quirk: the last step fails unless a reserve
                raise PlanningError(NO_ASSISTANT_MESSAGE)  # was met
            return cut
    raise PlanningError(NO_ASSISTANT_MESSAGE)  # not even the last cut fits


def _candidate_cuts(
    messages: Sequence[Message], p: float, max_cut: int, roles: tuple[str, ...]
) -> list[tuple[float, int]]:
    """Each eviction step that has a cut, with it: the last message in `roles` at or before
    round(e * n) (and before `max_cut`), never the first message. Each index is read once."""
    return list(_cuts(messages, p, max_cut, roles))


def _cuts(
    messages: Sequence[Message], p: float, max_cut: int, roles: tuple[str, ...]
) -> Iterator[tuple[float, int]]:
    """`_candidate_cuts` one step at a time: a search that stops at a step reads no further."""
    n = len(messages)
    cut: int | None = None
    scanned = 0  # indices 1..scanned are looked at already
    for e in _steps(normalize_percentage(p)):
        top = min(js_round(e * n), n - 1, max_cut - 1)
        for i in range(top, scanned, -1):
            if messages[i].role in roles:
                cut = i
                break
        if top > scanned:
            scanned = top
        if cut is not None:
            yield e, cut


def first_cut(messages: Sequence[Message], percentage: float | None) -> int:
    """The earliest cut the sliding window can make of these messages or of them with more
    after (0 when it cannot): its first eviction step's cut, or, when only a later step finds
    one, the first assistant message past the first step's reach (a longer list may cut there
    at an earlier step). No plan summarizes less than the messages before it (a later step, a
    longer list, `plan_all` and a cut before a user message too cut at or after it), whatever
    their tokens."""
    n = len(messages)
    if n < 4:
        return 0
    max_cut = n - 2 if has_pending_tool_call(messages[-1]) else n - 1
    scanned = 0  # `_candidate_cuts`' scan, up to the first cut it finds
    first_top: int | None = None  # how far the first step looks
    for e in eviction_steps(percentage):
        top = min(js_round(e * n), n - 1, max_cut - 1)
        first_top = top if first_top is None else first_top
        for i in range(top, scanned, -1):
            if messages[i].role == "assistant":
                if i <= first_top:
                    return i
                # Found at a later step: a longer list looks further at each step and may cut
                # at an earlier one, at any assistant message past the first step's reach.
                return next(
                    j for j in range(first_top + 1, i + 1) if messages[j].role == "assistant"
                )
        scanned = max(scanned, top)
    return 0


_PINNED = attrgetter("pinned")


def _any_pinned(messages: Sequence[Message]) -> bool:
    # A plain loop: 3.11 reads a slot faster than attrgetter or a generator does, and this reads
    # every message of the conversation.
    for message in messages:  # noqa: SIM110
        if message.pinned:
            return True
    return False


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
    # Only a pinned call or result has others in its group (a pinned task stands alone).
    if any(m.tool_calls or m.role == "tool" for m in compress(messages, mask)):
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
