"""What a summarizer is: a request in, summary text out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from precis.core.memo import Memo
from precis.core.messages import KIND_MESSAGE, Message
from precis.core.types import MergePolicy, PlanMode, SummaryStyle
from precis.facts import earlier_summary_text


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """The messages leaving the context and how to summarize them.

    `instructions` is a caller's own prompt; it replaces the built-in one and survives the
    sliding-window → all-mode fallback. `clip_chars` is the budget the summary must fit
    (the engine clips anything longer; a good summarizer plans for it).
    `style` picks the shape: letta's sections, S3's five-part task brief or S2's notes.
    `merge` says how an earlier summary is carried: rebuilt from scratch (`regenerate`, S3's
    defence against drift) or kept section by section with the new items added (`anchored`).
    `task` is the original task, always kept verbatim; `previous_summary` the raw text of the
    summary being replaced (it may also sit in `messages`; it is then counted once); `phase` a
    phase the application just finished, which the summary must name. `timeout` bounds each
    model call, in seconds. `kept` are the messages that stay verbatim right after the summary
    (context, not to be summarized: a request they answer is not open). `originals` are
    `messages` as stored, when the view showed some of them cut (a long tool output head+tail):
    a summarizer that reads by rule may read them whole; empty when none was cut. `memo` is the
    asking session's (`precis.core.memo`): a summarizer that reads by rule finds there what the
    session already read of each message.
    """

    messages: tuple[Message, ...]
    mode: PlanMode = "sliding_window"
    clip_chars: int | None = None
    instructions: str | None = None
    style: SummaryStyle = "letta"
    merge: MergePolicy = "regenerate"
    task: str | None = None
    previous_summary: str | None = None
    phase: str | None = None
    timeout: float | None = None
    kept: tuple[Message, ...] = ()
    originals: tuple[Message, ...] = ()
    memo: Memo | None = field(default=None, compare=False, repr=False)


class Summarizer(Protocol):
    """Anything that turns a span of conversation into summary text, from plain code
    (`summarize`) or inside an event loop (`asummarize`, which never blocks it on I/O)."""

    @property
    def name(self) -> str: ...

    def summarize(self, request: SummaryRequest) -> str: ...

    async def asummarize(self, request: SummaryRequest) -> str: ...


class LocalSummarizer:
    """A summarizer that computes without I/O, so its async face is its sync one."""

    @property
    def name(self) -> str:
        raise NotImplementedError

    def summarize(self, request: SummaryRequest) -> str:
        raise NotImplementedError

    async def asummarize(self, request: SummaryRequest) -> str:
        return self.summarize(request)


def answers_last_request(kept: Sequence[Message]) -> bool:
    """Whether the kept messages open with the answer to the span's last request: an assistant
    reply in words (no tool call pending) before any new user turn."""
    for message in kept:
        if message.role == "user" and message.kind == KIND_MESSAGE:
            return False
        if message.role == "assistant" and message.content.strip() and not message.tool_calls:
            return True
    return False


def _same_text(a: str, b: str) -> bool:
    """Whether two summary texts are the same one, give or take whitespace or a clip."""
    left, right = " ".join(a.split()), " ".join(b.split())
    return bool(left and right) and (left == right or left in right or right in left)


def split_previous(request: SummaryRequest) -> tuple[str | None, tuple[Message, ...]]:
    """The summary being replaced and the span without it, so it is never counted twice.

    Without `previous_summary` the first summary message of the span stands in for it.
    """
    previous = request.previous_summary
    if previous is not None and not previous.strip():
        previous = None
    fresh: list[Message] = []
    for message in request.messages:
        text = earlier_summary_text(message)
        if text is not None and previous is None:
            previous = text
            continue
        if text is not None and previous is not None and _same_text(text, previous):
            continue
        fresh.append(message)
    return previous, tuple(fresh)


def contains_message(messages: Sequence[Message], previous: str) -> bool:
    """Whether the span already holds the summary `previous` as a message."""
    return any(
        (text := earlier_summary_text(m)) is not None and _same_text(text, previous)
        for m in messages
    )
