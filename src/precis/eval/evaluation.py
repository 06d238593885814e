"""`precis eval`: replay real conversations under each strategy and measure what survives.

Every compaction system loses things silently; this module shows what survived. A run replays
one conversation message by message into a fresh in-memory session, compacts when the engine's
triggers fire (or once, at a chosen message), and records validity, tokens, summarizer calls,
time and fact retention: the share of facts from the evicted span still in the new context.
`run_reference` puts precis beside Claude Code's own summaries at Claude Code's compaction point.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from precis.core.errors import CompactionError, InvalidInput, InvalidMessage
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.core.types import CompactionMode, Trigger
from precis.core.validity import check
from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.base import LocalSummarizer, Summarizer, SummaryRequest
from precis.summarize.extractive import MAX_BRIEF_CHARS, ExtractiveSummarizer
from precis.summarize.guard import Fact, context_text, extract_facts, retention

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_WINDOW = 8000
REFERENCE_DIR = "reference_summaries"
# A window so large that the reference run's clip is the only limit on the summary.
REFERENCE_MIN_WINDOW = 1_000_000
# Fact kinds in the guard's priority order; the table abbreviates them to these headers.
KIND_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "constraint": "con",
        "task": "task",
        "pinned": "pin",
        "file_modified": "mod",
        "identifier": "id",
        "error": "err",
        "file_read": "read",
        "request": "req",
    }
)


# --- Strategies -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Strategy:
    """One way to keep a conversation in its window: settings, a mode, or no compaction at all.

    `mode=None` lets the engine choose (sliding window, falling back to all-mode, then
    truncation); `compacts=False` only changes the view (observation masking) and never compacts.
    """

    name: str
    description: str
    configure: Callable[[CompactionSettings], CompactionSettings]
    mode: CompactionMode | None = None
    compacts: bool = True


def _letta(s: CompactionSettings) -> CompactionSettings:
    return replace(s, summary_style="letta", reserved_tokens=0, reserve_floor=False, guard=False)


def _letta_guard(s: CompactionSettings) -> CompactionSettings:
    return replace(_letta(s), guard=True)


def _brief(s: CompactionSettings) -> CompactionSettings:
    return replace(s, summary_style="brief", guard=False)


def _brief_guard(s: CompactionSettings) -> CompactionSettings:
    return replace(s, summary_style="brief", guard=True)


def _all(s: CompactionSettings) -> CompactionSettings:
    return replace(s, summary_style="letta", guard=False)


def _masking(s: CompactionSettings) -> CompactionSettings:
    return replace(s, mask_after_turns=2, guard=False)


def _truncation(s: CompactionSettings) -> CompactionSettings:
    return replace(s, guard=False)


STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {
        s.name: s
        for s in (
            Strategy("letta", "letta's sliding window and planner, letta-style summary", _letta),
            Strategy("all", "summarize everything but pinned items (all-mode)", _all, "all"),
            Strategy("extractive", "sliding window, extractive task brief", _brief),
            Strategy("extractive+guard", "extractive brief with the fact guard", _brief_guard),
            Strategy("letta+guard", "letta's sliding window with the fact guard", _letta_guard),
            Strategy(
                "masking",
                "observation masking only (2 turns), no compaction",
                _masking,
                compacts=False,
            ),
            Strategy("truncation", "drop the oldest messages, no summary", _truncation, "truncate"),
        )
    }
)
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)


def strategy(name: str) -> Strategy:
    """The strategy of that name, or an InvalidInput listing the known ones (for the CLI)."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise InvalidInput(
            f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}"
        ) from None


# --- Fact retention -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Retention:
    """Facts found and facts kept, per kind: counts, so runs and sessions pool exactly."""

    total: Mapping[str, int] = field(default_factory=dict)
    retained: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Retention) -> Retention:
        total = Counter(self.total)
        total.update(other.total)
        retained = Counter(self.retained)
        retained.update(other.retained)
        return Retention(dict(total), dict(retained))

    @property
    def facts(self) -> int:
        return sum(self.total.values())

    @property
    def kept(self) -> int:
        return sum(self.retained.values())

    def share(self, kind: str) -> float | None:
        """Share of that kind's facts kept; None when the span had none."""
        n = self.total.get(kind, 0)
        return self.retained.get(kind, 0) / n if n else None

    @property
    def overall(self) -> float | None:
        """Pooled share over every fact; None when there were none."""
        return self.kept / self.facts if self.facts else None

    def as_dict(self) -> dict[str, Any]:
        kinds = _ordered_kinds(self.total)
        return {
            "overall": self.overall,
            "facts": self.facts,
            "retained": self.kept,
            "by_kind": {
                k: {
                    "facts": self.total[k],
                    "retained": self.retained.get(k, 0),
                    "share": self.share(k),
                }
                for k in kinds
            },
        }


