"""A summarizer that fails does not stop the agent: it is asked again a few times, then the
extractive brief (no model, no I/O) stands in for it, and the compaction records why."""

from __future__ import annotations

from precis.core.errors import ContextOverflow, PrecisError
from precis.core.steps import Steps
from precis.engine.requests import Request, Summarize
from precis.engine.results import FALLBACK_EXTRACTIVE, FALLBACK_TRUNCATION, Fallback
from precis.summarize.base import Summarizer, SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer
from precis.summarize.ladder import usable_answer

__all__ = ["Summaries", "failure_line"]

# The most of a failure's text a compaction records (an error page can be long).
MAX_REASON_CHARS = 300


def failure_line(error: BaseException) -> str:
    """The error in one line: precis's own text, or another error's class and text."""
    text = " ".join(str(error).split())
    if not isinstance(error, PrecisError):
        name = type(error).__name__
        text = f"{name}: {text}" if text else name
    elif not text:
        text = type(error).__name__
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


class Summaries:
    """One compaction's summaries: the summarizer's while it answers; once it has failed
    `retries + 1` times in a row (or ran out of time, or said the request is too big, where
    asking again only waits as long or overflows again), the extractive brief's for the rest of
    the compaction, with `failure` saying why."""

    __slots__ = ("failure", "retries", "summarizer")

    def __init__(self, summarizer: Summarizer, retries: int) -> None:
        self.summarizer = summarizer
        self.retries = retries
        self.failure: str | None = None

    @property
    def name(self) -> str:
        """The name of the summarizer that writes the summaries now."""
        return self.summarizer.name if self.failure is None else ExtractiveSummarizer().name

    def fallback(self, *, truncated: bool) -> Fallback | None:
        """What stands in for the summarizer in a candidate made now: nothing while it answers,
        else the extractive brief, or truncation for a candidate that drops instead."""
        if self.failure is None:
            return None
        return FALLBACK_TRUNCATION if truncated else FALLBACK_EXTRACTIVE

    def steps(self, request: SummaryRequest) -> Steps[Request, str]:
        """The summary of `request`: asked of the summarizer until it answers or fails for good,
        then written by the extractive brief. A blank or non-text answer is a failure."""
        if self.failure is None:
            failure = ""
            for _ in range(self.retries + 1):
                try:
                    return usable_answer((yield Summarize(self.summarizer, request)))
                except (TimeoutError, ContextOverflow) as error:
                    failure = failure_line(error)
                    break
                except Exception as error:  # any failure of the summarizer is its own
                    failure = failure_line(error)
            self.failure = failure
        return ExtractiveSummarizer().summarize(request)
