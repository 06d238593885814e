"""What fills the context window, by kind: the counts behind one composition sample.

Pure: messages and a counter in, a `Sample` out. The session measures what the model sees (the
view), so a long tool output counts as its head and tail, as it is sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.core.tokens import TokenCounter, count_all
from precis.engine.settings import CompactionSettings
from precis.stores.samples import Sample, SampleKind

__all__ = ["kind_of", "measure"]

# The kinds that count as the summary: a summary, or a truncation marker.
_SUMMARIES = (KIND_SUMMARY, KIND_MARKER)


def kind_of(message: Message) -> str:
    """The part a message counts in: pinned (the task too), summary (or a truncation marker),
    tool outputs, or messages."""
    if message.pinned:
        return "pinned"
    if message.kind in _SUMMARIES:
        return "summary"
    if message.role == "tool":
        return "tool_outputs"
    return "messages"


def measure(
    messages: Sequence[Message],
    counter: TokenCounter,
    *,
    kind: SampleKind,
    at: str,
    settings: CompactionSettings,
    system_tokens: int = 0,
    tool_tokens: int = 0,
) -> Sample:
    """The sample for these messages (a whole context, or an append's new messages)."""
    parts = dict.fromkeys(("pinned", "summary", "messages", "tool_outputs"), 0)
    for message, tokens in zip(messages, count_all(counter, messages), strict=True):
        parts[kind_of(message)] += tokens
    return Sample(
        kind=kind,
        at=at,
        in_context=len(messages),
        window=settings.context_window,
        reserved=settings.planner_reserve(0),
        system=system_tokens,
        tools=tool_tokens,
        pinned=parts["pinned"],
        summary=parts["summary"],
        messages=parts["messages"],
        tool_outputs=parts["tool_outputs"],
    )
