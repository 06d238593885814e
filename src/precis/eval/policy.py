"""What the compaction policy costs: how often it compacts, how much room each compaction frees,
and how much of the prompt the provider's cache keeps, per strategy and window.

Per 100 model calls (a consult before each): compactions and summarizer calls. Per compaction
that wrote something: the share of the window it freed (median and 10th percentile), and the
prompt tokens before its first change (kept by a provider's prompt cache) and after (rewritten).
A compaction that freed less than `SMALL_FREED` of the window counts as small, unless the system
prompt, tools, pinned messages and the newest turn alone were over the target (`cramped`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from precis.engine.results import NO_OP_MODE
from precis.eval.replay import EvalReport, compacting_runs

if TYPE_CHECKING:
    from rich.table import Table

# A compaction that frees less than a fifth of the window is soon followed by another.
SMALL_FREED = 0.2


@dataclass(frozen=True, slots=True)
class PolicyCell:
    """One strategy at one window, pooled over every conversation replayed."""

    strategy: str
    window: int
    model_calls: int
    compactions: int
    summarizer_calls: int
    freed: tuple[float, ...]  # each compaction's share of the window freed, ascending
    small: int  # compactions that freed less than SMALL_FREED, not cramped
    cache_kept: int  # summed over compactions
    rewritten: int

    def per_100(self, count: int) -> float | None:
        return 100 * count / self.model_calls if self.model_calls else None

    @property
    def median_freed(self) -> float | None:
        return _quantile(self.freed, 0.5)

    @property
    def p10_freed(self) -> float | None:
        return _quantile(self.freed, 0.1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "window": self.window,
            "model_calls": self.model_calls,
            "compactions": self.compactions,
            "compactions_per_100_calls": self.per_100(self.compactions),
            "summarizer_calls": self.summarizer_calls,
            "summarizer_calls_per_100_calls": self.per_100(self.summarizer_calls),
            "median_freed": self.median_freed,
            "p10_freed": self.p10_freed,
            "small": self.small,
            "cache_kept_tokens": self.cache_kept,
            "rewritten_tokens": self.rewritten,
        }


def _quantile(ascending: Sequence[float], q: float) -> float | None:
    """The q-quantile by linear interpolation between the closest ranks; None when empty."""
    if not ascending:
        return None
    at = q * (len(ascending) - 1)
    low = int(at)
    high = min(low + 1, len(ascending) - 1)
    return ascending[low] + (ascending[high] - ascending[low]) * (at - low)


def policy_cells(reports: Sequence[EvalReport]) -> list[PolicyCell]:
    """A cell per compacting strategy and window, strategies in the order they ran."""
    cells: list[PolicyCell] = []
    for name, window, runs in compacting_runs(reports):
        records = [c for r in runs for c in r.compactions if c.mode != NO_OP_MODE]
        freed = [c.freed for c in records if c.freed is not None]
        cells.append(
            PolicyCell(
                strategy=name,
                window=window,
                model_calls=sum(r.model_calls for r in runs),
                compactions=len(records),
                summarizer_calls=sum(r.summarizer_calls for r in runs),
                freed=tuple(sorted(freed)),
                small=sum(
                    c.freed is not None and c.freed < SMALL_FREED and not c.cramped for c in records
                ),
                cache_kept=sum(c.cache_kept for c in records),
                rewritten=sum(c.rewritten for c in records),
            )
        )
    return cells


def render_policy(cells: Sequence[PolicyCell]) -> Table:
    """One row per strategy and window: how often it compacts, what each frees, cache cost."""
    from rich.table import Table

    table = Table(
        title="how often and how much: per 100 model calls, and per compaction",
        caption=f"freed: share of the window; small: freed < {SMALL_FREED:.0%} with room to do "
        "better; kept / rewritten: prompt tokens a provider's cache keeps / reads afresh",
    )
    table.add_column("strategy")
    headers = ("window", "compactions/100", "summaries/100", "freed median", "p10", "small")
    for header in (*headers, "kept", "rewritten"):
        table.add_column(header, justify="right")
    for cell in cells:
        table.add_row(
            cell.strategy,
            f"{cell.window:,}",
            _number(cell.per_100(cell.compactions)),
            _number(cell.per_100(cell.summarizer_calls)),
            _share(cell.median_freed),
            _share(cell.p10_freed),
            str(cell.small),
            f"{cell.cache_kept:,}",
            f"{cell.rewritten:,}",
        )
    return table


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def policy_json(cells: Sequence[PolicyCell]) -> list[dict[str, Any]]:
    return [c.as_dict() for c in cells]
