"""The messages a compaction writes: the summary packed with its stats, and the truncation marker.

Kept apart from `compactor` (which searches, verifies and commits) so each stays under 600 lines;
`Compactor` inherits these from `CandidateMaker`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from precis.core.memo import Memo
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message, SummaryMetadata
from precis.core.tokens import TextEstimator, TokenCounter
from precis.core.types import CompactionMode, MadeMode, PlanMode, Trigger
from precis.engine.fallback import Summaries
from precis.engine.masking import MASK_MODE, is_mask_marker, plan_masking
from precis.engine.results import CompactionStats
from precis.engine.settings import CompactionSettings
from precis.engine.truncation import plan_truncation
from precis.engine.work import (
    Candidate,
    Work,
    capped_ledger,
    joined,
    required_facts,
    with_red_lines_of,
)
from precis.facts import missing_from_folded, remember_ledger
from precis.stores.base import MessageIds
from precis.summarize.guard import Fact, Ledger, extract_facts
from precis.summarize.packaging import packed_head, settle_tokens_after, with_stats

__all__ = ["CandidateMaker", "CompactionJob"]


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """What one call asks for; `floor_tokens` is what each request carries besides messages,
    and `summaries` writes its summaries (the summarizer's, or the stand-in's once it failed)."""

    trigger: Trigger
    mode: CompactionMode | None
    summaries: Summaries
    instructions: str | None = None
    floor_tokens: int = 0
    task: str | None = None
    phase: str | None = None
    # A turn's messages, not stored yet: they ride after the context, never summarized or dropped.
    pending: tuple[Message, ...] = ()


class CandidateMaker:
    """Makes the candidates' new messages; the compactor sets these attributes."""

    settings: CompactionSettings
    counter: TokenCounter
    memo: Memo
    _ids: MessageIds
    _clock: Callable[[], str]

    def _ledger(self, evicted: Sequence[Message], job: CompactionJob, work: Work) -> Ledger:
        """The evicted span's facts, after those its earlier summaries carried."""
        span = tuple(evicted)
        entry = work.ledgers.get(tuple(map(id, span)))
        if entry is None:
            facts = extract_facts(span, task=job.task, replay=work.replay, memo=self.memo)
            ledger = capped_ledger(Ledger(tuple(facts)))
            entry = work.ledgers[tuple(map(id, span))] = (span, ledger)
        return entry[1]

    def _packed(
        self,
        mode: PlanMode,
        text: str,
        metadata: SummaryMetadata,
        pinned: Sequence[Message],
        keep: Sequence[Message],
        messages: Sequence[Message],
        before: int,
        job: CompactionJob,
        *,
        summarized: int,
        required: tuple[Fact, ...],
        ledger: Ledger,
        work: Work,
        kept_texts: tuple[str, str],
    ) -> Candidate:
        """The system_alert summary message and the context [pinned, summary, kept]."""
        kept = [*pinned, *keep]
        count_after = len(kept) + 1
        summary_id = self._ids.new()
        now = self._clock()

        def stats_of(tokens_after: int) -> dict[str, Any]:
            return {
                "trigger": job.trigger,
                "context_tokens_before": before,
                "context_tokens_after": tokens_after,
                "messages_count_before": len(messages),
                "messages_count_after": count_after,
            }

        kept_tokens = work.tokens(kept)
        # Only the token count differs between the packings: the summary is encoded once.
        head = packed_head(text, stats_of(kept_tokens), mode, time=now)

        # The stats the summary carries count the summary itself: settle on the fixed point.
        after, settled = settle_tokens_after(self.counter, head, stats_of, kept_tokens)
        stats = CompactionStats(
            trigger=job.trigger,
            mode=mode,
            context_tokens_before=before,
            context_tokens_after=after,
            context_window=self.settings.context_window,
            messages_count_before=len(messages),
            messages_count_after=count_after,
            summarized=summarized,
            fallback=job.summaries.fallback(truncated=False),
            fallback_reason=job.summaries.failure,
            threshold=self.settings.threshold,
            hard_limit=self.settings.hard_limit,
        )
        summary = Message(
            role="user",
            content=with_stats(head, stats_of(after)),
            id=summary_id,
            kind=KIND_SUMMARY,
            created_at=now,
            metadata=SummaryMetadata(**metadata, stats=stats.as_dict()),
        )
        remember_ledger(summary, ledger, self.memo)  # the next compaction reads it, unparsed
        counter = self.counter
        if settled and type(counter) is TextEstimator:
            # Counted above as a reader counts it: the view after and the next check look it up.
            counter.remember(summary, after - kept_tokens)
        pinned_text, keep_text = kept_texts
        context = [*pinned, summary, *keep]
        return Candidate(
            mode,
            summary,
            context,
            stats,
            required,
            ledger,
            lambda: joined(pinned_text, work.folded([summary]), keep_text),
            kept_texts,
        )

    def _truncate(
        self, messages: Sequence[Message], before: int, job: CompactionJob, work: Work
    ) -> Candidate | None:
        """S3's last resort, no model call: drop the oldest, leave a marker with the red lines."""
        budget = self.settings.target
        if budget is None:
            return None
        found: list[str] = []
        plan = plan_truncation(
            messages, counter=self.counter, budget_tokens=budget, floor_tokens=job.floor_tokens
        )
        # The marker carries the dropped span's task and red lines; a bigger marker may drop more.
        for _ in range(3):
            widest = self.settings.effective_clip_chars
            dropped = self._ledger(plan.dropped, job, work)
            required = required_facts(
                with_red_lines_of(dropped, plan.kept, self.memo), job.task is not None, widest
            )
            lines = [
                f.text for f in missing_from_folded(required, work.folded(plan.kept), self.memo)
            ]
            if lines == found:
                break
            found = lines
            plan = plan_truncation(
                messages,
                counter=self.counter,
                budget_tokens=budget,
                floor_tokens=job.floor_tokens,
                red_lines=found,
            )
        ledger = with_red_lines_of(self._ledger(plan.dropped, job, work), plan.kept, self.memo)
        if plan.marker is None or {m.id for m in plan.dropped} & {m.id for m in job.pending}:
            return None  # nothing to drop, or only this turn's own messages
        required = required_facts(ledger, job.task is not None, self.settings.effective_clip_chars)
        made = (messages, before, job, work)
        return self._marked(
            "truncate", plan.marker, plan.kept, ledger, required, len(plan.dropped), *made
        )

    def _masked(
        self,
        messages: Sequence[Message],
        counts: Sequence[int],
        stored: int,
        before: int,
        job: CompactionJob,
        work: Work,
    ) -> Candidate | None:
        """The cheap tier, no model call: old tool outputs masked down to the target, or None
        when masking all it may does not reach it (then a summary is written)."""
        target = self.settings.target
        if target is None:
            return None
        plan = plan_masking(
            messages,
            counts,
            counter=self.counter,
            target_tokens=target,
            floor_tokens=job.floor_tokens,
            stored=stored,
        )
        if plan is None:
            return None
        # The marker carries the facts of the outputs it masks (and of the marker it replaces),
        # as a truncation marker does those of what it drops: a later summary reads them there.
        shown = {m.id: m for m in plan.context}
        span = [
            m
            for m in messages
            if (m.id not in shown and is_mask_marker(m))
            or (shown.get(m.id, m).metadata.get("masked") and not m.metadata.get("masked"))
        ]
        ledger = self._ledger(span, job, work) if span else Ledger(())
        made = (messages, before, job, work)
        return self._marked(MASK_MODE, plan.marker, plan.context, ledger, (), plan.masked, *made)

    def _marked(
        self,
        mode: MadeMode,
        planned: Message,
        kept: Sequence[Message],
        ledger: Ledger,
        required: tuple[Fact, ...],
        summarized: int,
        messages: Sequence[Message],
        before: int,
        job: CompactionJob,
        work: Work,
    ) -> Candidate:
        """The context `kept` with its planned marker made real: a new id, the span's ledger, and
        the stats of the compaction (a truncation, or a masking: no summary was asked for)."""
        truncated = mode == "truncate"
        marker = replace(
            planned,
            id=self._ids.new(),
            created_at=self._clock(),
            metadata={**planned.metadata, "summary": planned.content, "ledger": ledger.to_json()},
        )
        context = [marker if m is planned else m for m in kept]
        stats = CompactionStats(
            trigger=job.trigger,
            mode=mode,
            context_tokens_before=before,
            context_tokens_after=work.tokens(context),
            context_window=self.settings.context_window,
            messages_count_before=len(messages),
            messages_count_after=len(context),
            summarized=summarized,
            fallback=job.summaries.fallback(truncated=True) if truncated else None,
            fallback_reason=job.summaries.failure if truncated else None,
            threshold=self.settings.threshold,
            hard_limit=self.settings.hard_limit,
        )
        marker = replace(marker, metadata={**marker.metadata, "stats": stats.as_dict()})
        context = [marker if m.id == marker.id else m for m in context]
        assert marker.kind == KIND_MARKER
        remember_ledger(marker, ledger, self.memo)
        return Candidate(
            mode, marker, context, stats, required, ledger, lambda: work.folded(context)
        )
