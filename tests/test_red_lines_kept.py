"""A red line survives every compaction, whatever the policy: also the one a kept summary left
out of its text because a message kept beside it held the words, when that message leaves later.

The summarizer is a scripted model that never restates a rule (what a model summary may do), so
only the guard can keep the red line; the store is real.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message, ToolCall
from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores import SQLiteStore
from precis.summarize.base import LocalSummarizer, SummaryRequest

RED_LINE = "Never touch the legacy/ directory; it belongs to the payments team."
TASK = "Task: move the billing service from MySQL to PostgreSQL, one table per step."


class RuleBlind(LocalSummarizer):
    """A model's summary that states no rule: the guard alone must keep the red line."""

    name = "rule-blind"

    def summarize(self, request: SummaryRequest) -> str:
        return "The agent migrated the first tables one step at a time."


def step(session: Session, n: int, extra: str = "") -> None:
    call = ToolCall(f"call_{n}", "run_step", f'{{"step": {n}}}')
    session.append(
        Message(role="assistant", content=f"Step {n}: migrating table_{n}.", tool_calls=(call,))
    )
    rows = "\n".join(f"  row {r}: copied {n * 7 + r} records, checksum ok" for r in range(6))
    output = f"step {n} finished (ledger-{n:04d})\n{rows}{extra}"
    session.append(Message(role="tool", tool_call_id=f"call_{n}", content=output))


def holds(messages: list[Message]) -> list[Message]:
    return [m for m in messages if RED_LINE in m.content]


@pytest.mark.parametrize("low_watermark", [0.5, None], ids=["low-watermark", "letta-policy"])
def test_a_truncation_keeps_the_red_line_a_kept_summary_left_to_a_message_it_drops(
    tmp_path: Path, low_watermark: float | None
) -> None:
    settings = CompactionSettings(context_window=3000, low_watermark=low_watermark)
    s = Session(SQLiteStore(tmp_path / "c.db"), "c", summarizer=RuleBlind(), settings=settings)
    s.append(Message(role="user", content=TASK))
    s.append(Message(role="user", content=RED_LINE))
    for n in range(1, 14):
        step(s, n)
    step(s, 14, f"\nThe repository's README says: {RED_LINE}")  # the words again, in an output
    for n in range(15, 17):
        step(s, n)
    assert s.compact("sliding_window").mode == "sliding_window"  # a summary, not a masking
    context = s.context()
    (summary,) = [m for m in context if m.kind == KIND_SUMMARY]
    # What sets the trap: the summary leaves the red line to the tool output kept beside it.
    assert RED_LINE not in summary.content
    assert [m.role for m in holds(context)] == ["tool"]
    for n in range(17, 27):
        step(s, n)
    # The oldest outputs go, that one with them; the newest summary stays.
    stats = s.compact(mode="truncate")
    context = s.context()
    assert stats.mode == "truncate" and summary.id in {m.id for m in context}
    assert holds(context), "the red line left the context"
    if "README" not in "".join(m.content for m in context):  # its holder went: the marker says it
        assert [m.kind for m in holds(context)] == [KIND_MARKER]
