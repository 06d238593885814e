"""A request answered by the messages kept verbatim after the summary is not left "unanswered"."""

from __future__ import annotations

from precis.core.messages import Message
from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.base import LocalSummarizer, SummaryRequest, answers_last_request
from precis.summarize.extractive import ExtractiveSummarizer

QUESTION = "Also: which version of PostgreSQL does staging run, and is the backup job enabled?"
SPAN = (
    Message(role="user", content="Set up the staging database on port 5433, then report.", id="u1"),
    Message(role="assistant", content="Working on it.", id="a1"),
    Message(role="user", content=QUESTION, id="u2"),
)
ANSWER = Message(role="assistant", content="PostgreSQL 16.2; the nightly backup is on.", id="a2")


def brief(kept: tuple[Message, ...]) -> str:
    request = SummaryRequest(SPAN, "sliding_window", 3000, style="brief", kept=kept)
    return ExtractiveSummarizer().summarize(request)


def test_a_request_answered_in_the_kept_tail_is_not_open() -> None:
    assert "unanswered" in brief(())  # nothing kept: the question is open
    assert "unanswered" not in brief((ANSWER,))
    working = Message(role="assistant", content="", id="a3", tool_calls=())
    follow_up = Message(role="user", content="And the replica?", id="u3")
    assert not answers_last_request((working, follow_up, ANSWER))  # a new turn came first


class Recording(LocalSummarizer):
    """Remembers each request; answers with a short fixed text."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    @property
    def name(self) -> str:
        return "recording"

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return "summary"


def test_the_engine_tells_the_summarizer_what_stays_after_the_summary() -> None:
    summarizer = Recording()
    session = Session(MemoryStore(), "k", None, summarizer, CompactionSettings(context_window=8000))
    for n in range(12):
        session.append(
            {"role": "user", "content": f"Step {n}: look at module {n} and report what it does."},
            {"role": "assistant", "content": f"Module {n} parses the config file number {n}."},
        )
    result = session.compact_result("sliding_window")
    assert result.compacted
    request = summarizer.requests[-1]  # the candidate committed is the last one asked for
    assert result.summary is not None
    after = [m.id for m in result.context if m.id != result.summary.id and not m.pinned]
    assert [m.id for m in request.kept] == after and request.kept
