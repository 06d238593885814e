"""The embedded default summarizer: a brief built by rule from the span, with no model (S2/S3).

It keeps what a model most often drops (requests and red lines verbatim, paths, identifiers,
errors with their fixes) and plans its own size, so the engine's blunt clip never has to cut it.
The facts come from `precis.facts`; `precis.summarize.brief` turns them into sections, fills
them within the budget, and merges them into an earlier brief.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from precis.core.memo import Memo
from precis.core.messages import KIND_SUMMARY, Message
from precis.facts import (
    Collector,
    Fact,
    Ledger,
    context_text,
    earlier_summary_text,
    extract_facts,
    fold,
    head,
    is_chinese,
    missing_from_folded,
    stored_ledger,
)
from precis.facts import span_language as span_language
from precis.summarize.base import (
    LocalSummarizer,
    SummaryRequest,
    answers_last_request,
    split_previous,
)
from precis.summarize.brief.fill import compose, within_words
from precis.summarize.brief.labels import DEFAULT_BRIEF_CHARS, MAX_BRIEF_CHARS
from precis.summarize.brief.merge import anchor_task, anchored
from precis.summarize.brief.read import read_brief
from precis.summarize.packaging import NO_MESSAGES_SUMMARY

__all__ = [
    "DEFAULT_BRIEF_CHARS",
    "MAX_BRIEF_CHARS",
    "ExtractiveSummarizer",
    "build_brief",
    "span_language",
]


def build_brief(
    messages: Sequence[Message],
    *,
    mode: str = "sliding_window",
    budget: int = DEFAULT_BRIEF_CHARS,
    instructions: str | None = None,
    style: str = "letta",
    merge: str = "regenerate",
    task: str | None = None,
    previous: str | None = None,
    phase: str | None = None,
    ledger: Ledger | None = None,
    answered: bool = False,
    must: Sequence[Fact] = (),
    memo: Memo | None = None,
) -> str:
    """The brief for `messages` within `budget` UTF-16 units; same input, same text.

    `previous` is the summary being replaced: rebuilt together with the span (`regenerate`) or
    kept line for line with the span's items added (`anchored`). `task` leads verbatim.
    `ledger` is the one `previous` carried, if any: anchored merging takes its task from it.
    `answered`: the span's last request is answered by the messages kept after the summary.
    `must`: the facts the guard will demand of the text (`must_keep`), placed first.
    `memo`: the session's, where each message's scan may already be.
    """
    if not messages and previous is None and not task and not phase:
        return head(NO_MESSAGES_SUMMARY, budget)
    budget = max(1, budget)
    prior = previous if merge == "anchored" else None
    lead = task
    if prior is not None and not (task and task.strip()):
        # The span's first request is not the task: the earlier summary already names that.
        lead = anchor_task(prior, ledger)
    collector = Collector(lead, reader=read_brief, memo=memo)
    if previous is not None and prior is None:
        collector.fold(previous)
    facts = collector.feed(messages)
    if answered:
        facts.last_request_answered = True  # its answer stays verbatim after the summary
    if phase and phase.strip():
        facts.phases.append(phase.strip())
    if prior is not None:
        anchor = prior
        language = "zh" if is_chinese(facts.user_texts or [anchor]) else "en"

        def render(room: int) -> str:
            return anchored(anchor, facts, style=style, language=language, mode=mode, budget=room)

    else:
        language = "zh" if is_chinese(facts.user_texts) else "en"

        def render(room: int) -> str:
            return compose(
                facts,
                style=style,
                language=language,
                mode=mode,
                budget=room,
                instructions=instructions,
                must=must,
            )

    return within_words(render, style, budget)


class ExtractiveSummarizer(LocalSummarizer):
    """Summarizes by rule, with no model: the embedded default, deterministic and fast."""

    def __init__(
        self, *, default_chars: int = DEFAULT_BRIEF_CHARS, max_chars: int = MAX_BRIEF_CHARS
    ) -> None:
        self.default_chars = default_chars
        self.max_chars = max_chars

    @property
    def name(self) -> str:
        return "extractive"

    def budget_for(self, request: SummaryRequest) -> int:
        """The size to plan for: the default when no clip is given; else the clip (never above
        the cap), but never near the size of what the brief replaces, so it always makes the
        context smaller: a short span gets a short brief, however large the clip."""
        if request.clip_chars is None:
            return self.default_chars
        budget = max(1, min(request.clip_chars, self.max_chars))
        return min(budget, max(SPAN_FLOOR_CHARS, _span_room(request)))

    def summarize(self, request: SummaryRequest) -> str:
        """A brief of the span that fits the clip by itself; instructions only set priorities."""
        plain = (
            request.style == "letta"
            and request.merge == "regenerate"
            and request.task is None
            and request.previous_summary is None
            and request.phase is None
        )
        # A long output the view showed head+tail is read whole: the brief picks what it keeps.
        span = request.originals or request.messages
        if plain:
            return build_brief(
                span,
                mode=request.mode,
                budget=self.budget_for(request),
                instructions=request.instructions,
                answered=answers_last_request(request.kept),
                must=must_keep(request),
                memo=request.memo,
            )
        previous, fresh = split_previous(replace(request, messages=span))
        return build_brief(
            fresh,
            mode=request.mode,
            budget=self.budget_for(request),
            instructions=request.instructions,
            style=request.style,
            merge=request.merge,
            task=request.task,
            previous=previous,
            phase=request.phase,
            ledger=_carried_ledger(span, previous, request.memo),
            answered=answers_last_request(request.kept),
            must=must_keep(request),
            memo=request.memo,
        )


# A first brief takes at most half the characters it replaces (as the guard's room does);
# rebuilding an earlier summary with a few new messages, it stays below them all by a margin.
SPAN_MARGIN_CHARS = 400
SPAN_FLOOR_CHARS = 600


def _span_room(request: SummaryRequest) -> int:
    """What a brief of this span may take: half the span's text and calls; rebuilding an
    earlier summary, all of them (the summary as stored, in its wrapper) less a margin."""
    units = 0
    summarized = False
    for message in request.messages:
        units += len(message.content)
        for call in message.tool_calls:
            units += len(call.name) + len(call.arguments)
        summarized = summarized or message.kind == KIND_SUMMARY
    if request.previous_summary and not summarized:
        units += len(request.previous_summary)
        summarized = True
    if not summarized:
        return units // 2
    return units - SPAN_MARGIN_CHARS


def must_keep(request: SummaryRequest) -> tuple[Fact, ...]:
    """The facts the guard will demand of this span's summary: the span's ledger (as the
    engine reads it), less what the pinned task and the messages kept after the summary
    already hold."""
    memo = request.memo
    ledger = extract_facts(request.messages, task=request.task, memo=memo)
    if request.task:  # pinned beside the summary, it holds what it says
        ledger = [f for f in ledger if f.kind != "task"]
        ledger = missing_from_folded(ledger, fold(request.task), memo)
    if not request.kept:
        return tuple(ledger)
    return tuple(missing_from_folded(ledger, context_text(request.kept, memo).folded, memo))


def _carried_ledger(
    messages: Sequence[Message], previous: str | None, memo: Memo | None
) -> Ledger | None:
    """The ledger stored on the summary message whose text is `previous`, if the span has it."""
    if previous is None:
        return None
    for message in messages:
        if "ledger" in message.metadata and earlier_summary_text(message) == previous:
            return stored_ledger(message, memo)
    return None
