"""letta-code's planner, estimate and threshold vectors, reproduced exactly."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from conformance import expand_placeholders, vectors
from letta_shape import letta_to_message

from precis.core.errors import PlanningError
from precis.core.messages import Message
from precis.core.planning import plan_all, plan_sliding_window
from precis.core.tokens import LettaEstimator, estimate_context, letta_threshold

PLANNER = vectors()["planner"]


def _messages(entry: dict[str, Any]) -> list[Message]:
    if "messagesRaw" in entry:
        return [letta_to_message(expand_placeholders(m)) for m in entry["messagesRaw"]]
    # Sized messages: each one's estimate is ceil(chars / 4), which "x" * chars reproduces.
    return [
        Message(role=m["role"], content="x" * m["chars"], id=m["id"]) for m in entry["messages"]
    ]


@pytest.mark.parametrize(
    "entry", PLANNER, ids=[f"{i}:{e['desc'][:40]}" for i, e in enumerate(PLANNER)]
)
def test_planner_vector(entry: dict[str, Any]) -> None:
    messages = _messages(entry)
    options = entry["options"]
    expected = entry["result"]
    call = lambda: plan_sliding_window(  # noqa: E731
        messages,
        tokens=LettaEstimator(),
        context_window=options.get("contextWindow"),
        percentage=options.get("slidingWindowPercentage"),
    )
    if "error" in expected:
        assert expected["error"] == "LocalSlidingWindowCompactionPlanningError"
        with pytest.raises(PlanningError) as err:
            call()
        assert str(err.value) == expected["message"]
    else:
        plan = call()
        assert plan.cutoff == expected["cutoffIndex"]
        assert [m.id for m in plan.summarize] == expected["summarize"]
        assert [m.id for m in plan.keep] == expected["keep"]
    if "allPlanKeep" in entry:
        assert [m.id for m in plan_all(messages).keep] == entry["allPlanKeep"]


def test_planner_vectors_cover_both_outcomes() -> None:
    assert len(PLANNER) == 161
    assert sum("error" in e["result"] for e in PLANNER) == 48


def _with_usage(raw: dict[str, Any]) -> Message:
    """letta keeps provider usage on the assistant message; precis keeps it in metadata."""
    message = letta_to_message(raw)
    usage = raw.get("usage")
    if not usage:
        return message
    reported = {
        "total_tokens": usage.get("totalTokens", 0),
        "prompt_tokens": usage.get("input", 0),
        "completion_tokens": usage.get("output", 0),
        "cache_read_tokens": usage.get("cacheRead", 0),
        "cache_write_tokens": usage.get("cacheWrite", 0),
    }
    return replace(message, metadata={**message.metadata, "usage": reported})


@pytest.mark.parametrize("entry", vectors()["estimate"], ids=lambda e: e["desc"][:50])
def test_estimate_vector(entry: dict[str, Any]) -> None:
    messages = [_with_usage(m) for m in entry["messagesRaw"]]
    counter = LettaEstimator()
    if "contextEstimate" in entry:
        got = estimate_context(messages, counter)
        want = entry["contextEstimate"]
        assert (got.tokens, got.usage_tokens, got.trailing_tokens, got.last_usage_index) == (
            want["tokens"],
            want["usageTokens"],
            want["trailingTokens"],
            want["lastUsageIndex"],
        )
    else:
        assert [counter.count(m) for m in messages] == entry["perMessage"]
        assert sum(counter.count(m) for m in messages) == entry["tokens"]


@pytest.mark.parametrize("entry", vectors()["threshold"], ids=lambda e: str(e["contextWindow"]))
def test_threshold_vector(entry: dict[str, Any]) -> None:
    assert letta_threshold(entry["contextWindow"]) == entry.get("threshold")
