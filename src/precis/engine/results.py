"""What a compaction reports: its figures, and the outcome a caller gets back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from precis.core.messages import Message
from precis.core.types import StatsMode, Trigger

if TYPE_CHECKING:
    from precis.stores.base import ContextSnapshot

# What stood in for a summarizer that failed: the extractive brief, or (when no brief could
# make the context fit) truncation.
Fallback: TypeAlias = Literal["extractive", "truncation"]
FALLBACK_EXTRACTIVE: Fallback = "extractive"
FALLBACK_TRUNCATION: Fallback = "truncation"


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """What one compaction did, in the figures an operator watches.

    `cache_kept_tokens` are the prompt's tokens before its first changed message (system prompt,
    tools, pinned messages…: what a provider's prompt cache keeps), `rewritten_tokens` those from
    there on, which the provider reads afresh. `fallback` names what stood in for a summarizer
    that failed, and `fallback_reason` its failure in one line; both are None (and left out of
    `as_dict`) when the summarizer answered.
    """

    trigger: Trigger
    mode: StatsMode
    context_tokens_before: int
    context_tokens_after: int
    context_window: int | None
    messages_count_before: int
    messages_count_after: int
    summarized: int
    # The conversation's own watermarks when it compacted (the window is above): what the
    # inspector draws, whatever the service's settings are now.
    threshold: int | None = None
    hard_limit: int | None = None
    fallback: Fallback | None = None
    fallback_reason: str | None = None
    cache_kept_tokens: int = 0
    rewritten_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, in field order (what `dataclasses.asdict` gives, cheaper),
        the fallback's only when there was one: a compaction the summarizer made is stored as
        it was before fallbacks were recorded."""
        names = _STATS_FIELDS if self.fallback is not None else _SUMMARY_FIELDS
        return {name: getattr(self, name) for name in names}


# CompactionStats' field names in order, looked up once; and those but the fallback's.
_STATS_FIELDS = tuple(f.name for f in fields(CompactionStats))
_SUMMARY_FIELDS = tuple(n for n in _STATS_FIELDS if not n.startswith("fallback"))


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """The outcome: stats, the summary (or truncation marker) and the new context.

    When nothing could make the context smaller the compaction is a no-op: nothing was written,
    `summary` is None, the stats show the same size before and after (mode `none`) and `reason`
    says why. `reports` holds one line per hook that failed, timed out or was skipped.
    """

    stats: CompactionStats
    summary: Message | None
    context: list[Message]
    reports: tuple[str, ...] = ()
    reason: str = ""
    # The store's context as the commit left it (None for a no-op): a session reads on from it.
    committed: ContextSnapshot | None = None

    @property
    def compacted(self) -> bool:
        """Whether a compaction was committed (False: a no-op, see `reason`)."""
        return self.summary is not None


def prompt_cache(
    before: Sequence[Message], after: Sequence[Message], count: Callable[[Message], int], floor: int
) -> tuple[int, int]:
    """(tokens a provider's prompt cache keeps, tokens rewritten) when the prompt goes from
    `before` to `after`: the prompt leads with the system prompt and tools (`floor` tokens),
    then the pinned messages, then the rest; the cache keeps it up to the first change."""
    old, new = _prompt_order(before), _prompt_order(after)
    same = 0
    for a, b in zip(old, new, strict=False):
        if a is not b and a != b:
            break
        same += 1
    kept = floor + sum(map(count, new[:same]))
    return kept, sum(map(count, new[same:]))


def _prompt_order(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.pinned] + [m for m in messages if not m.pinned]


# The mode a no-op compaction reports in its stats.
NO_OP_MODE: Final[StatsMode] = "none"


def unchanged(trigger: Trigger, tokens: int, messages: int, window: int | None) -> CompactionStats:
    """The stats of a no-op: the same size before and after, nothing summarized."""
    return CompactionStats(
        trigger=trigger,
        mode=NO_OP_MODE,
        context_tokens_before=tokens,
        context_tokens_after=tokens,
        context_window=window,
        messages_count_before=messages,
        messages_count_after=messages,
        summarized=0,
    )
