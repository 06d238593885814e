"""Recognising a provider's "the request is too big" error, whatever the server's wording."""

from __future__ import annotations

import re
from collections.abc import Mapping

from precis.core.errors import ContextOverflow

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
