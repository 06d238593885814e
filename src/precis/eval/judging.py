"""`precis eval --facts`: compact each fact set's points with each strategy, judge what is kept.

At a point, messages [0:message_index] are compacted into at most `budget_chars` characters of
text a successor would read in their place (for precis's strategies: what the compaction put in
the context, pinned task and summary, with the kept newest turn shown head+tail beside it), and
that text is judged against the point's facts
(`precis.eval.judge`) after the conversation's system prompt, which every strategy leaves in
place (it is never summarized, and its size is not counted against the budget). Strategies:
precis's extractive brief with the guard on and off, an LLM summarizer when a provider is
given, plain truncation (the newest characters of the transcript) and Claude Code's own summary
where it compacted at that point. With `probes`, a model answers each probe question from the
system prompt and that text alone, and exact answers are counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precis.core.errors import CompactionError, ContextOverflow, InvalidInput, InvalidMessage
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.engine.settings import CompactionSettings
from precis.engine.views import fit_turns
from precis.eval.factsets import FactSet, Point, Probe
from precis.eval.judge import Tally, answered, keeps, normalise
from precis.eval.replay import load_conversation
from precis.providers.base import ChatProvider
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.base import Summarizer
from precis.summarize.extractive import MAX_BRIEF_CHARS, ExtractiveSummarizer

# A window so large that only the clip bounds what the compaction writes.
JUDGE_WINDOW = 1_000_000
# The smallest clip a summary is asked for, however much the kept messages take.
MIN_CLIP_CHARS = 200
# The kept newest turn takes at most this fraction of the budget (a quarter), shown head+tail.
TURN_SHARE = 4
# Strategies in the order tables show them; `llm` needs a provider, `reference` a summary there.
JUDGE_STRATEGIES: tuple[str, ...] = ("brief+guard", "brief", "llm", "truncation", "reference")
REFERENCE_DIR = "reference_summaries"
PROBE_PROMPT = (
    "Below are notes on a piece of work, the only record you have of it. Answer the question "
    "from them alone. Reply with the answer only: a name, number, path, hash or short phrase.\n\n"
    "Notes:\n{notes}\n\nQuestion: {question}"
)
PROBE_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One probe asked with one strategy's text: the model's reply and whether it is right."""

    question: str
    reply: str
    correct: bool
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "question": self.question,
            "reply": self.reply,
            "correct": self.correct,
        }
        if self.error:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class JudgedRow:
    """One strategy at one point: the text's size, the facts it kept, the probes it answered."""

    conversation: str
    message_index: int
    budget_chars: int
    strategy: str
    chars: int
    tally: Tally
    missed: tuple[str, ...]
    probes: tuple[ProbeResult, ...] = ()
    note: str = ""

    @property
    def probes_correct(self) -> int:
        return sum(p.correct for p in self.probes)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "conversation": self.conversation,
            "message_index": self.message_index,
            "budget_chars": self.budget_chars,
            "strategy": self.strategy,
            "chars": self.chars,
            "retention": self.tally.as_dict(),
            "missed": list(self.missed),
        }
        if self.probes:
            out["probes"] = {
                "asked": len(self.probes),
                "correct": self.probes_correct,
                "answers": [p.as_dict() for p in self.probes],
            }
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True, slots=True)
class JudgeReport:
    """Every judged row, point by point; pooled figures sum the facts of every point."""

    strategies: tuple[str, ...]
    rows: tuple[JudgedRow, ...]
    probed: bool = False

    def rows_of(self, strategy: str) -> list[JudgedRow]:
        return [r for r in self.rows if r.strategy == strategy]

    def pooled(self, strategy: str) -> Tally:
        return sum((r.tally for r in self.rows_of(strategy)), Tally())

    def probe_score(self, strategy: str) -> tuple[int, int]:
        """(correct, asked) over every point the strategy ran at."""
        rows = self.rows_of(strategy)
        return sum(r.probes_correct for r in rows), sum(len(r.probes) for r in rows)

    @property
    def ran(self) -> tuple[str, ...]:
        """The strategies that produced at least one row."""
        return tuple(s for s in self.strategies if self.rows_of(s))


@dataclass(frozen=True, slots=True)
class _Text:
    """What a strategy put in place of the prefix, and a note when something was off."""

    text: str
    note: str = ""
    # What counts against the budget: the whole text, or for a compaction pinned + summary.
    size: int | None = None

    @property
    def chars(self) -> int:
        return len(self.text) if self.size is None else self.size


