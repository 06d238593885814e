"""`precis eval`'s output: the rich tables, the JSON, the composition plot."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precis.eval.judge import ordered_kinds
from precis.eval.reference import ReferenceReport
from precis.eval.replay import EvalReport, mean
from precis.eval.retention import KIND_LABELS, Retention

if TYPE_CHECKING:
    from rich.table import Table


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _tokens(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _kinds_of(retentions: Iterable[Retention]) -> list[str]:
    return ordered_kinds(retentions)


def render_table(report: EvalReport) -> Table:
    """The eval as a rich table: one row per conversation and strategy, then pooled rows."""
    from rich.table import Table

    kinds = _kinds_of(r.retention for r in report.runs)
    where = f"window {report.window}" + (f", once at message {report.at}" if report.at else "")
    table = Table(title=f"precis eval ({where})")
    for header in ("conversation", "strategy"):
        table.add_column(header, overflow="fold")
    for header in ("compactions", "violations", "tokens before", "after", "peak", "calls", "ms"):
        table.add_column(header, justify="right")
    table.add_column("retained", justify="right")
    for kind in kinds:
        table.add_column(KIND_LABELS.get(kind, kind), justify="right")

    def retention_cells(r: Retention) -> list[str]:
        overall = f"{_share(r.overall)} ({r.kept_count}/{r.facts})"
        return [overall, *(_share(r.share(k)) for k in kinds)]

    for run in report.runs:
        records = run.compactions
        table.add_row(
            run.conversation,
            run.strategy,
            str(len(records)),
            str(run.violations),
            _tokens(mean(c.tokens_before for c in records)),
            _tokens(mean(c.tokens_after for c in records)),
            f"{run.peak_tokens:,}",
            str(run.summarizer_calls),
            f"{run.seconds * 1000:.1f}",
            *retention_cells(run.retention),
        )
    table.add_section()
    for name in report.strategies:
        s = report.overall(name)
        table.add_row(
            f"all ({s.conversations})",
            name,
            str(s.compactions),
            str(s.violations),
            _tokens(s.tokens_before),
            _tokens(s.tokens_after),
            f"{s.peak_tokens:,}",
            str(s.summarizer_calls),
            f"{s.seconds * 1000:.1f}",
            *retention_cells(s.retention),
            style="bold",
        )
    return table


def report_json(report: EvalReport) -> dict[str, Any]:
    """The eval as plain data for `--json`: every run in full and each strategy pooled."""
    return {
        "window": report.window,
        "at": report.at,
        "strategies": list(report.strategies),
        "conversations": list(report.conversations),
        "runs": [r.as_dict() for r in report.runs],
        "overall": {name: report.overall(name).as_dict() for name in report.strategies},
    }


def plot_composition(report: EvalReport, out: Path) -> Path:
    """The window's composition per turn under each strategy of the first conversation, one
    chart below the other, as an SVG file: the inspector's chart, drawn by the same code."""
    from precis.charts import chart_data, composition_chart, document

    if not report.runs:
        raise ValueError("the report has no runs to plot")
    first = report.runs[0].conversation
    charts = [
        composition_chart(
            chart_data(run.samples, run.events),
            title=f"{first} · {run.strategy}: {len(run.compactions)} compactions, "
            f"peak {run.peak_tokens:,} tokens",
        )
        for run in report.runs
        if run.conversation == first
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(document(charts), encoding="utf-8")
    return out


def render_reference(ref: ReferenceReport) -> Table:
    """precis beside Claude Code's summary: retention per session and pooled, and both sizes."""
    from rich.table import Table

    kinds = _kinds_of([*(r.reference for r in ref.rows), *(r.precis for r in ref.rows)])
    table = Table(
        title="self-check, not a judge: precis's own fact extractor scores precis and Claude "
        "Code's compaction (same point, same size); judge with --facts"
    )
    table.add_column("session", overflow="fold")
    for header in ("messages", "facts", "CC chars", "precis chars", "CC kept", "precis kept"):
        table.add_column(header, justify="right")
    for kind in kinds:
        table.add_column(f"{KIND_LABELS.get(kind, kind)} CC/precis", justify="right")

    def cells(reference: Retention, precis: Retention) -> list[str]:
        return [
            f"{_share(reference.overall)} ({reference.kept_count})",
            f"{_share(precis.overall)} ({precis.kept_count})",
            *(f"{_share(reference.share(k))}/{_share(precis.share(k))}" for k in kinds),
        ]

    for row in ref.rows:
        table.add_row(
            row.conversation,
            str(row.message_index),
            str(row.facts),
            f"{row.reference_chars:,}",
            f"{row.precis_chars:,}",
            *cells(row.reference, row.precis),
        )
    table.add_section()
    table.add_row(
        "overall (pooled)",
        str(sum(r.message_index for r in ref.rows)),
        str(ref.precis.facts),
        f"{sum(r.reference_chars for r in ref.rows):,}",
        f"{sum(r.precis_chars for r in ref.rows):,}",
        *cells(ref.reference, ref.precis),
        style="bold",
    )
    return table


def reference_json(ref: ReferenceReport) -> dict[str, Any]:
    """The reference comparison as plain data for `--json`, labelled a self-check."""
    return {
        "self_check": "precis's own fact extractor scores both summaries; judge with --facts",
        "rows": [r.as_dict() for r in ref.rows],
        "overall": {"reference": ref.reference.as_dict(), "precis": ref.precis.as_dict()},
    }
