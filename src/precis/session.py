"""One conversation as an agent loop sees it: append, prompt, compact when due, recall."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from precis.compactor import CompactionResult, CompactionStats, Compactor, Mode, Trigger
from precis.messages import InvalidMessage, Message
from precis.policy import CompactionSettings
from precis.stores.base import CompactionEvent, ConversationStore, RecallHit
from precis.summarize.base import Summarizer
from precis.summarize.extractive import ExtractiveSummarizer
from precis.tokens import TokenCounter, default_counter, estimate_context

SystemPromptCompiler = Callable[[str, list[Message]], str]


def _keep_prompt(text: str, context: list[Message]) -> str:
    return text


class Session:
    """A conversation in a store, with the counter, summarizer and settings that govern it.

    Sync where it only touches the store; async where it may call a model (`compact`).
    """

    def __init__(
        self,
        store: ConversationStore,
        conversation_id: str,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        settings: CompactionSettings | None = None,
        *,
        compile_system_prompt: SystemPromptCompiler = _keep_prompt,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.counter: TokenCounter = counter or default_counter()
        self.settings = settings or CompactionSettings()
        self.compactor = Compactor(
            store, self.counter, summarizer or ExtractiveSummarizer(), self.settings
        )
        self._compile = compile_system_prompt
        self.tools: list[Mapping[str, Any]] = list(tools)
        store.create(conversation_id)

    def append(self, *items: Message | Mapping[str, Any]) -> list[Message]:
        """Append messages (precis `Message`s or OpenAI dicts) in one transaction."""
        messages = [
            item if isinstance(item, Message) else Message.from_openai(item, index=i)
            for i, item in enumerate(items)
        ]
        known = {tc.id for m in self.context() for tc in m.tool_calls}
        for i, m in enumerate(messages):
            if m.role == "tool" and m.tool_call_id not in known:
                raise InvalidMessage(i, f"tool result for unknown tool_call_id {m.tool_call_id!r}")
            known.update(tc.id for tc in m.tool_calls)
        return self.store.append(self.conversation_id, messages)

    def set_system_prompt(self, text: str) -> None:
        self.store.set_system_prompt(self.conversation_id, text)

    def context(self) -> list[Message]:
        return self.store.context(self.conversation_id).messages

    def system_prompt(self) -> str:
        """The system prompt, recompiled first if a compaction made it stale."""
        text, stale = self.store.system_prompt(self.conversation_id)
        if stale:
            text = self._compile(text, self.context())
            self.store.set_system_prompt(self.conversation_id, text)
        return text

    def prompt(self) -> list[dict[str, Any]]:
        """What to send: system prompt (stable prefix), pinned items, the summary, the rest."""
        context = self.context()
        ordered = [m for m in context if m.pinned] + [m for m in context if not m.pinned]
        system = self.system_prompt()
        head = [{"role": "system", "content": system}] if system else []
        return head + [m.to_openai() for m in ordered]

    def floor_tokens(self) -> int:
        """What every request carries besides the messages: system prompt and tool definitions."""
        text, _ = self.store.system_prompt(self.conversation_id)
        system = self.counter.count_text(text) if text else 0
        tools = self.counter.count_text(json.dumps(self.tools)) if self.tools else 0
        return system + tools

    def tokens(self) -> int:
        """Tokens the next request will carry: reported usage anchors the estimate."""
        estimate = estimate_context(self.context(), self.counter)
        if estimate.last_usage_index is not None:
            return estimate.tokens  # the reported usage already counted system prompt and tools
        return estimate.tokens + self.floor_tokens()

    def needs_compaction(self) -> bool:
        threshold = self.settings.threshold
        return threshold is not None and self.tokens() > threshold

    async def compact(
        self,
        mode: Mode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
    ) -> CompactionStats:
        result = await self.compact_result(mode, trigger=trigger, instructions=instructions)
        return result.stats

    async def compact_result(
        self,
        mode: Mode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
    ) -> CompactionResult:
        return await self.compactor.compact(
            self.conversation_id,
            trigger,
            mode,
            instructions=instructions,
            floor_tokens=self.floor_tokens(),
        )

    async def maybe_compact(
        self, trigger: Trigger = "context_window_limit"
    ) -> CompactionStats | None:
        """Compact when the context is over the threshold (strictly), else do nothing."""
        if not self.needs_compaction():
            return None
        return await self.compact(trigger=trigger)

    def compact_sync(self, mode: Mode | None = None, **kw: Any) -> CompactionStats:
        return asyncio.run(self.compact(mode, **kw))

    def recall(self, query: str, limit: int = 10) -> list[RecallHit]:
        return self.store.recall(self.conversation_id, query, limit)

    def history(self) -> list[Message]:
        return self.store.history(self.conversation_id)

    def events(self) -> list[CompactionEvent]:
        return self.store.events(self.conversation_id)


async def compact_messages(
    messages: Iterable[Mapping[str, Any]],
    *,
    context_window: int,
    summarizer: Summarizer | None = None,
    settings: CompactionSettings | None = None,
    counter: TokenCounter | None = None,
    mode: Mode | None = None,
) -> tuple[list[dict[str, Any]], CompactionStats]:
    """Compact a plain OpenAI message list once; returns the new list and what happened."""
    from dataclasses import replace

    from precis.stores.memory import MemoryStore

    base = settings or CompactionSettings()
    session = Session(
        MemoryStore(),
        "messages",
        counter,
        summarizer,
        replace(base, context_window=context_window),
    )
    items = list(messages)
    first = items[0] if items else {}
    if first.get("role") == "system" and isinstance(first.get("content"), str):
        session.set_system_prompt(first["content"])
        items = items[1:]
    session.append(*items)
    stats = await session.compact(mode)
    return session.prompt(), stats


def compact_messages_sync(
    messages: Iterable[Mapping[str, Any]], *, context_window: int, **kw: Any
) -> tuple[list[dict[str, Any]], CompactionStats]:
    """`compact_messages` for code without an event loop."""
    return asyncio.run(compact_messages(messages, context_window=context_window, **kw))