def render(messages: Sequence[Message]) -> str:
    """What a successor reads of a context: each message's text (a summary's or marker's own
    words, not its JSON wrapper) and tool calls, separated by blank lines."""
    parts: list[str] = []
    for m in messages:
        raw = m.metadata.get("summary")
        if m.kind in (KIND_SUMMARY, KIND_MARKER) and isinstance(raw, str):
            parts.append(raw)
            continue
        calls = ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        parts.append(" -> ".join(p for p in (m.content, calls) if p))
    return "\n\n".join(p for p in parts if p)


def transcript(items: Sequence[Mapping[str, Any]]) -> str:
    """A prefix as plain text, one `[role] text` block per message, tool calls after `->`."""
    blocks: list[str] = []
    for item in items:
        content = item.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        calls = ", ".join(
            f"{c['function']['name']}({c['function'].get('arguments', '')})"
            for c in item.get("tool_calls") or ()
        )
        blocks.append(f"[{item.get('role')}] " + " -> ".join(p for p in (text, calls) if p))
    return "\n\n".join(blocks)


def truncated(items: Sequence[Mapping[str, Any]], budget: int) -> _Text:
    """Plain truncation at the same size: the newest `budget` characters of the transcript."""
    text = transcript(items)
    return _Text(text[-budget:] if len(text) > budget else text)


