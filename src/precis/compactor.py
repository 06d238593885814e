"""The compaction engine: snapshot, plan, summarize, verify, then commit at once or not at all."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from precis.errors import CompactionError
from precis.messages import KIND_SUMMARY, Message
from precis.planning import CompactionPlan, PlanningError, plan_all, plan_sliding_window
from precis.policy import CompactionSettings
from precis.stores.base import (
    CompactionEvent,
    ContextSnapshot,
    ConversationStore,
    MessageIds,
    VersionConflict,
    utc_now,
)
from precis.summarize.base import Summarizer, SummaryRequest
from precis.summarize.packaging import clip_summary, package_summary
from precis.tokens import TokenCounter
from precis.validity import check

Trigger = Literal[
    "manual",
    "context_window_limit",
    "context_window_overflow",
    "hard_watermark",
    "turn_limit",
    "phase_complete",
]
Mode = Literal["sliding_window", "all"]


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """What one compaction did, in the figures an operator watches."""

    trigger: str
    mode: str
    context_tokens_before: int
    context_tokens_after: int
    context_window: int | None
    messages_count_before: int
    messages_count_after: int
    summarized: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """The committed outcome: stats, the summary message and the new context."""

    stats: CompactionStats
    summary: Message
    context: list[Message]


@dataclass(frozen=True, slots=True)
class _Candidate:
    plan: CompactionPlan
    summary: Message
    context: list[Message]
    stats: CompactionStats


class Compactor:
    """Runs §6 of the design against one store; stateless between calls."""

    def __init__(
        self,
        store: ConversationStore,
        counter: TokenCounter,
        summarizer: Summarizer,
        settings: CompactionSettings | None = None,
        *,
        clock: Callable[[], str] = utc_now,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.counter = counter
        self.summarizer = summarizer
        self.settings = settings or CompactionSettings()
        self._clock = clock
        self._progress = progress
        self._ids = MessageIds()

    def tokens(self, messages: Sequence[Message]) -> int:
        return sum(self.counter.count(m) for m in messages)

    async def compact(
        self,
        conversation_id: str,
        trigger: Trigger = "manual",
        mode: Mode | None = None,
        *,
        instructions: str | None = None,
        floor_tokens: int = 0,
    ) -> CompactionResult:
        """Compact once; on a concurrent commit re-plan against the winner's context, else raise.

        `floor_tokens` is what each request carries besides the messages (system prompt, tools).
        """
        for attempt in range(self.settings.commit_retries + 1):
            snapshot = self.store.context(conversation_id)
            candidate = await self._candidate(snapshot, trigger, mode, instructions, floor_tokens)
            self._step("verified")
            try:
                committed = self.store.commit_compaction(
                    conversation_id,
                    expected_version=snapshot.version,
                    snapshot_last_seq=snapshot.last_seq,
                    summary=candidate.summary,
                    context_ids=[m.id for m in candidate.context],
                    event=CompactionEvent(
                        trigger=trigger,
                        mode=candidate.plan.mode,
                        stats=candidate.stats.as_dict(),
                        summary_id=candidate.summary.id,
                        at=self._clock(),
                    ),
                )
            except VersionConflict:
                if attempt == self.settings.commit_retries:
                    raise
                continue
            self._step("committed")
            return CompactionResult(candidate.stats, candidate.summary, committed.messages)
        raise AssertionError("unreachable")

    async def _candidate(
        self,
        snapshot: ContextSnapshot,
        trigger: str,
        mode: Mode | None,
        instructions: str | None,
        floor_tokens: int,
    ) -> _Candidate:
        messages = snapshot.messages
        before = self.tokens(messages)
        if mode == "all":
            plans = [plan_all(messages)]
        else:
            try:
                plans = [self._plan_sliding(messages, floor_tokens), plan_all(messages)]
            except PlanningError:
                plans = [plan_all(messages)]
        self._step("planned")
        failures: list[str] = []
        over: _Candidate | None = None
        for i, plan in enumerate(plans):
            if not plan.summarize:
                failures.append(f"{plan.mode}: nothing to summarize")
                continue
            candidate = await self._summarize(plan, messages, before, trigger, instructions)
            problem = self._verify(candidate, messages, before)
            if problem is not None:
                failures.append(f"{plan.mode}: {problem}")
            elif i < len(plans) - 1 and self._over_threshold(candidate, floor_tokens):
                over = candidate  # valid but too big: all-mode may do better, else use it
            else:
                return candidate
        if over is not None:
            return over
        raise CompactionError(
            f"no acceptable compaction of {len(messages)} messages ({before} tokens): "
            + "; ".join(failures)
        )

    def _plan_sliding(self, messages: Sequence[Message], floor_tokens: int) -> CompactionPlan:
        s = self.settings
        return plan_sliding_window(
            messages,
            tokens=self.counter,
            context_window=s.context_window,
            percentage=s.sliding_window_percentage,
            reserved_tokens=s.planner_reserve(floor_tokens),
            user_boundary_fallback=s.user_boundary_fallback,
        )

    def _over_threshold(self, candidate: _Candidate, floor_tokens: int) -> bool:
        threshold = self.settings.threshold
        after = candidate.stats.context_tokens_after + floor_tokens
        return threshold is not None and after > threshold

    async def _summarize(
        self,
        plan: CompactionPlan,
        messages: Sequence[Message],
        before: int,
        trigger: str,
        instructions: str | None,
    ) -> _Candidate:
        clip = self.settings.effective_clip_chars
        request = SummaryRequest(plan.summarize, plan.mode, clip, instructions)
        text = await asyncio.wait_for(
            self.summarizer.summarize(request), timeout=self.settings.summary_timeout
        )
        text = clip_summary(text, clip)
        self._step("summarized")
        kept = [*plan.pinned, *plan.keep]
        count_after = len(kept) + 1
        summary_id = self._ids.new()
        now = self._clock()

        def packed(tokens_after: int) -> Message:
            stats = {
                "trigger": trigger,
                "context_tokens_before": before,
                "context_tokens_after": tokens_after,
                "messages_count_before": len(messages),
                "messages_count_after": count_after,
            }
            return Message(
                role="user",
                content=package_summary(text, stats, plan.mode, time=now),
                id=summary_id,
                kind=KIND_SUMMARY,
                created_at=now,
                metadata={"summary": text, "mode": plan.mode, "summarizer": self.summarizer.name},
            )

        kept_tokens = self.tokens(kept)
        draft = packed(kept_tokens)
        after = kept_tokens + self.counter.count_text(draft.content)
        summary = packed(after)
        stats = CompactionStats(
            trigger=trigger,
            mode=plan.mode,
            context_tokens_before=before,
            context_tokens_after=after,
            context_window=self.settings.context_window,
            messages_count_before=len(messages),
            messages_count_after=count_after,
            summarized=len(plan.summarize),
        )
        summary = replace(summary, metadata={**summary.metadata, "stats": stats.as_dict()})
        return _Candidate(plan, summary, [*plan.pinned, summary, *plan.keep], stats)

    def _verify(
        self, candidate: _Candidate, messages: Sequence[Message], before: int
    ) -> str | None:
        """Why this candidate must not be committed, or None when it may."""
        violations = check(candidate.context)
        if violations:
            return "invalid context: " + "; ".join(str(v) for v in violations[:3])
        present = {m.id for m in candidate.context}
        missing = [m.id for m in messages if m.pinned and m.id not in present]
        if missing:
            return f"pinned messages missing: {', '.join(missing)}"
        if candidate.stats.context_tokens_after >= before:
            return (
                f"context did not shrink ({before} → {candidate.stats.context_tokens_after} tokens)"
            )
        return None

    def _step(self, name: str) -> None:
        if self._progress is not None:
            self._progress(name)
