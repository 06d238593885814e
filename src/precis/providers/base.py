"""What precis needs from a chat model: messages in, one reply and its usage out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Completion:
    """One model reply: the assistant message (OpenAI format) and the usage the server reported."""

    message: Mapping[str, Any]
    usage: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        content = self.message.get("content")
        return content if isinstance(content, str) else ""


class ChatProvider(Protocol):
    """A chat-completions model, called from plain code (`complete`) or a loop (`acomplete`).

    A context overflow is raised as `ContextOverflow`; `timeout` bounds one call in seconds.
    """

    @property
    def context_window(self) -> int | None: ...

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion: ...

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion: ...


def fold_system_into_user(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For chat templates that drop the system role (Gemma): prefix it to the first user turn."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    for m in rest:
        if m.get("role") == "user":
            m["content"] = f"{system}\n\n{m.get('content') or ''}"
            return rest
    return [{"role": "user", "content": system}, *rest]
