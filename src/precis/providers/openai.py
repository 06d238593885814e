"""Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, llama.cpp's server) through the SDK."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from precis.core.errors import ContextOverflow
from precis.providers.base import Completion, fold_system_into_user
from precis.providers.overflow import is_context_overflow

# The SDK insists on a key; local servers ignore it.
LOCAL_PLACEHOLDER_KEY = "not-needed"


class OpenAIProvider:
    """Chat completions over the `openai` SDK; context-overflow errors become `ContextOverflow`.

    `fold_system` moves system text into the first user turn, for models whose chat template
    drops the system role (Gemma).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        context_window: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        timeout: float = 120.0,
        fold_system: bool = False,
        client: Any = None,
    ) -> None:
        self._injected = client
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._client_options: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key or (LOCAL_PLACEHOLDER_KEY if base_url else None),
            "timeout": timeout,
            "max_retries": 1,
        }
        self.model = model
        self._context_window = context_window
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._fold_system = fold_system

    @property
    def context_window(self) -> int | None:
        return self._context_window

    def _client_for_this_loop(self) -> Any:
        """One SDK client per event loop: its connection pool dies with the loop that made it."""
        if self._injected is not None:
            return self._injected
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(**self._client_options)
            self._client_loop = loop
        return self._client

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        options: dict[str, Any] = {}
        if tools:
            options["tools"] = list(tools)
        if self._max_tokens is not None:
            options["max_tokens"] = self._max_tokens
        if self._temperature is not None:
            options["temperature"] = self._temperature
        sent = fold_system_into_user(messages) if self._fold_system else list(messages)
        try:
            response = await self._client_for_this_loop().chat.completions.create(
                model=self.model, messages=sent, **options
            )
        except Exception as error:
            if is_context_overflow(error):
                raise ContextOverflow(str(error)) from error
            raise
        if not response.choices:
            raise RuntimeError(f"{self.model}: the server answered with no choices")
        message = response.choices[0].message.model_dump(exclude_none=True)
        reply: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            reply["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": c["function"]}
                for c in message["tool_calls"]
            ]
        usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
        return Completion(reply, usage)
