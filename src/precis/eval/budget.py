"""Whether the budget holds: failed compactions and the context right after each, per strategy
and window.

After a compaction the context must be within the soft watermark, or within the window when the
newest unsplittable turn with the system prompt, tools and pinned messages is larger than that
(the view then shows it head+tail). A compaction that raised is a failure; one that found nothing
to make smaller wrote nothing (mode `none`) and counts as over its bound if the context was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from precis.engine.results import NO_OP_MODE
from precis.eval.judge import as_data
from precis.eval.replay import EvalReport, compacting_runs

if TYPE_CHECKING:
    from rich.table import Table


@dataclass(frozen=True, slots=True)
class BudgetCell:
    """One strategy at one window, pooled over every conversation replayed."""

    strategy: str
    window: int
    conversations: int
    compactions: int
    failed: int
    no_ops: int
    over: int
    peak_after: int | None

    @property
    def holds(self) -> bool:
        """No failure, no compaction left above its bound, and nothing after one above the
        window."""
        peak_ok = self.peak_after is None or self.peak_after <= self.window
        return self.failed == 0 and self.over == 0 and peak_ok

    def as_dict(self) -> dict[str, Any]:
        return as_data(
            self, "strategy window conversations compactions failed no_ops over peak_after holds"
        )


def budget_cells(reports: Sequence[EvalReport]) -> list[BudgetCell]:
    """A cell per compacting strategy and window, strategies in the order they ran."""
    cells: list[BudgetCell] = []
    for name, window, runs in compacting_runs(reports):
        records = [c for r in runs for c in r.compactions]
        cells.append(
            BudgetCell(
                strategy=name,
                window=window,
                conversations=len(runs),
                compactions=len(records),
                failed=sum(r.failed for r in runs),
                no_ops=sum(c.mode == NO_OP_MODE for c in records),
                over=sum(c.over for c in records),
                peak_after=max((c.tokens_after for c in records), default=None),
            )
        )
    return cells


def render_budget(cells: Sequence[BudgetCell]) -> Table:
    """One row per strategy, for each window: failed compactions, those left over their bound,
    and the peak context right after a compaction."""
    from rich.table import Table

    windows = sorted({c.window for c in cells})
    table = Table(
        title="the budget after each compaction",
        caption="failed · over bound · peak tokens after a compaction; the bound is the soft "
        "watermark, or the window when the newest turn with the fixed part is larger",
    )
    table.add_column("strategy")
    for window in windows:
        table.add_column(f"window {window:,}", justify="right")
    for name in dict.fromkeys(c.strategy for c in cells):
        row = [name]
        for window in windows:
            cell = next((c for c in cells if c.strategy == name and c.window == window), None)
            row.append("–" if cell is None else _cell_text(cell))
        table.add_row(*row)
    return table


def _cell_text(cell: BudgetCell) -> str:
    peak = "–" if cell.peak_after is None else f"{cell.peak_after:,}"
    text = f"{cell.failed} · {cell.over} · {peak}"
    return text if cell.holds else f"[bold red]{text}[/]"


def budget_json(cells: Sequence[BudgetCell]) -> list[dict[str, Any]]:
    return [c.as_dict() for c in cells]