def _ordered_kinds(kinds: Iterable[str]) -> list[str]:
    """Known kinds in the guard's priority order, then any new ones alphabetically."""
    present = set(kinds)
    known = [k for k in KIND_LABELS if k in present]
    return known + sorted(present - set(KIND_LABELS))


def _retention(facts: Sequence[Fact], text: str) -> Retention:
    """Count, per kind, the facts `precis.summarize.guard.retention` finds in the text."""
    by_kind: dict[str, list[Fact]] = {}
    for fact in facts:
        by_kind.setdefault(fact.kind, []).append(fact)
    total: dict[str, int] = {}
    kept: dict[str, int] = {}
    for kind, group in by_kind.items():
        shares = retention(group, text)
        share = shares.get(kind, shares.get("overall", 0.0))
        total[kind] = len(group)
        kept[kind] = round(share * len(group))
    return Retention(total, kept)


def _extract(messages: Sequence[Message], task: str | None = None) -> list[Fact]:

    return extract_facts(messages, task=task)


# --- Loading ------------------------------------------------------------------------------------


def load_conversation(path: Path) -> list[dict[str, Any]]:
    """A shared trajectory (JSON lines, flat tool calls) as OpenAI message dicts."""
    out: list[dict[str, Any]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}:{n}: not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise InvalidInput(f"{path}:{n}: expected a JSON object per line")
        calls = row.get("tool_calls")
        if calls:
            row["tool_calls"] = [
                c
                if "function" in c
                else {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c.get("arguments", "{}")},
                }
                for c in calls
            ]
        out.append(row)
    return out


# --- Replay -------------------------------------------------------------------------------------


class _CountingSummarizer(LocalSummarizer):
    """Counts the calls a strategy makes, since model calls are what compaction costs."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        return self.inner.summarize(request)


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """One compaction during a replay: where, why, cost, and what it kept of the evicted span."""

    index: int  # the message (index into the file) after which it ran
    trigger: str
    mode: str
    tokens_before: int
    tokens_after: int
    seconds: float
    evicted: int
    violations: int
    retention: Retention

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "trigger": self.trigger,
            "mode": self.mode,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "seconds": self.seconds,
            "evicted": self.evicted,
            "violations": self.violations,
            "retention": self.retention.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class RunResult:
    """One conversation replayed under one strategy.

    `tokens[i]` is the context's size right after message i was appended (before any compaction
    it triggered); `retention` pools every compaction's evicted span (for masking: the outputs
    the view hides at the end).
    """

    conversation: str
    strategy: str
    messages: int
    tokens: tuple[int, ...]
    compactions: tuple[CompactionRecord, ...]
    summarizer_calls: int
    final_violations: int
    retention: Retention
    errors: tuple[str, ...] = ()

    @property
    def violations(self) -> int:
        return sum(c.violations for c in self.compactions) + self.final_violations

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.compactions)

    @property
    def peak_tokens(self) -> int:
        return max(self.tokens, default=0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "strategy": self.strategy,
            "messages": self.messages,
            "compactions": [c.as_dict() for c in self.compactions],
            "violations": self.violations,
            "final_violations": self.final_violations,
            "summarizer_calls": self.summarizer_calls,
            "seconds": self.seconds,
            "peak_tokens": self.peak_tokens,
            "tokens": list(self.tokens),
            "retention": self.retention.as_dict(),
            "errors": list(self.errors),
        }


@dataclass(frozen=True, slots=True)
class StrategySummary:
    """One strategy pooled over every conversation of a report."""

    strategy: str
    conversations: int
    compactions: int
    violations: int
    tokens_before: float | None  # mean over compactions
    tokens_after: float | None
    peak_tokens: int
    summarizer_calls: int
    seconds: float
    retention: Retention
    errors: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "conversations": self.conversations,
            "compactions": self.compactions,
            "violations": self.violations,
            "tokens_before_mean": self.tokens_before,
            "tokens_after_mean": self.tokens_after,
            "peak_tokens": self.peak_tokens,
            "summarizer_calls": self.summarizer_calls,
            "seconds": self.seconds,
            "retention": self.retention.as_dict(),
            "errors": self.errors,
        }


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Every run of `run_eval`, in conversation-then-strategy order."""

    window: int
    at: int | None
    strategies: tuple[str, ...]
    runs: tuple[RunResult, ...]

    @property
    def conversations(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.conversation for r in self.runs))

    def overall(self, name: str) -> StrategySummary:
        """Pool one strategy's runs: sums, means over compactions, pooled retention."""
        runs = [r for r in self.runs if r.strategy == name]
        records = [c for r in runs for c in r.compactions]
        return StrategySummary(
            strategy=name,
            conversations=len(runs),
            compactions=len(records),
            violations=sum(r.violations for r in runs),
            tokens_before=_mean(c.tokens_before for c in records),
            tokens_after=_mean(c.tokens_after for c in records),
            peak_tokens=max((r.peak_tokens for r in runs), default=0),
            summarizer_calls=sum(r.summarizer_calls for r in runs),
            seconds=sum(r.seconds for r in runs),
            retention=sum((r.retention for r in runs), Retention()),
            errors=sum(len(r.errors) for r in runs),
        )