def _compacted_once(
    items: Sequence[Mapping[str, Any]],
    summarizer: Summarizer,
    budget: int,
    *,
    guard: bool,
    pin_task: bool,
) -> tuple[str, int, bool]:
    """(what a successor reads after an all-mode compaction at a clip of `budget`, the size of
    what the compaction put there — pinned task and summary —, compacted?)."""
    settings = CompactionSettings(
        context_window=JUDGE_WINDOW,
        clip_chars=budget,
        guard=guard,
        pin_task=pin_task,
    )
    session = Session(MemoryStore(), "judged", None, summarizer, settings)
    rest = list(items)
    if system_prompt(rest):
        session.set_system_prompt(system_prompt(rest))
        rest = rest[1:]
    for item in rest:
        try:
            session.append(item)
        except InvalidMessage:
            continue  # the recording's own damage (a final call with no result): skip it
    result = session.compact_result("all")
    summary = result.summary.metadata.get("summary") if result.summary is not None else None
    text = summary if isinstance(summary, str) else ""
    # The kept newest turn as a view in a window of this size would show it: head+tail.
    view = fit_turns(
        session.view(),
        budget_tokens=max(MIN_CLIP_CHARS, budget // TURN_SHARE),
        count=_chars,
        head_lines=settings.tool_output_head_lines,
        tail_lines=settings.tool_output_tail_lines,
    )
    size = len(text) + sum(_chars(m) for m in view if m.pinned)
    return render(view), size, result.compacted


def _chars(message: Message) -> int:
    """A message's size as `render` shows it, give or take the separators."""
    return len(message.content) + sum(
        len(c.name) + len(c.arguments) + 2 for c in message.tool_calls
    )


def compacted(
    items: Sequence[Mapping[str, Any]],
    budget: int,
    summarizer: Summarizer,
    guard: bool,
) -> _Text:
    """precis's all-mode compaction of the prefix at a clip of the budget, which bounds what
    the compaction puts in the context: the pinned task and the summary. When the task alone
    leaves the summary too little room, the task is not pinned (the summary then carries it,
    within the clip). The kept newest turn is read, shown head+tail within a quarter of the
    budget. A compaction precis refuses leaves an empty text (nothing kept) and says why."""
    notes: list[str] = []
    try:
        text, size, done = _compacted_once(items, summarizer, budget, guard=guard, pin_task=True)
    except CompactionError as exc:
        return _Text("", f"compaction failed: {exc}")
    if done and size > budget:
        try:
            unpinned = _compacted_once(items, summarizer, budget, guard=guard, pin_task=False)
        except CompactionError as exc:
            notes.append(f"with the task not pinned the compaction failed: {exc}")
        else:
            if unpinned[1] < size:
                text, size, done = unpinned
                notes.append("task not pinned: with it pinned the text was over the budget")
    if not done:
        notes.append("nothing could be compacted")
    if size > budget:
        notes.append(f"over budget: {size} > {budget} chars")
    return _Text(text, "; ".join(notes), size)


def reference_summary(trajectories: Path, conversation: str, index: int) -> str | None:
    """Claude Code's summary of exactly this prefix, when it compacted there."""
    path = trajectories / REFERENCE_DIR / f"{conversation}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    entries = data.get("compactions", [data]) if isinstance(data, dict) else data
    for entry in entries:
        if isinstance(entry, dict) and entry.get("message_index") == index:
            summary = entry.get("summary")
            return summary if isinstance(summary, str) else None
    return None


def system_prompt(items: Sequence[Mapping[str, Any]]) -> str:
    """The conversation's system prompt: every strategy keeps it in context as it is."""
    if items and items[0].get("role") == "system" and isinstance(items[0].get("content"), str):
        return str(items[0]["content"])
    return ""


def with_system(system: str, text: str) -> str:
    """What a successor reads at a point: the system prompt, then the strategy's text."""
    return f"{system}\n\n{text}" if system else text


def judge_text(point: Point, text: str) -> tuple[Tally, tuple[str, ...]]:
    """The point's facts kept by the text, per kind, and the ids of those it missed."""
    folded = normalise(text)
    total: dict[str, int] = {}
    kept: dict[str, int] = {}
    missed: list[str] = []
    for fact in point.facts:
        total[fact.kind] = total.get(fact.kind, 0) + 1
        if keeps(folded, fact.match):
            kept[fact.kind] = kept.get(fact.kind, 0) + 1
        else:
            missed.append(fact.id)
    return Tally(total, kept), tuple(missed)


def ask_probes(provider: ChatProvider, probes: Sequence[Probe], text: str) -> list[ProbeResult]:
    """Each question asked with only `text` as context; a reply is right when it holds an
    acceptable answer (normalised). A prompt the model cannot take counts as a wrong answer."""
    results: list[ProbeResult] = []
    for probe in probes:
        prompt = PROBE_PROMPT.format(notes=text, question=probe.question)
        try:
            reply = provider.complete(
                [{"role": "user", "content": prompt}], timeout=PROBE_TIMEOUT
            ).text
        except ContextOverflow as exc:
            results.append(ProbeResult(probe.question, "", False, f"context overflow: {exc}"))
            continue
        results.append(ProbeResult(probe.question, reply, answered(reply, probe.answers)))
    return results


@dataclass
class JudgeRun:
    """What `run_judge` needs besides the fact sets: where conversations are, which strategies,
    and the model for `llm` and the probes."""

    trajectories: Path
    strategies: Sequence[str] = JUDGE_STRATEGIES
    provider: ChatProvider | None = None
    probes: bool = False

    def __post_init__(self) -> None:
        unknown = [s for s in self.strategies if s not in JUDGE_STRATEGIES]
        if unknown:
            raise InvalidInput(
                f"unknown strategy {unknown[0]!r} for --facts; choose from "
                + ", ".join(JUDGE_STRATEGIES)
            )
        if self.probes and self.provider is None:
            raise InvalidInput("probes need a model to ask: give a provider")

    def text(
        self, strategy: str, conversation: str, items: Sequence[Mapping[str, Any]], point: Point
    ) -> _Text | None:
        """The strategy's text at the point; None when it does not run there."""
        prefix = items[: point.message_index]
        budget = point.budget_chars
        if strategy == "truncation":
            return truncated(prefix, budget)
        if strategy == "reference":
            found = reference_summary(self.trajectories, conversation, point.message_index)
            return None if found is None else _Text(found)
        if strategy == "llm":
            if self.provider is None:
                return None
            from precis.summarize.llm import LLMSummarizer

            return compacted(prefix, budget, LLMSummarizer(self.provider), True)
        brief = ExtractiveSummarizer(max_chars=max(MAX_BRIEF_CHARS, budget))
        return compacted(prefix, budget, brief, strategy == "brief+guard")


def run_judge(fact_sets: Sequence[FactSet], run: JudgeRun) -> JudgeReport:
    """Every point of every fact set, under every strategy that runs there."""
    rows: list[JudgedRow] = []
    for fact_set in fact_sets:
        path = run.trajectories / f"{fact_set.conversation}.jsonl"
        if not path.is_file():
            raise InvalidInput(
                f"{fact_set.source}: conversation {fact_set.conversation!r} is not in "
                f"{run.trajectories}"
            )
        items = load_conversation(path)
        system = system_prompt(items)
        for i, point in enumerate(fact_set.points):
            if point.message_index > len(items):
                raise InvalidInput(
                    f"{fact_set.source}: points[{i}].message_index: {point.message_index} is "
                    f"past the conversation's {len(items)} messages"
                )
            for strategy in run.strategies:
                made = run.text(strategy, fact_set.conversation, items, point)
                if made is None:
                    continue
                read = with_system(system, made.text)
                tally, missed = judge_text(point, read)
                probes: tuple[ProbeResult, ...] = ()
                if run.probes and run.provider is not None and point.probes:
                    probes = tuple(ask_probes(run.provider, point.probes, read))
                rows.append(
                    JudgedRow(
                        fact_set.conversation,
                        point.message_index,
                        point.budget_chars,
                        strategy,
                        made.chars,
                        tally,
                        missed,
                        probes,
                        made.note,
                    )
                )
    return JudgeReport(tuple(run.strategies), tuple(rows), run.probes)
