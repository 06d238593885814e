"""What a compaction reports: its figures, and the outcome a caller gets back."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from precis.core.messages import Message


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """What one compaction did, in the figures an operator watches."""

    trigger: str
    mode: str
    context_tokens_before: int
    context_tokens_after: int
    context_window: int | None
    messages_count_before: int
    messages_count_after: int
    summarized: int

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, in field order (what `dataclasses.asdict` gives, cheaper)."""
        return {name: getattr(self, name) for name in _STATS_FIELDS}


# CompactionStats' field names in order, looked up once.
_STATS_FIELDS = tuple(f.name for f in fields(CompactionStats))


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

    @property
    def compacted(self) -> bool:
        """Whether a compaction was committed (False: a no-op, see `reason`)."""
        return self.summary is not None


# The mode a no-op compaction reports in its stats.
NO_OP_MODE = "none"


def unchanged(trigger: str, tokens: int, messages: int, window: int | None) -> CompactionStats:
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
