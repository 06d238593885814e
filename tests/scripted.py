"""A scripted chat model, for tests about how precis treats what a model sends back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from precis.providers.base import Completion


class ScriptedProvider:
    """Plays back a script of answers or errors; records what it was sent."""

    def __init__(self, *script: str | Exception) -> None:
        self.script = list(script)
        self.sent: list[list[Mapping[str, Any]]] = []

    @property
    def context_window(self) -> int | None:
        return 4096

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        self.sent.append(list(messages))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return Completion({"role": "assistant", "content": step}, {"total_tokens": 10})
