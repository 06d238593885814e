"""A deterministic chat model with no network, so the CLI, demo and tests run without a key."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from precis.core.errors import ContextOverflow
from precis.providers.base import Completion

# Characters of the last user message echoed back in the default reply.
ECHO_CHARS = 60
# Tokens charged per message for role and separators, as chat formats do.
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_text_tokens(text: str) -> int:
    """The chars/4 estimate: crude, but stable, so usage figures are reproducible."""
    return math.ceil(len(text) / 4)


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens a request carries by the chars/4 estimate, content and tool calls included."""
    total = 0
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            text += str(function.get("name", "")) + str(function.get("arguments", ""))
        total += estimate_text_tokens(text) + MESSAGE_OVERHEAD_TOKENS
    return total


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            return content
    return ""


class MockProvider:
    """Acknowledges the last user message and reports usage, so an agent loop can be exercised."""

    def __init__(self, context_window: int | None = None, *, reply: str | None = None) -> None:
        if context_window is not None and context_window <= 0:
            raise ValueError(f"context_window must be positive, got {context_window}")
        self._context_window = context_window
        self._reply = reply

    @property
    def context_window(self) -> int | None:
        return self._context_window

    def reply_for(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """The fixed reply if one was given, else "Noted: " and the start of the last user turn."""
        if self._reply is not None:
            return self._reply
        text = " ".join(_last_user_text(messages).split())
        head = text[:ECHO_CHARS] + ("…" if len(text) > ECHO_CHARS else "")
        return f"Noted: {head}" if head else "Noted."

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        """`complete`: it does no I/O, so it never blocks a loop."""
        return self.complete(messages, tools, timeout=timeout)

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        """Reply deterministically; raise `ContextOverflow` when the prompt exceeds the window."""
        prompt_tokens = estimate_prompt_tokens(messages)
        window = self._context_window
        if window is not None and prompt_tokens > window:
            raise ContextOverflow(
                f"prompt of ~{prompt_tokens} tokens exceeds the context window of {window}"
            )
        text = self.reply_for(messages)
        completion_tokens = estimate_text_tokens(text) + MESSAGE_OVERHEAD_TOKENS
        return Completion(
            message={"role": "assistant", "content": text},
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )
