"""`precis eval --facts`'s output: the judged retention as a rich table and as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from precis.eval.judge import KIND_HEADERS, Tally, ordered_kinds
from precis.eval.judging import JudgedRow, JudgeReport

if TYPE_CHECKING:
    from rich.table import Table


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _kind_cell(tally: Tally, kind: str) -> str:
    n = tally.total.get(kind, 0)
    return "–" if not n else f"{tally.kept.get(kind, 0)}/{n}"


def _probe_cell(correct: int, asked: int) -> str:
    return "–" if not asked else f"{correct}/{asked}"


def render_judge(report: JudgeReport) -> Table:
    """One row per point and strategy, then each strategy pooled over every point."""
    from rich.table import Table

    kinds = ordered_kinds(r.tally for r in report.rows)
    table = Table(title="facts kept, judged by the hand-made fact sets (kept/facts per kind)")
    table.add_column("conversation @ message", overflow="fold")
    table.add_column("strategy")
    table.add_column("chars / budget", justify="right")
    table.add_column("kept", justify="right")
    for kind in kinds:
        table.add_column(KIND_HEADERS.get(kind, kind), justify="right")
    if report.probed:
        table.add_column("probes", justify="right")

    def cells(tally: Tally) -> list[str]:
        overall = f"{_share(tally.overall)} ({tally.kept_count}/{tally.facts})"
        return [overall, *(_kind_cell(tally, k) for k in kinds)]

    for row in report.rows:
        size = f"{row.chars:,} / {row.budget_chars:,}" + (" !" if row.note else "")
        extra = [_probe_cell(row.probes_correct, len(row.probes))] if report.probed else []
        table.add_row(
            f"{row.conversation} @ {row.message_index}",
            row.strategy,
            size,
            *cells(row.tally),
            *extra,
        )
    table.add_section()
    for name in report.ran:
        rows = report.rows_of(name)
        chars = sum(r.chars for r in rows)
        budget = sum(r.budget_chars for r in rows)
        extra = [_probe_cell(*report.probe_score(name))] if report.probed else []
        table.add_row(
            f"all ({len(rows)} points)",
            name,
            f"{chars:,} / {budget:,}",
            *cells(report.pooled(name)),
            *extra,
            style="bold",
        )
    return table


def judge_notes(report: JudgeReport) -> list[str]:
    """A line per row whose text was off (over its budget, nothing compacted)."""
    return [f"{_where(r)}: {r.note}" for r in report.rows if r.note]


def _where(row: JudgedRow) -> str:
    return f"{row.conversation} @ {row.message_index} ({row.strategy})"


def judge_json(report: JudgeReport) -> dict[str, Any]:
    """The judged retention as plain data: every row, and each strategy pooled."""
    overall: dict[str, Any] = {}
    for name in report.ran:
        pooled: dict[str, Any] = {"points": len(report.rows_of(name))}
        pooled["retention"] = report.pooled(name).as_dict()
        if report.probed:
            correct, asked = report.probe_score(name)
            pooled["probes"] = {"asked": asked, "correct": correct}
        overall[name] = pooled
    return {
        "judge": "hand-made fact sets",
        "strategies": list(report.ran),
        "rows": [r.as_dict() for r in report.rows],
        "overall": overall,
    }
