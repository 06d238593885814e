"""How the model-backed summarizer treats what a model sends back: overflow, blank, success."""

from __future__ import annotations

from typing import Any

import pytest
from scripted import ScriptedProvider

from precis.core.errors import ContextOverflow, SummarizerError
from precis.core.messages import Message
from precis.summarize.base import SummaryRequest
from precis.summarize.llm import LLMSummarizer

SPAN = tuple(
    Message(role="user" if i % 2 == 0 else "assistant", content=f"message {i} " + "w" * 60_000)
    for i in range(4)
)


def run(summarizer: LLMSummarizer, **kw: Any) -> str:
    return summarizer.summarize(SummaryRequest(SPAN, **kw))


def test_overflow_climbs_the_ladder_then_succeeds() -> None:
    provider = ScriptedProvider(ContextOverflow("too big"), ContextOverflow("still"), "short")
    assert run(LLMSummarizer(provider)) == "short"
    sizes = [len(sent[1]["content"]) for sent in provider.sent]
    assert sizes[0] > 240_000 and sizes[1] <= 120_100 and sizes[2] <= 90_100


def test_llama_cpp_overflow_wording_is_recognised() -> None:
    err = RuntimeError("request (9000 tokens) exceeds the available context size (4096 tokens)")
    provider = ScriptedProvider(err, "ok")
    assert run(LLMSummarizer(provider)) == "ok"


def test_blank_answers_are_retried_then_raise() -> None:
    assert run(LLMSummarizer(ScriptedProvider("", "  ", "fine"))) == "fine"
    with pytest.raises(SummarizerError):
        run(LLMSummarizer(ScriptedProvider("", "", "")))


def test_other_errors_propagate_at_once() -> None:
    provider = ScriptedProvider(RuntimeError("401 unauthorized"), "never")
    with pytest.raises(RuntimeError, match="401"):
        run(LLMSummarizer(provider))
    assert len(provider.sent) == 1


def test_prompt_choice_and_custom_instructions() -> None:
    provider = ScriptedProvider("a", "b", "c")
    summarizer = LLMSummarizer(provider)
    run(summarizer)
    run(summarizer, mode="all")
    run(summarizer, mode="all", instructions="Only list ports.")
    sliding, everything, custom = (sent[0]["content"] for sent in provider.sent)
    # The two modes ask for different summaries; custom instructions replace the prompt whole.
    assert sliding != everything and len(sliding) > 200 and len(everything) > 200
    assert custom == "Only list ports."
    assert all(sent[0]["role"] == "system" for sent in provider.sent)
    assert all("message 0" in sent[1]["content"] for sent in provider.sent)
