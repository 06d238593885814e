"""Replaying a conversation under a strategy: compactions when due, and what each one kept.

A run replays one conversation message by message into a fresh in-memory session, compacts when
the engine's triggers fire (or once, at a chosen message), and records validity, tokens,
summarizer calls, time and fact retention: the share of facts from the evicted span still in the
new context.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precis.core.errors import CompactionError, InvalidInput, InvalidMessage
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.core.planning import call_groups
from precis.core.types import CompactionMode, Trigger
from precis.core.validity import check
from precis.engine.settings import CompactionSettings
from precis.eval.judge import as_data
from precis.eval.retention import Retention, facts_of, measure
from precis.eval.strategies import STRATEGIES, STRATEGY_NAMES, Strategy, strategy
from precis.facts import context_text
from precis.session import Session
from precis.stores.base import CompactionEvent
from precis.stores.memory import MemoryStore
from precis.stores.samples import Sample
from precis.summarize.base import LocalSummarizer, Summarizer, SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer

DEFAULT_WINDOW = 8000


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
    # The most the context may hold after it: the soft watermark, or the window when the newest
    # unsplittable turn with the system prompt, tools and pinned messages is larger than that.
    bound: int | None = None
    # The window, the target a compaction aims at (the low watermark), what the system prompt,
    # tools, pinned messages and the newest turn take as shown (no compaction goes below it), and
    # the prompt's tokens the provider's cache keeps and those it reads afresh.
    window: int | None = None
    target: int | None = None
    least: int | None = None
    cache_kept: int = 0
    rewritten: int = 0

    @property
    def freed(self) -> float | None:
        """The share of the window this compaction freed."""
        if not self.window:
            return None
        return (self.tokens_before - self.tokens_after) / self.window

    @property
    def cramped(self) -> bool:
        """Whether the pinned messages and the newest turn alone (with the system prompt and
        tools) are over the target: then no compaction could free much."""
        return self.least is not None and self.target is not None and self.least > self.target

    @property
    def over(self) -> bool:
        """Whether the context stayed above its bound after this compaction."""
        return self.bound is not None and self.tokens_after > self.bound

    def as_dict(self) -> dict[str, Any]:
        return as_data(
            self,
            "index trigger mode tokens_before tokens_after bound seconds evicted violations "
            "retention window target least freed cache_kept rewritten",
        )


@dataclass(frozen=True, slots=True)
class RunResult:
    """One conversation replayed under one strategy.

    `tokens[i]` is the context's size right after message i was appended (before any compaction
    it triggered); `retention` pools every compaction's evicted span (for masking: the outputs
    the view hides at the end). `samples` and `events` are what the session recorded, for the
    composition chart.
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
    samples: tuple[Sample, ...] = ()
    events: tuple[CompactionEvent, ...] = ()
    failed: int = 0  # compactions that raised (the rest of `errors` are refused messages)
    model_calls: int = 0  # consults: one before each model call the agent made

    @property
    def violations(self) -> int:
        return sum(c.violations for c in self.compactions) + self.final_violations

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.compactions)

    @property
    def peak_tokens(self) -> int:
        return max(self.tokens, default=0)

    @property
    def peak_after(self) -> int | None:
        """The largest context right after a compaction; None when none ran."""
        return max((c.tokens_after for c in self.compactions), default=None)

    @property
    def over(self) -> int:
        """Compactions after which the context stayed above its bound."""
        return sum(c.over for c in self.compactions)

    def as_dict(self) -> dict[str, Any]:
        return as_data(
            self,
            "conversation strategy messages compactions violations final_violations "
            "summarizer_calls seconds peak_tokens peak_after over tokens retention errors failed "
            "model_calls",
        )


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
        return as_data(
            self,
            "strategy conversations compactions violations tokens_before_mean=tokens_before "
            "tokens_after_mean=tokens_after peak_tokens summarizer_calls seconds retention errors",
        )


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
            tokens_before=mean(c.tokens_before for c in records),
            tokens_after=mean(c.tokens_after for c in records),
            peak_tokens=max((r.peak_tokens for r in runs), default=0),
            summarizer_calls=sum(r.summarizer_calls for r in runs),
            seconds=sum(r.seconds for r in runs),
            retention=sum((r.retention for r in runs), Retention()),
            errors=sum(len(r.errors) for r in runs),
        )


