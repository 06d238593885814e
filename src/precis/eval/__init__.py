"""`precis eval`: replay real conversations under each strategy and measure what survives.

Every compaction system loses things silently; this package shows what survived. `replay` runs
the strategies (`strategies`) over conversations and measures fact retention (`retention`);
`reference` puts precis beside Claude Code's own summaries at Claude Code's compaction point;
`report` renders tables, JSON and the composition plot.
"""

from __future__ import annotations

from precis.eval.reference import (
    REFERENCE_DIR,
    REFERENCE_MIN_WINDOW,
    ReferenceReport,
    ReferenceRow,
    run_reference,
)
from precis.eval.replay import (
    DEFAULT_WINDOW,
    CompactionRecord,
    EvalReport,
    RunResult,
    StrategySummary,
    load_conversation,
    run_eval,
)
from precis.eval.report import (
    plot_composition,
    reference_json,
    render_reference,
    render_table,
    report_json,
)
from precis.eval.retention import KIND_LABELS, Retention
from precis.eval.strategies import STRATEGIES, STRATEGY_NAMES, Strategy, strategy

__all__ = [
    "DEFAULT_WINDOW",
    "KIND_LABELS",
    "REFERENCE_DIR",
    "REFERENCE_MIN_WINDOW",
    "STRATEGIES",
    "STRATEGY_NAMES",
    "CompactionRecord",
    "EvalReport",
    "ReferenceReport",
    "ReferenceRow",
    "Retention",
    "RunResult",
    "Strategy",
    "StrategySummary",
    "load_conversation",
    "plot_composition",
    "reference_json",
    "render_reference",
    "render_table",
    "report_json",
    "run_eval",
    "run_reference",
    "strategy",
]
