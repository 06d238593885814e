"""What a summarizer is: a request in, summary text out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from precis.messages import Message

SummaryMode = Literal["sliding_window", "all"]


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """The messages leaving the context and how to summarize them.

    `instructions` is a caller's own prompt; it replaces the built-in one and survives the
    sliding-window → all-mode fallback. `clip_chars` is the budget the summary must fit
    (the engine clips anything longer; a good summarizer plans for it).
    """

    messages: tuple[Message, ...]
    mode: SummaryMode = "sliding_window"
    clip_chars: int | None = None
    instructions: str | None = None


class Summarizer(Protocol):
    """Anything that turns a span of conversation into summary text."""

    @property
    def name(self) -> str: ...

    async def summarize(self, request: SummaryRequest) -> str: ...