def compacting_runs(reports: Sequence[EvalReport]) -> Iterator[tuple[str, int, list[RunResult]]]:
    """Each compacting strategy's runs at each window, strategies in the order they ran
    (masking only changes the view; it has no compaction to judge)."""
    for name in dict.fromkeys(s for r in reports for s in r.strategies):
        if STRATEGIES[name].compacts:
            for report in reports:
                runs = [r for r in report.runs if r.strategy == name]
                if runs:
                    yield name, report.window, runs


def mean(values: Iterable[int]) -> float | None:
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
        self.session = Session(MemoryStore(), "replay", None, self.summarizer, settings)
        self.tokens: list[int] = []
        self.records: list[CompactionRecord] = []
        self.errors: list[str] = []
        self.failures = 0
        self.model_calls = 0

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
                self.model_calls += 1
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
            samples=tuple(self.session.store.samples(self.session.conversation_id)),
            events=tuple(self.session.events()),
            failed=self.failures,
            model_calls=self.model_calls,
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

    def _bound(self, context: Sequence[Message]) -> int | None:
        """The soft watermark; the window when the newest unsplittable turn, as stored, does not
        fit beside the system prompt, tools and pinned messages under it."""
        s = self.session.settings
        threshold, window = s.threshold, s.context_window
        if threshold is None or window is None:
            return None
        groups = call_groups(context)
        newest = [context[i] for i in groups[-1]] if groups else []
        count = self.session.counter.count
        fixed = self.session.floor_tokens() + sum(count(m) for m in context if m.pinned)
        turn = sum(count(m) for m in newest if not m.pinned)
        return window if fixed + turn > threshold else threshold

    def _least(self) -> int:
        """The system prompt, tools, pinned messages and the newest turn, as the view shows
        them: what stays after any compaction."""
        shown = self.session.view()
        groups = call_groups(shown)
        newest = set(groups[-1]) if groups else set()
        count = self.session.counter.count
        kept = (m for i, m in enumerate(shown) if m.pinned or i in newest)
        return self.session.floor_tokens() + sum(count(m) for m in kept)

    def _compact(self, index: int, mode: CompactionMode | None, trigger: Trigger) -> None:
        before = self.session.context()
        tokens_before = self.session.tokens()
        bound = self._bound(before)
        least = self._least()
        start = time.perf_counter()
        try:
            stats = self.session.compact(mode, trigger=trigger)
        except CompactionError as exc:
            self.errors.append(f"message {index}: {exc}")
            self.failures += 1
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
                retention=self._retention(_original(evicted), view),
                bound=bound,
                window=self.session.settings.context_window,
                target=self.session.settings.target,
                least=least,
                cache_kept=stats.cache_kept_tokens,
                rewritten=stats.rewritten_tokens,
            )
        )

    def _masked_retention(self, view: Sequence[Message]) -> Retention:
        """What masking hides is the outputs it replaced with a note: their facts vs the view."""
        originals = {m.id: m for m in self.session.context()}
        hidden = [originals[m.id] for m in view if m.metadata.get("masked") and m.id in originals]
        return self._retention(hidden, view)

    def _retention(self, span: Sequence[Message], view: Sequence[Message]) -> Retention:
        """The facts of `span` the view keeps, read with the session's memo."""
        memo = self.session.memo
        return measure(facts_of(span, memo=memo), context_text(view, memo), memo)


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
        raise InvalidInput(f"window must be positive, got {window}")
    if at is not None and at < 1:
        raise InvalidInput(f"at must be a positive message count, got {at}")
    runs: list[RunResult] = []
    for path in paths:
        items = load_conversation(path)
        for plan in plans:
            runs.append(_Replay(path.stem, items, plan, window).run(at))
    return EvalReport(window, at, tuple(p.name for p in plans), tuple(runs))
