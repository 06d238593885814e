"""The pure summarization parts: letta's conformance vectors, the overflow ladder and the clip."""

from __future__ import annotations

from typing import Any

import pytest
from conformance import vectors
from hypothesis import given
from hypothesis import strategies as st
from letta_shape import letta_to_message, letta_to_messages

from precis.core.errors import ContextOverflow, SummarizerError
from precis.core.jscompat import js_json_stringify, utf16_len
from precis.core.messages import Message, ToolCall
from precis.providers.overflow import is_context_overflow, is_letta_context_overflow
from precis.summarize import (
    ALL_PROMPT,
    LADDER_STEPS,
    NO_MESSAGES_SUMMARY,
    SLIDING_WINDOW_PROMPT,
    SUMMARY_TRUNCATION_SUFFIX,
    clip_summary,
    default_clip_chars,
    middle_truncate,
    package_summary,
    render_transcript,
    summarize_with_ladder,
)

VECTORS: dict[str, Any] = vectors()
FIXED_TIME = "2026-01-01T00:00:00.000Z"


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("desc", i)) for i, e in enumerate(entries)]


# --- conformance vectors ---------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS["format"], ids=_ids(VECTORS["format"]))
def test_format_vector(vector: dict[str, Any]) -> None:
    options = vector["options"]
    messages = letta_to_messages(vector["messagesRaw"])
    transcript = render_transcript(
        messages,
        tool_result_chars=options.get("truncationChars", 2000),
        max_chars=options.get("maxChars"),
    )
    assert transcript == vector["transcript"]


@pytest.mark.parametrize("vector", VECTORS["middle"])
def test_middle_vector(vector: dict[str, Any]) -> None:
    assert middle_truncate(vector["text"], vector["budgetChars"]) == vector["result"]


@pytest.mark.parametrize("vector", VECTORS["package"])
def test_package_vector(vector: dict[str, Any]) -> None:
    packed = package_summary(
        vector["summary"], vector.get("stats"), vector.get("mode"), time=FIXED_TIME
    )
    assert packed == vector["packed"]


@pytest.mark.property
@given(st.text(st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)))
def test_package_is_the_stringified_alert(summary: str) -> None:
    message = (
        "Note: prior messages have been hidden from view due to conversation memory constraints."
        f"\nThe following is a summary of the previous messages:\n {summary}"
    )
    alert = {"type": "system_alert", "message": message, "time": summary[:9]}
    assert package_summary(summary, None, None, time=summary[:9]) == js_json_stringify(alert)


@pytest.mark.parametrize("vector", VECTORS["overflow"], ids=_ids(VECTORS["overflow"]))
def test_overflow_vector_letta(vector: dict[str, Any]) -> None:
    assert is_letta_context_overflow(vector["message"]) is vector["isContextWindowOverflowError"]


@pytest.mark.parametrize("vector", VECTORS["overflow"], ids=_ids(VECTORS["overflow"]))
def test_overflow_vector_precis(vector: dict[str, Any]) -> None:
    # precis agrees with letta except on llama.cpp's wording, which letta misses.
    expected = vector["isContextWindowOverflowError"] or (
        "exceeds the available context size" in vector["message"]
    )
    assert is_context_overflow(vector["message"]) is expected


def test_llama_cpp_overflow_is_precis_only() -> None:
    message = "exceeds the available context size"
    assert not is_letta_context_overflow(message)
    assert is_context_overflow(message)


# --- overflow recognition beyond the vectors ---------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "the request exceeds the available context size, try increasing it",
        "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens",
        "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096.",
        "prompt too long; exceeded max context length by 120 tokens",
        "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000",
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    ],
)
def test_server_overflow_phrasings(message: str) -> None:
    assert is_context_overflow(message)


@pytest.mark.parametrize(
    "message",
    [
        "rate limit exceeded",
        "Too many requests: too many tokens per minute",
        "Rate limit reached: too many tokens in the last minute",
        "internal server error",
    ],
)
def test_not_overflow(message: str) -> None:
    assert not is_context_overflow(message)


class _FakeApiError(Exception):
    def __init__(self, text: str, body: Any) -> None:
        super().__init__(text)
        self.body = body


def test_overflow_found_in_exception_body_and_cause() -> None:
    body_error = _FakeApiError("Error code: 400", {"error": {"code": "context_length_exceeded"}})
    assert is_context_overflow(body_error)
    try:
        try:
            raise ValueError("the request exceeds the available context size")
        except ValueError as inner:
            raise RuntimeError("summarizer call failed") from inner
    except RuntimeError as outer:
        assert is_context_overflow(outer)
    assert is_context_overflow(ContextOverflow("no words at all"))
    assert not is_context_overflow(RuntimeError("connection reset"))


# --- the ladder --------------------------------------------------------------------------------


class ScriptedModel:
    """A fake summarizer that answers from a script and records every transcript it was sent."""

    def __init__(self, *script: str | BaseException) -> None:
        self.script = list(script)
        self.transcripts: list[str] = []
        self.prompts: list[str] = []

    def __call__(self, system_prompt: str, transcript: str) -> str:
        self.prompts.append(system_prompt)
        self.transcripts.append(transcript)
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step


def _long_history(chars: int) -> list[Message]:
    return [Message(role="user", content="x" * chars), Message(role="assistant", content="ok")]


def test_ladder_succeeds_at_second_step() -> None:
    messages = _long_history(200_000)
    model = ScriptedModel(ContextOverflow("too big"), ContextOverflow("still too big"), "summary")
    answer = summarize_with_ladder(model, messages, prompt=SLIDING_WINDOW_PROMPT)
    assert answer == "summary"
    full = render_transcript(messages)
    assert model.transcripts == [
        full,
        middle_truncate(full, 120000),
        middle_truncate(full, 90000),
    ]
    assert model.prompts == [SLIDING_WINDOW_PROMPT] * 3
    assert "[TRUNCATED: dropped" in model.transcripts[2]


def test_ladder_recognises_provider_wording() -> None:
    model = ScriptedModel(RuntimeError("prompt is too long: 300000 tokens > 200000"), "s")
    answer = summarize_with_ladder(model, _long_history(150_000), prompt=ALL_PROMPT)
    assert answer == "s"
    assert len(model.transcripts) == 2


def test_ladder_skips_unchanged_steps_and_reraises() -> None:
    messages = [Message(role="user", content="short"), Message(role="assistant", content="ok")]
    last = ContextOverflow("the model says no")
    model = ScriptedModel(last)
    with pytest.raises(ContextOverflow) as caught:
        summarize_with_ladder(model, messages, prompt=SLIDING_WINDOW_PROMPT)
    assert caught.value is last
    assert model.transcripts == [render_transcript(messages)]


def test_ladder_skips_only_the_unchanged_steps() -> None:
    # 30000 chars: the 120000..40000 steps leave it whole, 25000 is the first real cut.
    messages = _long_history(30_000)
    errors = [ContextOverflow(f"overflow {i}") for i in range(len(LADDER_STEPS) + 1)]
    model = ScriptedModel(*errors)
    with pytest.raises(ContextOverflow) as caught:
        summarize_with_ladder(model, messages, prompt=SLIDING_WINDOW_PROMPT)
    full = render_transcript(messages)
    expected = [full] + [middle_truncate(full, step) for step in LADDER_STEPS if step < 30_000]
    assert model.transcripts == expected
    assert caught.value is errors[len(expected) - 1]


def test_ladder_non_overflow_error_propagates_at_once() -> None:
    model = ScriptedModel(ConnectionError("server went away"), "never reached")
    with pytest.raises(ConnectionError):
        summarize_with_ladder(model, _long_history(200_000), prompt=SLIDING_WINDOW_PROMPT)
    assert len(model.transcripts) == 1


def test_ladder_non_overflow_error_during_fallback_propagates() -> None:
    model = ScriptedModel(ContextOverflow("big"), ValueError("bad request"), "never reached")
    with pytest.raises(ValueError, match="bad request"):
        summarize_with_ladder(model, _long_history(200_000), prompt=SLIDING_WINDOW_PROMPT)
    assert len(model.transcripts) == 2


def test_ladder_no_messages_needs_no_model() -> None:
    model = ScriptedModel()
    assert summarize_with_ladder(model, [], prompt=ALL_PROMPT) == NO_MESSAGES_SUMMARY
    assert model.transcripts == []


def test_ladder_blank_answer_is_an_error() -> None:
    model = ScriptedModel("  \n ")
    with pytest.raises(SummarizerError):
        summarize_with_ladder(model, _long_history(10), prompt=ALL_PROMPT)


def test_ladder_passes_tool_result_chars() -> None:
    messages = [
        Message(role="assistant", tool_calls=(ToolCall("c1", "Read", "{}"),)),
        Message(role="tool", tool_call_id="c1", content="y" * 50),
    ]
    model = ScriptedModel("s")
    summarize_with_ladder(model, messages, prompt=ALL_PROMPT, tool_result_chars=10)
    assert "[tool] yyyyyyyyyy... [truncated 40 chars]" in model.transcripts[0]


