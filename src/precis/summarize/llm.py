"""The model-backed summarizer: our prompts, the overflow ladder, retries on blank answers."""

from __future__ import annotations

from precis.errors import SummarizerError
from precis.providers.base import ChatProvider
from precis.summarize.base import SummaryRequest
from precis.summarize.overflow import summarize_with_ladder
from precis.summarize.prompts import ALL_PROMPT, SLIDING_WINDOW_PROMPT
from precis.summarize.transcript import DEFAULT_TOOL_RESULT_CHARS


class LLMSummarizer:
    """Summarizes with a chat model, which may be a different one than the agent's."""

    def __init__(
        self,
        provider: ChatProvider,
        *,
        prompt: str | None = None,
        tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
        blank_retries: int = 2,
    ) -> None:
        self._provider = provider
        self._prompt = prompt
        self._tool_result_chars = tool_result_chars
        self._blank_retries = blank_retries

    @property
    def name(self) -> str:
        return "llm"

    async def summarize(self, request: SummaryRequest) -> str:
        prompt = request.instructions or self._prompt
        if prompt is None:
            prompt = ALL_PROMPT if request.mode == "all" else SLIDING_WINDOW_PROMPT

        async def call(system: str, transcript: str) -> str:
            reply = await self._provider.complete(
                [{"role": "system", "content": system}, {"role": "user", "content": transcript}]
            )
            return reply.text

        for attempt in range(self._blank_retries + 1):
            try:
                return await summarize_with_ladder(
                    call,
                    request.messages,
                    prompt=prompt,
                    tool_result_chars=self._tool_result_chars,
                )
            except SummarizerError:
                if attempt == self._blank_retries:
                    raise
        raise AssertionError("unreachable")
