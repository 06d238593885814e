"""S3's hard-watermark truncation: drop the oldest tool outputs, then the oldest messages, no model.

At the hard watermark there is no time for a summary, so whole call groups (an assistant message
with tool calls plus its results) leave the context, oldest tool output first, and one marker
message tells the model that the history holds what went: an earlier marker leaves with them, the
new one counting what it omitted too, so markers never pile up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.core.planning import call_groups, pinned_mask
from precis.core.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class TruncationPlan:
    """What leaves the context, what stays (marker included, in place) and the marker itself."""

    dropped: tuple[Message, ...]
    kept: tuple[Message, ...]
    marker: Message | None


def marker_text(omitted: int, red_lines: Sequence[str] = ()) -> str:
    """The marker's words: how much went, where to find it, and the constraints it stated."""
    text = f"[{omitted} earlier messages omitted — search the history for them]"
    if red_lines:
        text += "\nConstraints stated in them, verbatim:" + "".join(f"\n- {r}" for r in red_lines)
    return text


def make_marker(omitted: int, red_lines: Sequence[str] = ()) -> Message:
    """The marker message put where the dropped messages were; the engine assigns its id."""
    return Message(
        role="user",
        kind=KIND_MARKER,
        content=marker_text(omitted, red_lines),
        metadata={"omitted": omitted},
    )


def plan_truncation(
    messages: Sequence[Message],
    *,
    counter: TokenCounter,
    budget_tokens: int,
    keep_last: int = 2,
    floor_tokens: int = 0,
    red_lines: Sequence[str] = (),
) -> TruncationPlan:
    """Drop the oldest tool-output groups, then the oldest groups, until the context fits.

    Fits means `tokens(kept) + tokens(marker) + floor_tokens <= budget_tokens`. Pinned messages,
    system messages, the newest summary and the last `keep_last` messages (with their call
    groups) never go; when only those are left the plan is as small as it can be.
    """
    if keep_last < 0:
        raise ValueError(f"keep_last must be >= 0, got {keep_last}")
    counts = [counter.count(m) for m in messages]
    total = sum(counts)
    unchanged = TruncationPlan(dropped=(), kept=tuple(messages), marker=None)
    if total + floor_tokens <= budget_tokens:
        return unchanged

    groups = call_groups(messages)
    fixed = _undroppable(messages, keep_last)
    # Earlier markers leave with the first drop: the new one counts what they omitted, so one
    # marker says how many messages went in all.
    markers = [i for i, m in enumerate(messages) if m.kind == KIND_MARKER and not fixed[i]]
    omitted = sum(_omitted(messages[i]) for i in markers)
    droppable = [g for g in groups if not any(fixed[i] or i in markers for i in g)]
    with_output = [g for g in droppable if any(messages[i].role == "tool" for i in g)]
    without_output = [g for g in droppable if not any(messages[i].role == "tool" for i in g)]

    dropped_indices: set[int] = set(markers)
    total -= sum(counts[i] for i in markers)
    marker: Message | None = None
    for group in with_output + without_output:
        dropped_indices.update(group)
        total -= sum(counts[i] for i in group)
        omitted += len(group)
        marker = make_marker(omitted, red_lines)
        if total + counter.count(marker) + floor_tokens <= budget_tokens:
            break
    if marker is None:
        return unchanged

    mask = pinned_mask(messages)
    kept: list[Message] = []
    placed = False
    for i, message in enumerate(messages):
        if i in dropped_indices:
            continue
        leads = mask[i] or message.kind == KIND_SUMMARY or message.role == "system"
        if not placed and not leads:
            kept.append(marker)
            placed = True
        kept.append(message)
    if not placed:
        kept.append(marker)
    dropped = tuple(messages[i] for i in sorted(dropped_indices))
    return TruncationPlan(dropped=dropped, kept=tuple(kept), marker=marker)


def _omitted(marker: Message) -> int:
    """How many messages an earlier marker said were omitted (one, the marker, if unsaid)."""
    count = marker.metadata.get("omitted")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


def context_after(plan: TruncationPlan) -> list[Message]:
    """The context the plan leaves, marker in place, ready to send or commit."""
    return list(plan.kept)


def _undroppable(messages: Sequence[Message], keep_last: int) -> list[bool]:
    fixed = pinned_mask(messages)
    n = len(messages)
    for i in range(max(0, n - keep_last), n):
        fixed[i] = True
    newest_summary = max((i for i, m in enumerate(messages) if m.kind == KIND_SUMMARY), default=-1)
    if newest_summary >= 0:
        fixed[newest_summary] = True
    for i, message in enumerate(messages):
        if message.role == "system":
            fixed[i] = True
    return fixed
