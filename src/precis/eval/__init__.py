"""`precis eval`: replay real conversations under each strategy and measure what survives.

Every compaction system loses things silently; this package shows what survived. `replay` runs
the strategies (`strategies`) over conversations and measures fact retention (`retention`) with
precis's own extractor; `budget` checks the context after every compaction against its bound;
`policy` counts how often each strategy compacts, the room each one frees, its cache cost;
`judging` compacts the points of hand-made fact sets (`factsets`) and scores the text with an
independent matcher (`judge`), optionally asking a model the sets' probe questions; `reference`
is a self-check beside Claude Code's own summaries; `report` and `judge_report` render tables,
JSON and the composition plot.
"""

from __future__ import annotations

from precis.eval.budget import BudgetCell, budget_cells, budget_json, render_budget
from precis.eval.factsets import FactSet, JudgedFact, Point, Probe, load_fact_sets
from precis.eval.judge import KINDS, Tally, keeps, normalise
from precis.eval.judge_report import judge_json, judge_notes, render_judge
from precis.eval.judging import (
    JUDGE_STRATEGIES,
    JudgedRow,
    JudgeReport,
    JudgeRun,
    ProbeResult,
    run_judge,
)
from precis.eval.policy import PolicyCell, policy_cells, policy_json, render_policy
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
    "JUDGE_STRATEGIES",
    "KINDS",
    "KIND_LABELS",
    "REFERENCE_DIR",
    "REFERENCE_MIN_WINDOW",
    "STRATEGIES",
    "STRATEGY_NAMES",
    "BudgetCell",
    "CompactionRecord",
    "EvalReport",
    "FactSet",
    "JudgeReport",
    "JudgeRun",
    "JudgedFact",
    "JudgedRow",
    "Point",
    "PolicyCell",
    "Probe",
    "ProbeResult",
    "ReferenceReport",
    "ReferenceRow",
    "Retention",
    "RunResult",
    "Strategy",
    "StrategySummary",
    "Tally",
    "budget_cells",
    "budget_json",
    "judge_json",
    "judge_notes",
    "keeps",
    "load_conversation",
    "load_fact_sets",
    "normalise",
    "plot_composition",
    "policy_cells",
    "policy_json",
    "reference_json",
    "render_budget",
    "render_judge",
    "render_policy",
    "render_reference",
    "render_table",
    "report_json",
    "run_eval",
    "run_judge",
    "run_reference",
    "strategy",
]
