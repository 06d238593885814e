"""A scripted chat model, for tests about how precis treats what a model sends back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from precis.providers.base import Completion


class ScriptedProvider:
    """Plays back a script of answers, completions or errors; records what it was sent."""

    def __init__(self, *script: str | Completion | Exception) -> None:
        self.script = list(script)
        self.tools_sent: list[list[Mapping[str, Any]]] = []
        self.sent: list[list[Mapping[str, Any]]] = []
        self.timeouts: list[float | None] = []

    @property
    def context_window(self) -> int | None:
        return 4096

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        return self.complete(messages, tools, timeout=timeout)

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        self.timeouts.append(timeout)
        self.sent.append(list(messages))
        self.tools_sent.append(list(tools or ()))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        if isinstance(step, Completion):
            return step
        return Completion({"role": "assistant", "content": step}, {"total_tokens": 10})
