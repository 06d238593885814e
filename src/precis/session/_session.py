"""One conversation as an agent loop sees it: append, prompt, compact when due, recall."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from precis.core.errors import InvalidMessage
from precis.core.messages import KIND_MESSAGE, KIND_TASK, Message
from precis.core.tokens import TokenCounter, default_counter, estimate_context
from precis.core.types import CompactionMode, Trigger
from precis.engine.compactor import CompactionResult, CompactionStats, Compactor
from precis.engine.hooks import Hooks
from precis.engine.settings import CompactionSettings
from precis.engine.views import display_message, mask_observations
from precis.stores.base import CompactionEvent, ConversationStore, RecallHit
from precis.summarize.base import Summarizer, SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer

SystemPromptCompiler = Callable[[str, list[Message]], str]


def _keep_prompt(text: str, context: list[Message]) -> str:
    return text


def _task_message(context: Sequence[Message]) -> Message | None:
    """The pinned task in context: the newest one `set_task` wrote, else the first user's."""
    tasks = [m for m in context if m.pinned and m.metadata.get("task")]
    return tasks[-1] if tasks else None


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
        hooks: Hooks | None = None,
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.counter: TokenCounter = counter or default_counter()
        self.settings = settings or CompactionSettings()
        s = self.settings
        self.hooks = hooks or Hooks.from_commands(
            s.pre_compact_hooks, s.post_compact_hooks, s.hook_timeout
        )
        self.compactor = Compactor(
            store,
            self.counter,
            summarizer or ExtractiveSummarizer(),
            self.settings,
            hooks=self.hooks,
            view=self.view_of,
        )
        self._compile = compile_system_prompt
        self.tools: list[Mapping[str, Any]] = list(tools)
        store.create(conversation_id)

    def append(self, *items: Message | Mapping[str, Any]) -> list[Message]:
        """Append messages (precis `Message`s or OpenAI dicts) in one transaction.

        With `pin_task`, the first user message becomes the pinned task unless one is set.
        """
        messages = [
            item if isinstance(item, Message) else Message.from_openai(item, index=i)
            for i, item in enumerate(items)
        ]
        context = self.context()
        known = {tc.id for m in context for tc in m.tool_calls}
        for i, m in enumerate(messages):
            if m.role == "tool" and m.tool_call_id not in known:
                raise InvalidMessage(i, f"tool result for unknown tool_call_id {m.tool_call_id!r}")
            known.update(tc.id for tc in m.tool_calls)
        if self.settings.pin_task and _task_message(context) is None:
            for i, m in enumerate(messages):
                if m.role == "user" and m.kind == KIND_MESSAGE and m.content.strip():
                    messages[i] = replace(m, pinned=True, metadata={**m.metadata, "task": True})
                    break
        return self.store.append(self.conversation_id, messages)

    def set_task(self, text: str) -> Message:
        """State the task: a pinned user message the context always keeps, verbatim."""
        if not text.strip():
            raise ValueError("the task text is empty")
        previous = _task_message(self.context())
        (task,) = self.store.append(
            self.conversation_id,
            [
                Message(
                    role="user", content=text, kind=KIND_TASK, pinned=True, metadata={"task": True}
                )
            ],
        )
        if previous is not None:
            self.store.set_pinned(self.conversation_id, previous.id, False)
        return task

    def task(self) -> str | None:
        """The task text: the message `set_task` wrote, or the first user message."""
        message = _task_message(self.context())
        return message.content if message is not None else None

    def pin(self, message_id: str, pinned: bool = True) -> None:
        """Pin a message in context: never evicted, truncated or summarized from now on."""
        if pinned and message_id not in {m.id for m in self.context()}:
            raise ValueError(
                f"message {message_id!r} is not in context; pin messages before they are compacted"
            )
        self.store.set_pinned(self.conversation_id, message_id, pinned)

    def unpin(self, message_id: str) -> None:
        self.pin(message_id, False)

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

    def view_of(self, messages: list[Message]) -> list[Message]:
        """What the model sees of these messages: long tool outputs head+tail, old ones masked."""
        s = self.settings
        shown = [
            display_message(
                m,
                max_chars=s.tool_output_max_chars,
                head_lines=s.tool_output_head_lines,
                tail_lines=s.tool_output_tail_lines,
            )
            for m in messages
        ]
        if s.mask_after_turns is not None:
            shown = mask_observations(shown, keep_last_turns=s.mask_after_turns)
        return shown

    def view(self) -> list[Message]:
        """The context as the model sees it: pinned items first, then the rest in order."""
        context = self.view_of(self.context())
        return [m for m in context if m.pinned] + [m for m in context if not m.pinned]

    def prompt(self) -> list[dict[str, Any]]:
        """What to send: system prompt (stable prefix), pinned items, the summary, the rest."""
        system = self.system_prompt()
        head = [{"role": "system", "content": system}] if system else []
        return head + [m.to_openai() for m in self.view()]

    def floor_tokens(self) -> int:
        """What every request carries besides the messages: system prompt and tool definitions."""
        text, _ = self.store.system_prompt(self.conversation_id)
        system = self.counter.count_text(text) if text else 0
        tools = self.counter.count_text(json.dumps(self.tools)) if self.tools else 0
        return system + tools

    def tokens(self) -> int:
        """Tokens the next request will carry: reported usage anchors the estimate."""
        estimate = estimate_context(self.view_of(self.context()), self.counter)
        if estimate.last_usage_index is not None:
            return estimate.tokens  # the reported usage already counted system prompt and tools
        return estimate.tokens + self.floor_tokens()

    def needs_compaction(self) -> bool:
        threshold = self.settings.threshold
        return threshold is not None and self.tokens() > threshold

    def turns_since_compaction(self) -> int:
        """User turns appended since the last compaction (or since the start)."""
        events = self.store.events(self.conversation_id)
        since = events[-1].at if events else ""
        return sum(
            1
            for m in self.context()
            if m.role == "user" and m.kind == KIND_MESSAGE and (m.created_at or "") > since
        )

    async def compact(
        self,
        mode: CompactionMode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
        phase: str | None = None,
    ) -> CompactionStats:
        result = await self.compact_result(
            mode, trigger=trigger, instructions=instructions, phase=phase
        )
        return result.stats

    async def compact_result(
        self,
        mode: CompactionMode | None = None,
        *,
        trigger: Trigger = "manual",
        instructions: str | None = None,
        phase: str | None = None,
    ) -> CompactionResult:
        return await self.compactor.compact(
            self.conversation_id,
            trigger,
            mode,
            instructions=instructions,
            floor_tokens=self.floor_tokens(),
            task=self.task(),
            phase=phase,
        )

    async def maybe_compact(self) -> list[CompactionStats]:
        """Compact when a trigger fires; returns what ran (usually nothing).

        Over the hard watermark: truncate at once, no model call. Over the soft watermark (or
        letta's threshold; strict >): summarize. After `turn_limit` turns: summarize.
        """
        done: list[CompactionStats] = []
        hard, soft = self.settings.hard_limit, self.settings.threshold
        tokens = self.tokens()  # one estimate per check: it reads the whole context
        if hard is not None and tokens > hard:
            done.append(await self.compact("truncate", trigger="hard_watermark"))
            tokens = self.tokens()
        if soft is not None and tokens > soft:
            done.append(await self.compact(trigger="context_window_limit"))
        elif (
            self.settings.turn_limit is not None
            and self.turns_since_compaction() >= self.settings.turn_limit
        ):
            done.append(await self.compact(trigger="turn_limit"))
        return done

    async def complete_phase(self, name: str) -> CompactionStats:
        """A sub-goal is done: compact at this natural break and record the phase."""
        return await self.compact(trigger="phase_complete", phase=name)

    async def absorb(self, child: Session, tool_call_id: str) -> Message:
        """Return a sub-agent's work to this conversation as its brief only (S3).

        The brief becomes the tool result of this conversation's pending call `tool_call_id`.
        """
        request = SummaryRequest(
            tuple(child.context()),
            "all",
            child.settings.effective_clip_chars,
            style="brief",
            task=child.task(),
        )
        brief = await child.compactor.summarizer.summarize(request)
        (result,) = self.append(
            Message(
                role="tool",
                tool_call_id=tool_call_id,
                content=brief,
                metadata={"sub_agent": child.conversation_id},
            )
        )
        return result

    def compact_sync(self, mode: CompactionMode | None = None, **kw: Any) -> CompactionStats:
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
    mode: CompactionMode | None = None,
) -> tuple[list[dict[str, Any]], CompactionStats]:
    """Compact a plain OpenAI message list once; returns the new list and what happened."""
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