def _mean(values: Iterable[int]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def _original(evicted: Sequence[Message]) -> list[Message]:
    """The evicted conversation messages, without earlier summaries: their facts were measured
    when they were made, and a guard's carried ledger would give guarded strategies more facts."""
    return [m for m in evicted if m.kind not in (KIND_SUMMARY, KIND_MARKER)]


def _compaction_point(items: Sequence[Mapping[str, Any]], at: int) -> int | None:
    """Index of the message after which `at=K` compacts: K-1, moved past the tool results
    answering it, since an agent only compacts before a model call."""
    if at < 1 or at > len(items):
        return None
    index = at - 1
    while index + 1 < len(items) and items[index + 1].get("role") == "tool":
        index += 1
    return index


class _Replay:
    """The mutable state of one replay, kept out of the frozen result until it is done."""

    def __init__(self, name: str, items: Sequence[Mapping[str, Any]], plan: Strategy, window: int):
        self.name = name
        self.items = items
        self.plan = plan
        self.summarizer = _CountingSummarizer(ExtractiveSummarizer())
        settings = plan.configure(CompactionSettings(context_window=window))
        self.session = Session(MemoryStore(), name, None, self.summarizer, settings)
        self.tokens: list[int] = []
        self.records: list[CompactionRecord] = []
        self.errors: list[str] = []

    def run(self, at: int | None) -> RunResult:
        point = _compaction_point(self.items, at) if at is not None else None
        for i, item in enumerate(self.items):
            if i == 0 and item.get("role") == "system" and isinstance(item.get("content"), str):
                self.session.set_system_prompt(item["content"])
            else:
                try:
                    self.session.append(item)
                except InvalidMessage as exc:
                    self.errors.append(f"message {i}: {exc}")
            self.tokens.append(self.session.tokens())
            if not self.plan.compacts:
                continue
            if at is not None:
                if i == point:
                    self._compact(i, self.plan.mode, "manual")
            elif i + 1 == len(self.items) or self.items[i + 1].get("role") != "tool":
                self._when_due(i)
        view = self.session.view()
        retention = sum((c.retention for c in self.records), Retention())
        if not self.plan.compacts:
            retention = self._masked_retention(view)
        return RunResult(
            conversation=self.name,
            strategy=self.plan.name,
            messages=len(self.items),
            tokens=tuple(self.tokens),
            compactions=tuple(self.records),
            summarizer_calls=self.summarizer.calls,
            final_violations=len(check(view)),
            retention=retention,
            errors=tuple(self.errors),
        )

    def _when_due(self, index: int) -> None:
        """`Session.maybe_compact`'s rule, with the strategy's mode for the summarizing step."""
        s = self.session.settings
        hard = s.hard_limit
        if hard is not None and self.session.tokens() > hard:
            self._compact(index, "truncate", "hard_watermark")
        if self.session.needs_compaction():
            self._compact(index, self.plan.mode, "context_window_limit")
        elif s.turn_limit is not None and self.session.turns_since_compaction() >= s.turn_limit:
            self._compact(index, self.plan.mode, "turn_limit")

    def _compact(self, index: int, mode: CompactionMode | None, trigger: Trigger) -> None:
        before = self.session.context()
        tokens_before = self.session.tokens()
        start = time.perf_counter()
        try:
            stats = self.session.compact(mode, trigger=trigger)
        except CompactionError as exc:
            self.errors.append(f"message {index}: {exc}")
            return
        seconds = time.perf_counter() - start
        view = self.session.view()
        after = {m.id for m in self.session.context()}
        evicted = [m for m in before if m.id not in after]
        self.records.append(
            CompactionRecord(
                index=index,
                trigger=trigger,
                mode=stats.mode,
                tokens_before=tokens_before,
                tokens_after=self.session.tokens(),
                seconds=seconds,
                evicted=len(evicted),
                violations=len(check(view)),
                retention=_retention(_extract(_original(evicted)), context_text(view)),
            )
        )

    def _masked_retention(self, view: Sequence[Message]) -> Retention:
        """What masking hides is the outputs it replaced with a note: their facts vs the view."""
        originals = {m.id: m for m in self.session.context()}
        hidden = [originals[m.id] for m in view if m.metadata.get("masked") and m.id in originals]
        return _retention(_extract(hidden), context_text(view))


def run_eval(
    paths: Sequence[Path],
    *,
    strategies: Sequence[str] = STRATEGY_NAMES,
    window: int = DEFAULT_WINDOW,
    at: int | None = None,
) -> EvalReport:
    """Replay each conversation under each strategy; compact when due, or once after `at` messages.

    "When due" is `maybe_compact`'s rule (hard watermark truncates, the threshold summarizes),
    consulted before each model call: after every message not followed by a tool result.
    """
    plans = [strategy(name) for name in strategies]
    if window < 1:
        raise ValueError(f"window must be positive, got {window}")
    if at is not None and at < 1:
        raise ValueError(f"at must be a positive message count, got {at}")
    runs: list[RunResult] = []
    for path in paths:
        items = load_conversation(path)
        for plan in plans:
            runs.append(_Replay(path.stem, items, plan, window).run(at))
    return EvalReport(window, at, tuple(p.name for p in plans), tuple(runs))


# --- The anchor: Claude Code's own summaries ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    """One Claude Code compaction beside precis's at the same point and the same size."""

    conversation: str
    message_index: int
    pre_tokens: int
    reference_chars: int  # Claude Code's summary
    precis_chars: int  # precis's summary text (the clip's subject)
    precis_context_chars: int  # everything precis's context holds after compacting
    mode: str
    facts: int
    reference: Retention
    precis: Retention
    violations: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "message_index": self.message_index,
            "pre_tokens": self.pre_tokens,
            "reference_chars": self.reference_chars,
            "precis_chars": self.precis_chars,
            "precis_context_chars": self.precis_context_chars,
            "mode": self.mode,
            "facts": self.facts,
            "reference": self.reference.as_dict(),
            "precis": self.precis.as_dict(),
            "violations": self.violations,
        }


