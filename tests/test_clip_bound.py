"""`clip_chars` bounds everything a compaction puts in the context: the pinned task and the
summary together, on the shared conversations at any clip; and the brief fills its room before
it leaves a fact out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conformance import TRAJECTORIES
from hypothesis import given, settings
from hypothesis import strategies as st

from precis.core.errors import InvalidMessage
from precis.core.messages import Message
from precis.engine.settings import CompactionSettings
from precis.eval.replay import load_conversation
from precis.facts import extract_facts, fold, missing_from_folded
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.extractive import ExtractiveSummarizer
from precis.summarize.packaging import MIN_CLIP_CHARS

CONVERSATIONS = sorted(p for p in TRAJECTORIES.glob("*.jsonl"))
# The longest prefix a case compacts: enough for every kind of fact, quick enough for many cases.
MAX_PREFIX = 90
# A brief that leaves a fact out has used at least this share of its room.
FILLED_SHARE = 0.8


def _compacted(path: Path, cut: int, clip: int) -> tuple[list[Message], str, int]:
    """(the messages the compaction evicted, the summary's text, the pinned messages' size)."""
    items = load_conversation(path)[: max(3, cut)]
    settings_ = CompactionSettings(context_window=1_000_000, clip_chars=clip, pin_task=True)
    session = Session(MemoryStore(), path.stem, None, ExtractiveSummarizer(), settings_)
    if items[0].get("role") == "system" and isinstance(items[0].get("content"), str):
        session.set_system_prompt(items[0]["content"])
        items = items[1:]
    appended: list[Message] = []
    for item in items:
        try:
            appended += session.append(item)
        except InvalidMessage:
            continue  # the recording's own damage
    result = session.compact_result("all")
    summary = result.summary
    text = "" if summary is None else str(summary.metadata["summary"])
    context = session.context()
    pinned = sum(_size(m) for m in context if m.pinned)
    kept = {m.id for m in context}
    return [m for m in appended if m.id not in kept], text, pinned


def _size(message: Message) -> int:
    return len(message.content) + sum(len(c.arguments) for c in message.tool_calls)


@pytest.mark.property
@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(CONVERSATIONS),
    st.integers(8, MAX_PREFIX),
    st.integers(MIN_CLIP_CHARS, 16_000),
)
def test_the_clip_bounds_the_pinned_task_and_the_summary(path: Path, cut: int, clip: int) -> None:
    evicted, text, pinned = _compacted(path, cut, clip)
    if not text:
        return  # nothing to compact in so short a prefix
    if pinned + MIN_CLIP_CHARS <= clip:
        assert pinned + len(text) <= clip, (path.name, cut, clip, pinned, len(text))
    else:  # the pinned task alone takes the clip: the summary is the smallest there is
        assert len(text) <= MIN_CLIP_CHARS, (path.name, cut, clip, pinned, len(text))
    room = max(MIN_CLIP_CHARS, clip - pinned)
    # Filled before it drops: a fact of the span the context lost means the brief is full.
    lost = missing_from_folded(extract_facts(evicted), fold(text))
    if lost and len(text) < FILLED_SHARE * min(room, _span(evicted) // 2):
        pytest.fail(
            f"{path.name}@{cut}: {len(lost)} facts lost with the brief at "
            f"{len(text)} of {room}: {json.dumps([f.text for f in lost[:3]])}"
        )


def _span(messages: list[Message]) -> int:
    return sum(len(m.content) for m in messages)


@pytest.mark.parametrize("clip", [2000, 4000, 12000])
def test_the_context_after_a_compaction_of_each_shared_run_is_within_the_clip(clip: int) -> None:
    """The issue's case: pinned task + summary over every shared conversation's first 200
    messages, at the clips the fact sets use; it was up to 1.46 × the clip."""
    for path in CONVERSATIONS:
        _, text, pinned = _compacted(path, 200, clip)
        if text and pinned + MIN_CLIP_CHARS <= clip:
            assert pinned + len(text) <= clip, (path.name, clip, pinned, len(text))
