"""The anchor: precis beside Claude Code's own summaries, at Claude Code's compaction point."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precis.core.messages import Message
from precis.core.validity import check
from precis.engine.settings import CompactionSettings
from precis.eval.judge import as_data
from precis.eval.replay import load_conversation
from precis.eval.retention import Retention, facts_of, measure
from precis.facts import context_text
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.extractive import MAX_BRIEF_CHARS, ExtractiveSummarizer

REFERENCE_DIR = "reference_summaries"
# A window so large that the reference run's clip is the only limit on the summary.
REFERENCE_MIN_WINDOW = 1_000_000


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
        return as_data(
            self,
            "conversation message_index pre_tokens reference_chars precis_chars "
            "precis_context_chars mode facts reference precis violations",
        )


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
    session = Session(MemoryStore(), "reference", None, summarizer, settings)
    head = prefix[:1]
    if head and head[0].get("role") == "system" and isinstance(head[0].get("content"), str):
        session.set_system_prompt(head[0]["content"])
        prefix = prefix[1:]
    session.append(*prefix)
    # Facts of the prefix as it was written: the task pin is precis's, not the conversation's.
    span = [Message.from_openai(item, index=i) for i, item in enumerate(prefix)]
    result = session.compact_result("all")
    view = session.view()
    facts = facts_of(span)
    made = result.summary
    text = "" if made is None else str(made.metadata.get("summary", made.content))
    return ReferenceRow(
        conversation=path.stem,
        message_index=index,
        pre_tokens=int(entry.get("pre_tokens", 0)),
        reference_chars=len(summary),
        precis_chars=len(text),
        precis_context_chars=len(context_text(view)),
        mode=result.stats.mode,
        facts=len(facts),
        reference=measure(facts, summary),
        precis=measure(facts, context_text(view)),
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
