"""The framework's own model as precis's summarizer, token counter and window.

Each integration turns its framework's chat call into two functions (OpenAI-format messages in,
the reply's text out: plain and awaited); `FrameworkSummarizer` runs precis's model summarizer
(its prompts, ladder and retries) over them, so no second client is configured. A framework
that counts tokens gives a `CallbackCounter`; one that knows the model's input window gives
it to `settings_for`, which fills it in or refuses settings that would let requests past it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from precis.core.errors import InvalidSetting, ModelError
from precis.core.messages import Message
from precis.engine.settings import CompactionSettings
from precis.providers.base import Completion
from precis.summarize.base import SummaryRequest
from precis.summarize.llm import LLMSummarizer

Chat = list[dict[str, Any]]
Ask = Callable[[Chat], str]
AsyncAsk = Callable[[Chat], Awaitable[str]]
# Messages whose counts a `CallbackCounter` keeps, at most (a stored message never changes).
COUNTS_KEPT = 65536


class _FrameworkProvider:
    """A chat provider over a framework's chat call, for precis's model summarizer."""

    def __init__(self, name: str, ask: Ask | None, aask: AsyncAsk, window: int | None) -> None:
        self.name = name
        self._ask = ask
        self._aask = aask
        self._window = window

    @property
    def context_window(self) -> int | None:
        return self._window

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        if self._ask is None:
            raise ModelError(f"summarizer {self.name!r}: the model is async only; use AsyncSession")
        return Completion({"role": "assistant", "content": self._ask([dict(m) for m in messages])})

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        text = await self._aask([dict(m) for m in messages])
        return Completion({"role": "assistant", "content": text})


class FrameworkSummarizer:
    """precis's model summarizer asking the framework's own model (the session bounds each
    summary by its timeout, as for any summarizer)."""

    def __init__(
        self, name: str, ask: Ask | None, aask: AsyncAsk, *, window: int | None = None
    ) -> None:
        self._name = name
        self._summarizer = LLMSummarizer(_FrameworkProvider(name, ask, aask, window))

    @property
    def name(self) -> str:
        return self._name

    def summarize(self, request: SummaryRequest) -> str:
        return self._summarizer.summarize(request)

    async def asummarize(self, request: SummaryRequest) -> str:
        return await self._summarizer.asummarize(request)


class CallbackCounter:
    """A token counter over the framework's own counting (`count_message`, `count_text`)."""

    def __init__(
        self, count_message: Callable[[Message], int], count_text: Callable[[str], int]
    ) -> None:
        self._count_message = count_message
        self._count_text = count_text
        self._counts: dict[tuple[str, int], int] = {}

    def count(self, message: Message) -> int:
        if not message.id:
            return self._count_message(message)
        key = (message.id, len(message.content))  # a view's shortened copy keeps the id
        known = self._counts.get(key)
        if known is None:
            if len(self._counts) >= COUNTS_KEPT:
                self._counts.clear()
            known = self._counts[key] = self._count_message(message)
        return known

    def count_text(self, text: str) -> int:
        return self._count_text(text) if text else 0


def settings_for(settings: CompactionSettings | None, window: int | None) -> CompactionSettings:
    """The settings with the model's input window when they set none; refused when they set a
    bigger one, which would let requests past what the model accepts."""
    settings = settings or CompactionSettings()
    if window is None:
        return settings
    if settings.context_window is None:
        return replace(settings, context_window=window)
    if settings.context_window > window:
        raise InvalidSetting(
            "context_window",
            f"{settings.context_window:,} is more than the model accepts ({window:,} input "
            "tokens); requests would exceed its window",
        )
    return settings
