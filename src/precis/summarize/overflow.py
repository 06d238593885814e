"""Recognising context-overflow errors, and retrying the summarizer on ever shorter transcripts."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence

from precis.errors import ContextOverflow, SummarizerError
from precis.messages import Message
from precis.summarize.packaging import NO_MESSAGES_SUMMARY
from precis.summarize.transcript import (
    DEFAULT_TOOL_RESULT_CHARS,
    middle_truncate,
    render_transcript,
)

# letta-code's markers, matched as lowercase substrings of the error text.
LETTA_OVERFLOW_MARKERS: tuple[str, ...] = (
    "context_length_exceeded",
    "context window",
    "maximum context length",
    "max context length",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the context",
    "exceeded the context",
    "reduce the length",
    "request too large",
    "request_too_large",
    "model_context_window_exceeded",
)

# Phrasings letta misses, from servers precis is run against (matched on lowercase text).
_EXTRA_OVERFLOW_PATTERNS: tuple[str, ...] = (
    # llama.cpp server
    r"exceeds the available context size",
    r"exceed_context_size_error",
    # vLLM
    r"longer than the maximum model length",
    r"longer than the model'?s context length",
    # Hugging Face TGI
    r"tokens \+ `?max_new_tokens`? must be <=",
    # LM Studio
    r"greater than the context length",
    r"context length of only \d+",
    # Ollama, OpenAI-compatible gateways, LiteLLM
    r"prompt too long",
    r"context[_ ]length[_ ]exceeded",
    r"context ?window ?exceeded",
    r"context window exceeds limit",
    # Anthropic, Gemini, xAI, Mistral, DashScope and others
    r"exceed context limit",
    r"input token count.*exceeds the maximum",
    r"maximum prompt length is \d+",
    r"exceeds (?:the )?maximum allowed input length",
    r"exceeds the limit of \d+",
    r"exceeded model token limit",
    r"range of input length should be",
    r"prompt has [\d,]+ tokens?, but the configured context size is",
    r"request entity too large",
)

# A rate-limit message can mention tokens too; it is not a reason to shrink the transcript.
_NOT_OVERFLOW_PATTERNS: tuple[str, ...] = (r"rate[ _-]?limit", r"too many requests")

_OVERFLOW_RE = re.compile(
    "|".join([*(re.escape(m) for m in LETTA_OVERFLOW_MARKERS), *_EXTRA_OVERFLOW_PATTERNS])
)
_NOT_OVERFLOW_RE = re.compile("|".join(_NOT_OVERFLOW_PATTERNS))

# Attributes of SDK exceptions (OpenAI, Anthropic, httpx clients) holding the server's words.
_ERROR_TEXT_ATTRIBUTES = ("message", "body", "code", "error", "detail")
_MAX_DEPTH = 4

LADDER_STEPS: tuple[int, ...] = (120000, 90000, 60000, 40000, 25000, 15000, 10000, 6000, 4000, 2000)

SummaryCall = Callable[[str, str], Awaitable[str]]


def is_letta_context_overflow(message: str) -> bool:
    """letta-code's own verdict, kept so precis can reproduce letta's behaviour exactly."""
    haystack = message.lower()
    return any(marker in haystack for marker in LETTA_OVERFLOW_MARKERS)


def is_context_overflow(message_or_exception: object) -> bool:
    """Whether an error means "the request was too big", so a shorter retry can succeed."""
    for piece in _error_texts(message_or_exception):
        if isinstance(piece, ContextOverflow):
            return True
        text = str(piece).lower()
        if _OVERFLOW_RE.search(text) and not _NOT_OVERFLOW_RE.search(text):
            return True
    return False


def _error_texts(root: object) -> list[object]:
    """Every string (and ContextOverflow) reachable from an error, its causes and its body."""
    found: list[object] = []
    seen: set[int] = set()

    def visit(value: object, depth: int) -> None:
        if value is None or depth > _MAX_DEPTH or id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, str | ContextOverflow):
            found.append(value)
        elif isinstance(value, BaseException):
            found.append(type(value).__name__)
            found.append(str(value))
            for attribute in _ERROR_TEXT_ATTRIBUTES:
                visit(getattr(value, attribute, None), depth + 1)
            visit(value.__cause__, depth + 1)
            visit(value.__context__, depth + 1)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                visit(str(key), depth + 1)
                visit(item, depth + 1)
        elif isinstance(value, list | tuple):
            for item in value:
                visit(item, depth + 1)
        elif isinstance(value, int | float):
            found.append(str(value))

    visit(root, 0)
    return found


def _usable_answer(answer: object) -> str:
    if not isinstance(answer, str) or not answer.strip():
        raise SummarizerError("the summarizer returned an empty answer")
    return answer


async def summarize_with_ladder(
    call: SummaryCall,
    messages: Sequence[Message],
    *,
    prompt: str,
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
) -> str:
    """Ask for a summary, shrinking the transcript step by step while the model says it is too big.

    Returns the model's answer unchanged (the caller clips it); raises SummarizerError on a blank
    answer, any non-overflow error at once, and the last overflow error when every step overflowed.
    """
    if not messages:
        return NO_MESSAGES_SUMMARY
    full = render_transcript(messages, tool_result_chars=tool_result_chars)
    attempts = [full, *(middle_truncate(full, max_chars) for max_chars in LADDER_STEPS)]
    previous: str | None = None
    last_overflow: BaseException | None = None
    for transcript in attempts:
        if transcript == previous:
            continue
        previous = transcript
        try:
            answer = await call(prompt, transcript)
        except Exception as error:
            if not is_context_overflow(error):
                raise
            last_overflow = error
        else:
            return _usable_answer(answer)
    assert last_overflow is not None
    raise last_overflow
