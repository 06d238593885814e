"""Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, llama.cpp's server) through the SDK."""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any

from precis.core.errors import ContextOverflow, ModelError, ModelTimeout, UpstreamError
from precis.providers.base import Completion, fold_system_into_user
from precis.providers.overflow import is_context_overflow

# Where the SDK sends requests when no base URL is given.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The SDK insists on a key; local servers ignore it.
LOCAL_PLACEHOLDER_KEY = "not-needed"
# Where the SDK finds a key when none is passed.
API_KEY_VARIABLES = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY")


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
        async_client: Any = None,
    ) -> None:
        self._injected = client
        self._injected_async = async_client
        self._client: Any = None
        self._aclient: Any = None
        self._aclient_loop: asyncio.AbstractEventLoop | None = None
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

    def _sync_client(self) -> Any:
        """One blocking SDK client, made on first use."""
        if self._injected is not None:
            return self._injected
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(**self._client_options_checked())
        return self._client

    def _async_client(self) -> Any:
        """One async SDK client per event loop: its connection pool dies with the loop."""
        if self._injected_async is not None:
            return self._injected_async
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aclient_loop is not loop:
            from openai import AsyncOpenAI

            self._aclient = AsyncOpenAI(**self._client_options_checked())
            self._aclient_loop = loop
        return self._aclient

    def _client_options_checked(self) -> dict[str, Any]:
        """The SDK client's options, refused in one line when the SDK would find no key."""
        options = self._client_options
        if options["api_key"] is None and not any(os.environ.get(v) for v in API_KEY_VARIABLES):
            raise ModelError(
                f"{self.upstream}: no API key (set OPENAI_API_KEY, or give a base URL for a "
                "server that needs none)"
            )
        return options

    def _request(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        timeout: float | None,
    ) -> dict[str, Any]:
        """The create() arguments, the same for both clients."""
        options: dict[str, Any] = {
            "model": self.model,
            "messages": fold_system_into_user(messages) if self._fold_system else list(messages),
        }
        if tools:
            options["tools"] = list(tools)
        if self._max_tokens is not None:
            options["max_tokens"] = self._max_tokens
        if self._temperature is not None:
            options["temperature"] = self._temperature
        if timeout is not None:
            options["timeout"] = timeout
        return options

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        request = self._request(messages, tools, timeout)
        try:
            raw = self._sync_client().chat.completions.with_raw_response.create(**request)
            response = raw.parse()
        except ModelError:
            raise
        except Exception as error:
            raise self._classified(error, timeout) from error
        return self._completion(raw, response)

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        request = self._request(messages, tools, timeout)
        try:
            raw = await self._async_client().chat.completions.with_raw_response.create(**request)
            response = raw.parse()
            if inspect.isawaitable(response):  # the SDK says parse() will become a coroutine
                response = await response
        except ModelError:
            raise
        except Exception as error:
            raise self._classified(error, timeout) from error
        return self._completion(raw, response)

    @property
    def upstream(self) -> str:
        """The model and the server it runs on, as an error message names them."""
        return f"model {self.model!r} at {self._client_options['base_url'] or DEFAULT_BASE_URL}"

    def _classified(self, error: Exception, timeout: float | None) -> Exception:
        """The SDK's error as precis's: overflow, timeout, or the server's failure in one line."""
        import openai

        if is_context_overflow(error):
            return ContextOverflow(str(error))
        if isinstance(error, openai.APITimeoutError):
            limit = timeout if timeout is not None else self._client_options["timeout"]
            return ModelTimeout(f"{self.upstream}: no answer within {limit:g}s")
        if isinstance(error, openai.APIStatusError):
            return UpstreamError(self.upstream, _status_reason(error), error.status_code)
        if isinstance(error, openai.APIConnectionError):
            cause = error.__cause__ or error
            return UpstreamError(self.upstream, f"cannot connect ({_one_line(str(cause))})")
        if isinstance(error, openai.APIError | ValueError):
            return UpstreamError(self.upstream, f"unusable answer ({_one_line(str(error))})")
        if isinstance(error, openai.OpenAIError):  # the SDK refused its own options
            return ModelError(f"{self.upstream}: {_one_line(str(error))}")
        return error

    def _completion(self, raw: Any, response: Any) -> Completion:
        """The reply in the OpenAI message format, with the usage the server reported."""
        if isinstance(response, str):  # the SDK hands back the text of a body that is not JSON
            kind = raw.headers.get("content-type", "no content type").split(";")[0].strip()
            raise UpstreamError(
                self.upstream,
                f"answered with {kind or 'no content type'}, not JSON",
                raw.status_code,
            )
        if not response.choices:
            raise UpstreamError(self.upstream, "the answer has no choices")
        message = response.choices[0].message.model_dump(exclude_none=True)
        reply: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            reply["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": c["function"]}
                for c in message["tool_calls"]
            ]
        usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
        return Completion(reply, usage)


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _status_reason(error: Any) -> str:
    """The server's own words for a failed request, else the SDK's."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        detail = body.get("error", body)
        message = detail.get("message") if isinstance(detail, dict) else detail
        if message:
            return _one_line(str(message))
    return _one_line(str(getattr(error, "message", error)))