@dataclass(frozen=True, slots=True)
class ReferenceReport:
    """Every reference compaction; overall figures pool the facts of all sessions."""

    rows: tuple[ReferenceRow, ...]

    @property
    def reference(self) -> Retention:
        return sum((r.reference for r in self.rows), Retention())

    @property
    def precis(self) -> Retention:
        return sum((r.precis for r in self.rows), Retention())


def _reference_entries(trajectories_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(conversation file, compaction) for every reference summary whose conversation exists."""
    out: list[tuple[Path, dict[str, Any]]] = []
    for ref in sorted((trajectories_dir / REFERENCE_DIR).glob("*.json")):
        data = json.loads(ref.read_text(encoding="utf-8"))
        name = str(data.get("conversation") or ref.stem) if isinstance(data, dict) else ref.stem
        conversation = trajectories_dir / f"{name}.jsonl"
        if not conversation.is_file():
            continue
        # Two shapes: {conversation, compactions: [...]} or one compaction at the top level.
        compactions = data.get("compactions", [data]) if isinstance(data, dict) else data
        out.extend((conversation, dict(c)) for c in compactions)
    return out


def _reference_row(path: Path, entry: Mapping[str, Any]) -> ReferenceRow:
    items = load_conversation(path)
    index = int(entry["message_index"])
    summary = str(entry["summary"])
    prefix = items[:index]
    clip = len(summary)
    settings = CompactionSettings(
        context_window=max(REFERENCE_MIN_WINDOW, clip),
        clip_chars=clip,
        summary_style="brief",
        guard=True,
    )
    summarizer = ExtractiveSummarizer(max_chars=max(MAX_BRIEF_CHARS, clip))
    session = Session(MemoryStore(), path.stem, None, summarizer, settings)
    head = prefix[:1]
    if head and head[0].get("role") == "system" and isinstance(head[0].get("content"), str):
        session.set_system_prompt(head[0]["content"])
        prefix = prefix[1:]
    session.append(*prefix)
    # Facts of the prefix as it was written: the task pin is precis's, not the conversation's.
    span = [Message.from_openai(item, index=i) for i, item in enumerate(prefix)]
    result = session.compact_result("all")
    view = session.view()
    facts = _extract(span)
    text = str(result.summary.metadata.get("summary", result.summary.content))
    return ReferenceRow(
        conversation=path.stem,
        message_index=index,
        pre_tokens=int(entry.get("pre_tokens", 0)),
        reference_chars=len(summary),
        precis_chars=len(text),
        precis_context_chars=len(context_text(view)),
        mode=result.stats.mode,
        facts=len(facts),
        reference=_retention(facts, summary),
        precis=_retention(facts, context_text(view)),
        violations=len(check(view)),
    )


def run_reference(trajectories_dir: Path) -> ReferenceReport:
    """Compact each Claude Code session where Claude Code did, capped at its summary's size.

    All-mode, extractive brief with the guard; facts come from the whole compacted prefix and
    are looked for in precis's new context and in Claude Code's summary with the same extractor.
    """

    return ReferenceReport(
        tuple(_reference_row(p, e) for p, e in _reference_entries(trajectories_dir))
    )


# --- Output -------------------------------------------------------------------------------------


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _tokens(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _kinds_of(retentions: Iterable[Retention]) -> list[str]:
    return _ordered_kinds(k for r in retentions for k in r.total)


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
        overall = f"{_share(r.overall)} ({r.kept}/{r.facts})"
        return [overall, *(_share(r.share(k)) for k in kinds)]

    for run in report.runs:
        records = run.compactions
        table.add_row(
            run.conversation,
            run.strategy,
            str(len(records)),
            str(run.violations),
            _tokens(_mean(c.tokens_before for c in records)),
            _tokens(_mean(c.tokens_after for c in records)),
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


def plot_sawtooth(report: EvalReport, out: Path) -> Path:
    """Tokens in context per message for each strategy of the first conversation: the sawtooth."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not report.runs:
        raise ValueError("the report has no runs to plot")
    first = report.runs[0].conversation
    figure = Figure(figsize=(11, 5.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    runs = [r for r in report.runs if r.conversation == first]
    # Strategies that never compact (masking) would flatten the sawtooth: clip them, say so.
    compacting = [r.peak_tokens for r in runs if r.compactions]
    top = max([report.window * 1.5, *compacting]) * 1.05
    for run in runs:
        xs: list[float] = []
        ys: list[float] = []
        drops = {c.index: c for c in run.compactions}
        after: dict[int, int] = {}
        for c in run.compactions:
            after[c.index] = c.tokens_after  # several at one message: the last one counts
        for i, tokens in enumerate(run.tokens):
            xs.append(i)
            ys.append(tokens)
            if i in after:
                xs.append(i)
                ys.append(after[i])
        label = f"{run.strategy} ({len(run.compactions)})"
        if run.peak_tokens > top:
            label += f", off the chart: peak {run.peak_tokens:,}"
        (line,) = axes.plot(xs, ys, label=label, lw=1.2)
        axes.scatter(
            list(drops),
            [after[i] for i in drops],
            marker="v",
            s=22,
            color=line.get_color(),
            zorder=3,
        )
    axes.axhline(report.window, color="black", ls="--", lw=0.8, label=f"window {report.window}")
    axes.set_ylim(0, top)
    axes.set_xlabel("message")
    axes.set_ylabel("tokens in context")
    axes.set_title(f"{first}: tokens in context (▼ compaction, count in legend)")
    axes.legend(fontsize="small")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(str(out), format="png", dpi=110)
    return out


def render_reference(ref: ReferenceReport) -> Table:
    """precis beside Claude Code's summary: retention per session and pooled, and both sizes."""
    from rich.table import Table

    kinds = _kinds_of([*(r.reference for r in ref.rows), *(r.precis for r in ref.rows)])
    table = Table(title="precis vs Claude Code's compaction (same point, same size)")
    table.add_column("session", overflow="fold")
    for header in ("messages", "facts", "CC chars", "precis chars", "CC kept", "precis kept"):
        table.add_column(header, justify="right")
    for kind in kinds:
        table.add_column(f"{KIND_LABELS.get(kind, kind)} CC/precis", justify="right")

    def cells(reference: Retention, precis: Retention) -> list[str]:
        return [
            f"{_share(reference.overall)} ({reference.kept})",
            f"{_share(precis.overall)} ({precis.kept})",
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
    """The reference comparison as plain data for `--json`."""
    return {
        "rows": [r.as_dict() for r in ref.rows],
        "overall": {"reference": ref.reference.as_dict(), "precis": ref.precis.as_dict()},
    }
