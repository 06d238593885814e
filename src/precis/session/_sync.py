"""`Session`: one conversation, driven with plain calls — for scripts, CLIs and threads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from precis.core.messages import Message
from precis.core.tokens import TokenCounter
from precis.core.types import CompactionMode, Trigger
from precis.engine.results import CompactionResult, CompactionStats
from precis.engine.settings import CompactionSettings
from precis.session._base import BaseSession
from precis.session._io import drive
from precis.stores.base import CompactionEvent, RecallHit
from precis.stores.memory import MemoryStore
from precis.summarize.base import Summarizer


class Session(BaseSession):
    """A conversation in a store whose every call blocks until done (see `AsyncSession`)."""

    def _opened(self) -> None:
        drive(self._ensure_steps())

    def append(
        self, *items: Message | Mapping[str, Any], idempotency_key: str | None = None
    ) -> list[Message]:
        """Append messages (precis `Message`s or OpenAI dicts) in one transaction.

        With `pin_task`, the first user message becomes the pinned task unless one is set.
        With `idempotency_key`, a retry of an append that was stored (the same key and
        messages) stores nothing and returns what the first stored."""
        return drive(self._append_steps(items, idempotency_key))

    def set_task(self, text: str) -> Message:
        """State the task: a pinned user message the context always keeps, verbatim."""
        return drive(self._set_task_steps(text))

    def task(self) -> str | None:
        """The task text: the message `set_task` wrote, or the first user message."""
        return drive(self._task_steps())

    def pin(self, message_id: str, pinned: bool = True) -> None:
        """Pin a message in context: never evicted, truncated or summarized from now on."""
        return drive(self._pin_steps(message_id, pinned))

    def unpin(self, message_id: str) -> None:
        """Let a pinned message be compacted again."""
        return drive(self._pin_steps(message_id, False))

    def set_system_prompt(self, text: str) -> None:
        """Replace the system prompt (the stable, cacheable head of every request)."""
        return drive(self._set_system_prompt_steps(text))

    def system_prompt(self) -> str:
        """The system prompt, recompiled first if a compaction made it stale."""
        return drive(self._system_prompt_steps())

    def context(self) -> list[Message]:
        """The messages in context, in stored order."""
        return drive(self._context_steps())

    def view(self) -> list[Message]:
        """The context as the model sees it: pinned items first, then the rest in order."""
        return drive(self._view_steps())

    def prompt(self) -> list[dict[str, Any]]:
        """What to send: system prompt (stable prefix), pinned items, the summary, the rest."""
        return drive(self._prompt_steps())

    def floor_tokens(self) -> int:
        """What every request carries besides the messages: system prompt and tool definitions."""
        return drive(self._floor_tokens_steps())

    def tokens(self) -> int:
        """Tokens the next request will carry: reported usage anchors the estimate."""
        return drive(self._tokens_steps())

    def needs_compaction(self) -> bool:
        """Whether the context is over the threshold (strict >)."""
        return drive(self._needs_compaction_steps())

    def turns_since_compaction(self) -> int:
        """User turns appended since the last compaction (or since the start)."""
        return drive(self._turns_since_compaction_steps())

    def compact_result(
        self,
        mode: CompactionMode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
        phase: str | None = None,
    ) -> CompactionResult:
        """Compact once: the stats, the summary and the new context; nothing changes on failure."""
        return drive(self._compact_steps(mode, trigger, instructions, phase))

    def compact(
        self,
        mode: CompactionMode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
        phase: str | None = None,
    ) -> CompactionStats:
        """Compact once and return what it did."""
        return (drive(self._compact_steps(mode, trigger, instructions, phase))).stats

    def complete_phase(self, name: str) -> CompactionStats:
        """A sub-goal is done: compact at this natural break and record the phase."""
        return (drive(self._compact_steps(None, "phase_complete", None, name))).stats

    def maybe_compact(self) -> list[CompactionStats]:
        """Compact when a trigger fires; returns what ran (usually nothing)."""
        return drive(self._maybe_compact_steps())

    def absorb(self, child: BaseSession, tool_call_id: str) -> Message:
        """A sub-agent's work returned as its brief only (S3): the result of call `tool_call_id`."""
        return drive(self._absorb_steps(child, tool_call_id))

    def recall(self, query: str, limit: int = 10) -> list[RecallHit]:
        """Search every original message, compacted away or not; best first."""
        return drive(self._recall_steps(query, limit))

    def history(self) -> list[Message]:
        """Every message ever appended, in order."""
        return drive(self._history_steps())

    def events(self) -> list[CompactionEvent]:
        """The compactions so far, oldest first."""
        return drive(self._events_steps())


def compact_messages(
    messages: Iterable[Mapping[str, Any]],
    *,
    context_window: int,
    summarizer: Summarizer | None = None,
    settings: CompactionSettings | None = None,
    counter: TokenCounter | None = None,
    mode: CompactionMode | None = None,
) -> tuple[list[dict[str, Any]], CompactionStats]:
    """Compact a plain OpenAI message list once; returns the new list and what happened."""
    base = replace(settings or CompactionSettings(), context_window=context_window)
    session = Session(MemoryStore(), "messages", counter, summarizer, base)
    return drive(session._compact_list_steps(messages, mode))
