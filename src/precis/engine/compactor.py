"""The compaction engine: snapshot, plan, summarize, verify, then commit at once or not at all.

Sans-IO: `Compactor.compaction` is a generator that asks for the snapshot, the summary and the
commit (`precis.engine.requests`) and is sent the answers; a sync or an async session performs
them. So one piece of logic runs in a script and inside any framework's event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace

from precis.core.errors import CompactionError, CompactionVetoed, PlanningError, VersionConflict
from precis.core.memo import Memo
from precis.core.messages import Message, SummaryMetadata
from precis.core.planning import CompactionPlan, plan_all, plan_sliding_window, plan_to_target
from precis.core.steps import Steps
from precis.core.tokens import TokenCounter, count_all
from precis.core.types import CompactionMode, Trigger
from precis.core.validity import check
from precis.engine.audit import audited
from precis.engine.candidates import CandidateMaker, CompactionJob
from precis.engine.fallback import Summaries
from precis.engine.hooks import HookContext, Hooks, PostCompactContext
from precis.engine.requests import Call, Request
from precis.engine.results import CompactionResult, CompactionStats, prompt_cache, unchanged
from precis.engine.settings import SUMMARY_WRAPPER_TOKENS, CompactionSettings
from precis.engine.work import (
    Candidate,
    LedgerAhead,
    NoOp,
    Work,
    clip_room,
    guard_budget,
    joined,
    required_facts,
    smaller,
    with_red_lines_of,
)
from precis.facts import KeptFacts, present
from precis.stores.base import (
    CompactionEvent,
    ContextSnapshot,
    ConversationStore,
    MessageIds,
    utc_now,
)
from precis.summarize.base import Summarizer, SummaryRequest
from precis.summarize.guard import (
    Fact,
    Ledger,
    apply_guard,
)
from precis.summarize.packaging import MIN_CLIP_CHARS, clip_summary

__all__ = ["CompactionJob", "CompactionResult", "CompactionStats", "Compactor", "NoOp"]

# What the model sees of messages, given what each request carries besides them (floor tokens).
View = Callable[[list[Message], int], list[Message]]
# How verification words a candidate that is not smaller than the context it would replace.
NOT_SMALLER = "context did not shrink"
# Characters per token when sizing a summary to the room left: few, so it is not too big (code
# and identifiers run about three; a summary too big for the room is asked again, smaller).
FIT_CHARS_PER_TOKEN = 3
# Times a summary over the room is asked again, smaller.
FIT_RETRIES = 3


class Compactor(CandidateMaker):
    """Runs §6 of the design against one store; what it keeps between calls only saves work.

    `view` turns stored messages into what the model sees (tool outputs shown head+tail, old
    observations masked); planning, summarizing and verifying all work on that view, and the
    commit records ids only, so the originals stay whole in the store.
    """

    def __init__(
        self,
        store: ConversationStore,
        counter: TokenCounter,
        summarizer: Summarizer,
        settings: CompactionSettings | None = None,
        *,
        clock: Callable[[], str] = utc_now,
        progress: Callable[[str], None] | None = None,
        hooks: Hooks | None = None,
        view: View | None = None,
        memo: Memo | None = None,
    ) -> None:
        self.store = store
        # What reading each message found, the session's when it has one (`precis.core.memo`).
        self.memo = memo if memo is not None else Memo()
        self.counter = counter
        self.summarizer = summarizer
        self.settings = settings or CompactionSettings()
        self.hooks = hooks or Hooks()
        self._clock = clock
        self._progress = progress
        self._view = view
        self._ids = MessageIds()
        self.kept = KeptFacts(self.memo)  # what the last guard found: the same answers, sooner
        self.ahead = LedgerAhead(self.memo)  # the next ledger's replay, read at the checks before

    def tokens(self, messages: Sequence[Message]) -> int:
        return sum(self.counter.count(m) for m in messages)

    def compaction(
        self,
        conversation_id: str,
        trigger: Trigger = "manual",
        mode: CompactionMode | None = None,
        *,
        instructions: str | None = None,
        floor_tokens: int = 0,
        task: str | None = None,
        phase: str | None = None,
        pending: Sequence[Message] = (),
        snapshot: ContextSnapshot | None = None,
    ) -> Steps[Request, CompactionResult]:
        """Compact once; on a concurrent commit re-plan against the winner's context, else raise.

        Pre-compact hooks run first and may add instructions or veto (`CompactionVetoed`).
        `snapshot`, the context as a caller just read it, spares the first read when no hook
        runs in between (a commit since it was read fails the compare-and-set, and the retry
        reads the context again).
        """
        reports: list[str] = []
        if self.hooks:
            outcome = yield from self.hooks.pre_steps(
                HookContext(trigger, conversation_id, instructions)
            )
            reports += outcome.reports
            if outcome.vetoed:
                raise CompactionVetoed(outcome.veto_reason or "a pre-compact hook vetoed")
            instructions = outcome.instructions
        summaries = Summaries(self.summarizer, self.settings.summary_retries)
        job = CompactionJob(
            trigger, mode, summaries, instructions, floor_tokens, task, phase, tuple(pending)
        )
        pending_ids = {m.id for m in pending}
        if "" in pending_ids:
            raise ValueError("pending messages need ids, so the commit can leave them out")
        given = None if self.hooks else snapshot
        # A given snapshot's attempt is one more: as many attempts read the context as before.
        attempts = self.settings.commit_retries + 1 + (given is not None)
        for attempt in range(attempts):
            if attempt == 0 and given is not None:
                snapshot = given
            else:
                snapshot = yield Call(self.store.context, (conversation_id,))
            assert snapshot is not None
            candidate = yield from self._candidate(snapshot, job)
            if isinstance(candidate, NoOp):
                self._step("nothing to do")
                return self._no_op(snapshot, job, candidate, tuple(reports))
            self._step("verified")
            commit = Call(
                self.store.commit_compaction,
                (conversation_id,),
                {
                    "expected_version": snapshot.version,
                    "snapshot_last_seq": snapshot.last_seq,
                    "summary": candidate.summary,
                    "context_ids": [m.id for m in candidate.context if m.id not in pending_ids],
                    "event": CompactionEvent(
                        trigger=trigger,
                        mode=candidate.mode,
                        stats=candidate.stats.as_dict(),
                        summary_id=candidate.summary.id,
                        at=self._clock(),
                    ),
                },
            )
            try:
                committed: ContextSnapshot = yield commit
            except VersionConflict:
                if attempt == attempts - 1:
                    raise
                continue
            self._step("committed")
            if self.hooks:
                text = candidate.summary.metadata.get("summary", candidate.summary.content)
                reports += yield from self.hooks.post_steps(
                    PostCompactContext(
                        trigger, conversation_id, candidate.stats.as_dict(), str(text)
                    )
                )
            return CompactionResult(
                candidate.stats,
                candidate.summary,
                committed.messages,
                tuple(reports),
                committed=committed,
            )
        raise AssertionError("unreachable")

    def _no_op(
        self, snapshot: ContextSnapshot, job: CompactionJob, found: NoOp, reports: tuple[str, ...]
    ) -> CompactionResult:
        """Nothing written: the context as it was, and why (no hook runs after, no event)."""
        window = self.settings.context_window
        stats = unchanged(job.trigger, found.tokens, found.messages, window)
        return CompactionResult(stats, None, snapshot.messages, reports, found.reason)

    def _candidate(
        self, snapshot: ContextSnapshot, job: CompactionJob
    ) -> Steps[Request, Candidate | NoOp]:
        """The first acceptable result of: sliding window, all-mode, truncation; under the soft
        watermark if any is, else the smallest. A `NoOp` when none could shrink the context."""
        shown = [*snapshot.messages, *job.pending]
        if self._view:
            shown = self._view(shown, job.floor_tokens)
        stored, pending = shown[: len(snapshot.messages)], shown[len(snapshot.messages) :]
        messages = [*stored, *pending]
        counts = count_all(self.counter, messages)
        before = sum(counts)
        plans: list[Callable[[], CompactionPlan]] = []
        if job.mode in (None, "sliding_window"):
            with contextlib.suppress(PlanningError):
                sliding = self._plan_sliding(messages, counts, job.floor_tokens)
                # Else it would summarize this turn's own messages.
                if len(sliding.summarize) + len(sliding.pinned) <= len(stored):
                    plans.append(lambda: sliding)
        if job.mode != "truncate":

            def all_mode() -> CompactionPlan:
                plan = plan_all(stored, keep_newest=not pending)
                return replace(plan, keep=(*plan.keep, *pending))

            plans.append(all_mode)  # planned only when it is tried
        self._step("planned")
        ahead = self.ahead.take(snapshot.version, job.task)
        originals = [*snapshot.messages, *job.pending]
        work = Work(messages, counts, self.counter, ahead, originals, self.memo)
        failures: list[str] = []
        # A mode asked for by name is that mode; the policy's own choice tries the cheap tier.
        cheap = job.mode is None and self.settings.low_watermark is not None
        if cheap and not job.instructions:
            # Cheap tiers first: a summary only when masking old tool outputs cannot reach the
            # target (or when the caller asked the summary for something).
            masked = self._masked(messages, counts, len(stored), before, job, work)
            if masked is not None:
                problem = self._verify(masked, messages, before)
                if problem is None:
                    return self._audited(masked, stored, [], messages, job.floor_tokens, work)
                failures.append(f"mask: {problem}")
        stuck = True  # every failure so far is that nothing could be made smaller
        over: Candidate | None = None
        for i, make_plan in enumerate(plans):
            plan = make_plan()
            if not plan.summarize:
                failures.append(f"{plan.mode}: nothing to summarize")
                continue
            last = i == len(plans) - 1
            candidate = yield from self._summarize(plan, messages, before, job, work, fit=last)
            problem = self._verify(candidate, messages, before)
            if problem is not None:
                failures.append(f"{plan.mode}: {problem}")
                stuck = stuck and problem.startswith(NOT_SMALLER)
            elif self._over_threshold(candidate, job.floor_tokens):
                over = smaller(over, candidate)  # valid but too big: try the next, else use it
                failures.append(f"{plan.mode}: valid, but still over the threshold")
            else:
                return self._audited(candidate, stored, failures, messages, job.floor_tokens, work)
        truncated = self._truncate(messages, before, job, work)
        if truncated is not None:
            problem = self._verify(truncated, messages, before)
            if problem is None:
                return self._audited(
                    smaller(over, truncated), stored, failures, messages, job.floor_tokens, work
                )
            failures.append(f"truncate: {problem}")
            stuck = stuck and problem.startswith(NOT_SMALLER)
        else:
            failures.append("truncate: nothing can be dropped")
        if over is not None:
            return self._audited(over, stored, failures, messages, job.floor_tokens, work)
        if job.summaries.failure is not None:
            failures.append(f"the summarizer failed: {job.summaries.failure}")
        where = f"{len(messages)} messages ({before} tokens)"
        if stuck:
            reason = f"nothing makes the context of {where} smaller: " + "; ".join(failures)
            return NoOp(reason, before, len(messages))
        raise CompactionError(f"no acceptable compaction of {where}: " + "; ".join(failures))

    def _audited(
        self,
        c: Candidate,
        before: list[Message],
        tried: list[str],
        shown: list[Message],
        floor: int,
        work: Work,
    ) -> Candidate:
        """The candidate with its summary's audit (what it dropped, checked and rolled back) and
        its stats with what the provider's prompt cache keeps of the prompt."""
        kept, rewritten = prompt_cache(shown, c.context, lambda m: work.tokens([m]), floor)
        c = replace(c, stats=replace(c.stats, cache_kept_tokens=kept, rewritten_tokens=rewritten))
        verbatim = [f.text for f in c.required]
        return c.with_summary(audited(c.summary, before, c.context, tried, verbatim))

    def _plan_sliding(
        self, messages: Sequence[Message], counts: list[int], floor_tokens: int
    ) -> CompactionPlan:
        s = self.settings
        target = s.target
        if s.low_watermark is not None and target is not None:
            reserve = s.target_reserve(floor_tokens)
            return plan_to_target(
                messages, tokens=counts, target_tokens=target, reserved_tokens=reserve
            )
        return plan_sliding_window(
            messages,
            tokens=counts,
            context_window=s.context_window,
            percentage=s.sliding_window_percentage,
            reserved_tokens=s.planner_reserve(floor_tokens),
            user_boundary_fallback=s.user_boundary_fallback,
        )

    def _over_threshold(self, candidate: Candidate, floor_tokens: int) -> bool:
        threshold = self.settings.threshold
        after = candidate.stats.context_tokens_after + floor_tokens
        return threshold is not None and after > threshold

    def _clip(self, plan: CompactionPlan, job: CompactionJob, work: Work, fit: bool) -> int:
        """The summary's clip: what the setting leaves beside the pinned messages, never more
        than half the span it replaces (a summary as big as its source only refills the window)
        and, with `fit`, no more than the soft watermark leaves beside what stays (system
        prompt, tools, pinned and kept messages)."""
        clip = min(
            clip_room(self.settings.effective_clip_chars, plan.pinned),
            max(MIN_CLIP_CHARS, sum(len(m.content) for m in plan.summarize) // 2),
        )
        threshold = self.settings.threshold
        if fit and threshold is not None:
            stays = work.tokens([*plan.pinned, *plan.keep]) + job.floor_tokens
            room = threshold - stays - SUMMARY_WRAPPER_TOKENS
            clip = min(clip, max(MIN_CLIP_CHARS, room * FIT_CHARS_PER_TOKEN))
        return clip

    def _summarize(
        self,
        plan: CompactionPlan,
        messages: Sequence[Message],
        before: int,
        job: CompactionJob,
        work: Work,
        *,
        fit: bool = False,
    ) -> Steps[Request, Candidate]:
        """The plan's candidate; with `fit`, asked again (at most `FIT_RETRIES` times) with a
        clip scaled down by as much as the last one overshot the soft watermark."""
        clip = self._clip(plan, job, work, fit)
        candidate = yield from self._summary_candidate(plan, messages, before, job, work, clip)
        threshold = self.settings.threshold
        retries = FIT_RETRIES if fit and threshold is not None else 0
        for _ in range(retries):
            over = candidate.stats.context_tokens_after + job.floor_tokens - (threshold or 0)
            # The wrapper (note, time, stats) does not shrink with the clip: scale the text.
            text = self.counter.count(candidate.summary) - SUMMARY_WRAPPER_TOKENS
            if over <= 0 or text <= over or clip <= MIN_CLIP_CHARS:
                break
            clip = max(MIN_CLIP_CHARS, clip * (text - over) * 9 // (text * 10))  # a tenth spare
            candidate = yield from self._summary_candidate(plan, messages, before, job, work, clip)
        return candidate

    def _summary_candidate(
        self,
        plan: CompactionPlan,
        messages: Sequence[Message],
        before: int,
        job: CompactionJob,
        work: Work,
        clip: int,
    ) -> Steps[Request, Candidate]:
        s = self.settings
        request = SummaryRequest(
            plan.summarize,
            plan.mode,
            clip,
            job.instructions,
            style=s.summary_style,
            merge=s.merge_policy,
            task=job.task,
            phase=job.phase,
            timeout=s.summary_timeout,
            kept=plan.keep,
            originals=work.originals(plan.summarize),
            memo=self.memo,
        )
        text = yield from job.summaries.steps(request)
        text = clip_summary(text, clip)
        stays = [*plan.pinned, *plan.keep]
        ledger = with_red_lines_of(self._ledger(plan.summarize, job, work), stays, self.memo)
        required = required_facts(ledger, job.task is not None, clip)
        ends: list[int] = []
        kept = self.kept.parts_of(stays, len(plan.pinned), ends)  # as the check just saw them
        kept = work.folded_text_parts(stays, ends) if kept is None else kept
        cut = ends[len(plan.pinned) - 1] if plan.pinned else 0
        pinned_text, keep_text = " ".join(kept[:cut]), " ".join(kept[cut:])
        if s.guard:
            # Facts the kept messages already hold need not be repeated in the summary.
            needed = Ledger(tuple(self.kept.missing(ledger.facts, kept, joined(*kept))))
            self.kept.asked_of(stays, ends)
            room = guard_budget(required, clip, clip_room(s.effective_clip_chars, plan.pinned))
            text = apply_guard(text, needed, clip_chars=room, memo=self.memo).text
        self._step("summarized")
        metadata: SummaryMetadata = {
            "summary": text,
            "mode": plan.mode,
            "summarizer": job.summaries.name,
            "ledger": ledger.to_json(),
        }
        if job.phase:
            metadata["phase"] = job.phase
        return self._packed(
            plan.mode,
            text,
            metadata,
            plan.pinned,
            plan.keep,
            messages,
            before,
            job,
            summarized=len(plan.summarize),
            required=required,
            ledger=ledger,
            work=work,
            kept_texts=(pinned_text, keep_text),
        )

    def _verify(self, candidate: Candidate, messages: Sequence[Message], before: int) -> str | None:
        """Why this candidate must not be committed, or None when it may."""
        if violations := check(candidate.context):
            return "invalid context: " + "; ".join(str(v) for v in violations[:3])
        kept_ids = {m.id for m in candidate.context}
        if missing := [m.id for m in messages if m.pinned and m.id not in kept_ids]:
            return f"pinned messages missing: {', '.join(missing)}"
        lost: list[Fact] = []
        whole: str | None = None
        for fact in candidate.required:
            # A run of the context is bounded by its ends or a joining space in the whole text,
            # which bound a token alike: what a run holds, the whole holds.
            if any(present(fact, run, self.memo) for run in candidate.runs):
                continue
            if whole is None:
                whole = candidate.whole()
            if not present(fact, whole, self.memo):
                lost.append(fact)
        if lost:
            return "dropped verbatim: " + "; ".join(repr(f.text[:80]) for f in lost)
        if candidate.stats.context_tokens_after >= before:
            after = candidate.stats.context_tokens_after
            return f"{NOT_SMALLER} ({before} → {after} tokens)"
        return None

    def _step(self, name: str) -> None:
        if self._progress is not None:
            self._progress(name)