# --- clip --------------------------------------------------------------------------------------


def test_clip_strips_and_leaves_short_summaries() -> None:
    assert clip_summary("  \n summary \t", 100) == "summary"
    assert clip_summary("x" * 100, None) == "x" * 100
    assert clip_summary("x" * 10, 10) == "x" * 10


def test_clip_cuts_and_marks() -> None:
    assert clip_summary("abcdefghij", 4) == "abcd" + SUMMARY_TRUNCATION_SUFFIX


def test_clip_counts_utf16_units() -> None:
    # "😀" is two UTF-16 units: four of them are eight units, over a clip of 6.
    assert clip_summary("😀😀😀😀", 6) == "😀😀😀" + SUMMARY_TRUNCATION_SUFFIX
    assert clip_summary("😀😀😀", 6) == "😀😀😀"


def test_clip_never_splits_an_emoji() -> None:
    # The clip point (5 units) falls between the two halves of the third emoji.
    clipped = clip_summary("ab😀c😀de", 5)
    assert clipped == "ab😀c" + SUMMARY_TRUNCATION_SUFFIX
    clipped = clip_summary("abcd😀e", 5)
    assert clipped == "abcd" + SUMMARY_TRUNCATION_SUFFIX
    assert "\ufffd" not in clipped
    assert utf16_len(clipped) <= 5 + utf16_len(SUMMARY_TRUNCATION_SUFFIX)


def test_clip_keeps_a_genuine_replacement_character() -> None:
    assert clip_summary("abc\ufffdef", 4) == "abc\ufffd" + SUMMARY_TRUNCATION_SUFFIX


def test_clip_uses_javascript_trim() -> None:
    # U+FEFF is trimmed by JavaScript but not by str.strip; U+001C the other way round.
    assert clip_summary("\ufeffsummary\ufeff", None) == "summary"
    assert clip_summary("\x1csummary", None) == "\x1csummary"


def test_default_clip_chars() -> None:
    assert default_clip_chars(None) == 50000
    assert default_clip_chars(128_000) == 51200
    assert default_clip_chars(8192) == 3276
    assert default_clip_chars(100) == 200


# --- transcript details beyond the vectors -----------------------------------------------------


def test_our_summary_metadata_is_rendered_raw() -> None:
    summary = Message(
        role="user",
        content='{"type":"system_alert","message":"..."}',
        kind="summary",
        metadata={"summary": "earlier work on parser.py"},
    )
    assert render_transcript([summary]) == (
        " \n[user] earlier work on parser.py\n \n. Generate the summary."
    )


def test_tool_result_parts_join_with_single_newline() -> None:
    raw = {
        "id": "t",
        "role": "toolResult",
        "toolCallId": "c1",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "text", "text": "b"},
            {"type": "image"},
        ],
    }
    assert render_transcript([letta_to_message(raw)]) == (
        " \n[tool] a\nb [Image omitted]\n \n. Generate the summary."
    )


def test_converter_keeps_letta_fields() -> None:
    raw = {
        "id": "a1",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "t1"},
            {"type": "thinking", "thinking": "t2"},
            {"type": "text", "text": "one"},
            {"type": "text", "text": "two"},
            {"type": "toolCall", "id": "c1", "name": "A", "arguments": '{"x": 1}'},
            {"type": "toolCall", "id": "c2", "name": "B", "arguments": {"ü": "ß"}},
        ],
        "usage": {"totalTokens": 5},
        "stopReason": "stop",
    }
    message = letta_to_message(raw)
    assert message.id == "a1"
    assert message.reasoning == "t1\n\nt2"
    assert message.text_parts == ("one", "two")
    assert message.content == "one\n\ntwo"
    assert message.tool_calls == (ToolCall("c1", "A", '{"x": 1}'), ToolCall("c2", "B", '{"ü":"ß"}'))
    assert message.metadata["letta"] == {
        "usage": {"totalTokens": 5},
        "stopReason": "stop",
        "string_argument_call_ids": ["c1"],
    }


def test_prompts_are_distinct_and_bounded() -> None:
    assert "300 words" in SLIDING_WINDOW_PROMPT
    assert "500 words" in ALL_PROMPT
    assert "Next step" in ALL_PROMPT and "Next step" not in SLIDING_WINDOW_PROMPT
    assert "Lookup hints" in SLIDING_WINDOW_PROMPT
