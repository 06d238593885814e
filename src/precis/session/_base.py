"""What `Session` and `AsyncSession` share: every operation, written once as sans-IO steps.

Each operation is a generator that asks for store calls, summaries and hook runs; the sync face
answers them with plain calls, the async face without blocking its event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from precis.core.errors import InvalidInput, InvalidMessage
from precis.core.memo import Memo
from precis.core.messages import KIND_MESSAGE, KIND_TASK, Message, check_message
from precis.core.steps import Steps
from precis.core.tokens import TokenCounter, default_counter, estimate_context
from precis.core.types import CompactionMode, Trigger, checked_conversation_id
from precis.engine.compactor import Compactor
from precis.engine.composition import measure
from precis.engine.fallback import Summaries
from precis.engine.hooks import Hooks
from precis.engine.requests import Call, Request
from precis.engine.results import CompactionResult, CompactionStats
from precis.engine.settings import CompactionSettings
from precis.session._behind import AwaitBehind, Behind, StartBehind
from precis.session._checks import AppendCheck, answers_outside, refuse_append
from precis.session._checks import task_message as _task_message
from precis.session._view import Views
from precis.stores.base import (
    CompactionEvent,
    ContextSnapshot,
    ContextTail,
    ConversationStore,
    RecallHit,
    utc_now,
)
from precis.stores.samples import Sample, SampleKind
from precis.summarize.base import Summarizer, SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer

SystemPromptCompiler = Callable[[str, list[Message]], str]
# Share of the soft watermark past which a check reads the next compaction's ledger ahead: one
# is near, so little is read for a compaction that never comes.
AHEAD = 0.8
_log = logging.getLogger("precis.session")


@dataclass(frozen=True, slots=True)
class AppendRead:
    """What an append read in its transaction, for the check right after it: the context then
    (the last read with the stored messages after it) and the system prompt."""

    snapshot: ContextSnapshot
    system_prompt: str
    prompt_stale: bool


def _keep_prompt(text: str, context: list[Message]) -> str:
    return text


def as_messages(items: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    """precis `Message`s or OpenAI dicts as messages; a bad dict names its index."""
    return [
        check_message(item if isinstance(item, Message) else Message.from_openai(item, index=i), i)
        for i, item in enumerate(items)
    ]


class _AppendSample:
    """What an append records in its own transaction (`stores.base.AppendSample`): the appended
    messages viewed alone, as a check views them (the system prompt and tools beside them),
    measured; a failure is logged and records nothing, as the append stands."""

    __slots__ = ("called", "session")

    def __init__(self, session: BaseSession) -> None:
        self.session = session
        self.called = False

    def __call__(self, stored: Sequence[Message], system_prompt: str) -> Sample | None:
        self.called = True
        s = self.session
        try:
            system, tools = s._floor_parts_of(system_prompt)
            shown = s.view_alone(stored, system + tools)
            return measure(
                shown,
                s.counter,
                kind="append",
                at=utc_now(),
                settings=s.settings,
                system_tokens=system,
                tool_tokens=tools,
            )
        except Exception:
            _log.warning("%s: sampling an append", s.conversation_id, exc_info=True)
            return None


class BaseSession(Views):
    """A conversation in a store, with the counter, summarizer and settings that govern it."""

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
        self.conversation_id = checked_conversation_id(conversation_id)
        self.counter: TokenCounter = counter or default_counter()
        self.settings = settings or CompactionSettings()
        s = self.settings
        self.hooks = hooks or Hooks.from_commands(
            s.pre_compact_hooks, s.post_compact_hooks, s.hook_timeout
        )
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.memo = Memo()  # what this session read of its messages, to spare reading them again
        parts = (store, self.counter, self.summarizer, self.settings)
        self.compactor = Compactor(*parts, hooks=self.hooks, view=self.view_of, memo=self.memo)
        self._compile = compile_system_prompt
        self.tools: list[Mapping[str, Any]] = list(tools)
        self._created = False
        self._floor_counts: dict[str, int] = {}
        self._last_view = None
        self._last_read: ContextSnapshot | None = None  # the context as last read
        self._display_limits = None
        self.behind: Behind | None = None  # an async session's compaction behind its turns
        self._opened()

    def _opened(self) -> None:
        """The last step of `__init__`: `Session` makes the conversation exist now (an async face
        cannot wait in `__init__`, so it does on first use)."""

    # --- steps --------------------------------------------------------------------------------

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
        return Call(method, (self.conversation_id, *args), kwargs)

    def _ensure_steps(self) -> Steps[Request, None]:
        """Create the conversation on first use (idempotent in the store)."""
        if not self._created:
            yield self._call(self.store.create)
            self._created = True

    def _context_steps(self) -> Steps[Request, list[Message]]:
        yield from self._ensure_steps()
        snapshot: ContextSnapshot = yield from self._read_context_steps()
        return snapshot.messages

    def _read_context_steps(self) -> Steps[Request, ContextSnapshot]:
        """The context, read after the last read: the appends since, when nothing else came."""
        snapshot: ContextSnapshot = yield self._call(self.store.context, since=self._last_read)
        self._last_read = snapshot
        return snapshot

    def _tail_steps(self) -> Steps[Request, ContextTail]:
        yield from self._ensure_steps()
        tail: ContextTail = yield self._call(self.store.tail)
        return tail

    def _append_steps(
        self, items: Sequence[Message | Mapping[str, Any]], idempotency_key: str | None = None
    ) -> Steps[Request, list[Message]]:
        return (yield from self._append_read_steps(items, idempotency_key))[0]

    def _append_read_steps(
        self, items: Sequence[Message | Mapping[str, Any]], idempotency_key: str | None = None
    ) -> Steps[Request, tuple[list[Message], AppendRead | None]]:
        """Append; with the stored messages, the tail the append was checked against when the
        context as last read is the context that tail saw (so the context after the append is
        that read and the stored messages: a check right after need not read either again)."""
        check = AppendCheck(as_messages(items), self.settings.pin_task)
        sample = _AppendSample(self)
        # The tool-call rules are checked by the store, in the append's transaction, against the
        # context's last turn: the same verdict as the whole context gives, unless a result
        # answers a call outside that turn, which is refused, and then named as the whole says.
        # The composition sample is recorded in that transaction too. An append does nothing
        # more: each message's facts and folded text are found when a check or a compaction
        # first asks for them (the session's memo keeps them), which gives the same answers.
        try:
            appended: list[Message] = yield self._call(
                self.store.append,
                check.messages,
                check=check,
                idempotency_key=idempotency_key,
                sample=sample,
            )
        except InvalidMessage:
            if check.tail is not None and answers_outside(check.tail.turn, check.messages):
                refuse_append((yield from self._context_steps()), check.messages)
            raise
        self._created = True
        read = self._read_through(check.tail, appended)
        if check.tail is None or sample.called:
            return appended, read  # a retry answered with what the key stored, or sampled
        try:
            # No sample to grow yet: the whole context's, from the floor read apart.
            floor = yield from self._floor_parts_steps()
            shown = self.view_alone(appended, sum(floor))
            yield from self._sample_steps("append", added=appended, floor=floor, shown=shown)
        except Exception:
            # The messages are stored: what failed is a record of the window, not the append.
            _log.warning("%s: after an append", self.conversation_id, exc_info=True)
        return appended, read

    def _read_through(self, tail: ContextTail | None, appended: list[Message]) -> AppendRead | None:
        """After an append checked against `tail`: when the last read is the context the tail
        saw, that read with the stored messages after it is the context now (the next read goes
        on from it); else None, and nothing is assumed."""
        last = self._last_read
        if (
            tail is None
            or last is None
            or (last.version, last.last_seq, last.compacted)
            != (tail.version, tail.last_seq, tail.compacted)
        ):
            return None
        now = ContextSnapshot(
            [*last.messages, *appended], tail.version, tail.last_seq + len(appended), last.compacted
        )
        self._last_read = now
        return AppendRead(now, tail.system_prompt, tail.prompt_stale)

    def _set_task_steps(self, text: str) -> Steps[Request, Message]:
        if not text.strip():
            raise InvalidInput("the task text is empty")
        previous = _task_message((yield from self._tail_steps()).pinned)
        task = Message(
            role="user", content=text, kind=KIND_TASK, pinned=True, metadata={"task": True}
        )
        appended: list[Message] = yield self._call(self.store.append, [task])
        if previous is not None:
            yield self._call(self.store.set_pinned, previous.id, False)
        yield from self._sample_steps("append", added=appended)
        return appended[0]

    def _task_steps(self) -> Steps[Request, str | None]:
        message = _task_message((yield from self._tail_steps()).pinned)
        return message.content if message is not None else None

    def _pin_steps(self, message_id: str, pinned: bool) -> Steps[Request, None]:
        if pinned and message_id not in {m.id for m in (yield from self._context_steps())}:
            raise InvalidInput(
                f"message {message_id!r} is not in context; pin messages before they are compacted"
            )
        yield self._call(self.store.set_pinned, message_id, pinned)

    def _set_system_prompt_steps(self, text: str) -> Steps[Request, None]:
        yield from self._ensure_steps()
        yield self._call(self.store.set_system_prompt, text)

    def _system_prompt_steps(self) -> Steps[Request, str]:
        """The system prompt, recompiled first if a compaction made it stale."""
        yield from self._ensure_steps()
        text: str
        stale: bool
        text, stale = yield self._call(self.store.system_prompt)
        if stale:
            text = self._compile(text, (yield from self._context_steps()))
            yield self._call(self.store.set_system_prompt, text)
        return text

    def _view_steps(
        self, pending: Sequence[Message] = (), floor_tokens: int | None = None
    ) -> Steps[Request, list[Message]]:
        """The view of the context, with a turn's not-yet-stored messages after it."""
        if floor_tokens is None:
            floor_tokens = yield from self._floor_tokens_steps()
        return self._ordered_view([*(yield from self._context_steps()), *pending], floor_tokens)

    def _prompt_steps(
        self, pending: Sequence[Message] = ()
    ) -> Steps[Request, list[dict[str, Any]]]:
        system = yield from self._system_prompt_steps()
        head = [{"role": "system", "content": system}] if system else []
        view = yield from self._view_steps(pending, self.floor_of(system))
        return head + [m.to_openai() for m in view]

    def _floor_tokens_steps(self) -> Steps[Request, int]:
        return sum((yield from self._floor_parts_steps()))

    def _floor_parts_steps(
        self, read: tuple[str, bool] | None = None
    ) -> Steps[Request, tuple[int, int]]:
        """Tokens of the system prompt and of the tool definitions, apart: the prompt as the
        next request sends it, recompiled first when a compaction (one behind the turns, say)
        made it stale, so no check counts a prompt shorter than the one sent. `read`: the
        prompt and its stale flag as just read (by an append), not read again."""
        yield from self._ensure_steps()
        text: str
        if read is None:
            read = yield self._call(self.store.system_prompt)
        text, stale = read
        if stale and self._compile is not _keep_prompt:
            text = yield from self._system_prompt_steps()
        return self._floor_parts_of(text)

    def floor_of(self, system_prompt: str) -> int:
        """What every request carries besides the messages: the system prompt and the tools."""
        return sum(self._floor_parts_of(system_prompt))

    def _floor_parts_of(self, system_prompt: str) -> tuple[int, int]:
        """Tokens of a system prompt and of the tool definitions, apart."""
        return self._text_tokens(system_prompt), self._text_tokens(
            json.dumps(self.tools) if self.tools else ""
        )

    def _sample_steps(
        self,
        kind: SampleKind,
        *,
        added: Sequence[Message] = (),
        context: Sequence[Message] | None = None,
        floor: tuple[int, int] | None = None,
        shown: Sequence[Message] | None = None,
    ) -> Steps[Request, Sample]:
        """Record what fills the window after this turn: an append's messages on top of the
        latest sample (no context read), or the whole context when there is none yet or a
        compaction changed it. `floor` (system prompt and tools) and `shown` (the appended
        messages viewed alone) spare what the caller already has."""
        system, tools = floor if floor is not None else (yield from self._floor_parts_steps())

        def sample_of(messages: Sequence[Message], alone: bool = False) -> Call:
            if alone and shown is not None:
                view = list(shown)
            else:
                view = (self.view_alone if alone else self.view_of)(list(messages), system + tools)
            options = {"kind": kind, "at": utc_now(), "settings": self.settings}
            options |= {"system_tokens": system, "tool_tokens": tools}
            return Call(measure, (view, self.counter), options)

        stored: Sample | None
        if context is None:
            partial: Sample = yield sample_of(added, alone=True)
            stored = yield self._call(self.store.add_sample, partial, grow=True)
            if stored is not None:
                return stored
            context = yield from self._context_steps()
        whole: Sample = yield sample_of(context)
        stored = yield self._call(self.store.add_sample, whole)
        assert stored is not None
        return stored

    def _text_tokens(self, text: str) -> int:
        """Tokens of the system prompt or the tool definitions, counted once per text."""
        if not text:
            return 0
        hit = self._floor_counts.get(text)
        if hit is None:
            if len(self._floor_counts) > 8:
                self._floor_counts.clear()
            hit = self._floor_counts[text] = self.counter.count_text(text)
        return hit

    def _tokens_steps(self, pending: Sequence[Message] = ()) -> Steps[Request, int]:
        return (yield from self._checked_steps(pending))[0]

    def _checked_steps(
        self, pending: Sequence[Message] = (), read: AppendRead | None = None
    ) -> Steps[Request, tuple[int, ContextSnapshot, tuple[int, int]]]:
        """The tokens in context, the snapshot they were counted from, and the tokens of the
        system prompt and of the tools beside it. `read`: what an append just read, with the
        last read carried through it (`_read_through`): neither is read again, unless a
        compaction behind the turn committed since (it moved the last read on)."""
        if read is not None and self._last_read is not read.snapshot:
            read = None
        if read is None:
            parts = yield from self._floor_parts_steps()
            yield from self._ensure_steps()
            snapshot: ContextSnapshot = yield from self._read_context_steps()
        else:
            parts = yield from self._floor_parts_steps((read.system_prompt, read.prompt_stale))
            snapshot = read.snapshot
        floor = sum(parts)
        view = self.view_of([*snapshot.messages, *pending], floor)
        if self.settings.guard:
            # The guard's facts, asked of the messages as they come: a compaction keeps them.
            self.compactor.kept.observe(view)
        estimate = estimate_context(view, self.counter)
        # The reported usage already counted system prompt and tools.
        tokens = estimate.tokens + (0 if estimate.last_usage_index is not None else floor)
        threshold = self.settings.threshold
        near = threshold is not None and threshold * AHEAD <= tokens <= threshold
        if self.settings.guard and near:
            # No compaction now, one soon: replay what it will summarize whatever it plans.
            def task() -> str | None:
                found = _task_message([m for m in snapshot.messages if m.pinned])
                return found.content if found is not None else None

            percentage = self.settings.sliding_window_percentage
            self.compactor.ahead.read(snapshot.version, task, view, percentage)
        return tokens, snapshot, parts

    def _needs_compaction_steps(self) -> Steps[Request, bool]:
        threshold = self.settings.threshold
        return threshold is not None and (yield from self._tokens_steps()) > threshold

    def _turns_since_compaction_steps(self) -> Steps[Request, int]:
        events = yield from self._events_steps()
        since = events[-1].at if events else ""
        return sum(
            1
            for m in (yield from self._context_steps())
            if m.role == "user" and m.kind == KIND_MESSAGE and (m.created_at or "") > since
        )

    def _compact_steps(
        self,
        mode: CompactionMode | None,
        trigger: Trigger,
        instructions: str | None,
        phase: str | None,
        pending: Sequence[Message] = (),
        snapshot: ContextSnapshot | None = None,
        parts: tuple[int, int] | None = None,
    ) -> Steps[Request, CompactionResult]:
        """Compact the stored context; a turn's pending messages ride after it, kept whole.
        `snapshot` is the context a check just read, which the compaction need not read again,
        and `parts` the system prompt's and tools' tokens it read with it."""
        if parts is None:
            parts = yield from self._floor_parts_steps()
        floor = sum(parts)
        if snapshot is None:
            task = yield from self._task_steps()
        else:  # the pinned task of the context just read, as `_task_steps` reads it
            found = _task_message([m for m in snapshot.messages if m.pinned])
            task = found.content if found is not None else None
        result: CompactionResult = yield from self.compactor.compaction(
            self.conversation_id,
            trigger,
            mode,
            instructions=instructions,
            floor_tokens=floor,
            task=task,
            phase=phase,
            pending=pending,
            snapshot=snapshot,
        )
        if result.committed is not None:  # the next read goes on from the commit's context
            self._last_read = result.committed
        if result.compacted:  # a no-op changed nothing to sample
            # A hook that ran may have set another system prompt.
            read = None if self.hooks else parts
            yield from self._sample_steps("compaction", context=result.context, floor=read)
            if self.settings.guard:  # what is kept, as the guard just asked of it
                self.compactor.kept.observe(self.view_of(list(result.context), floor))
        return result

    def _maybe_compact_steps(
        self, pending: Sequence[Message] = (), read: AppendRead | None = None
    ) -> Steps[Request | StartBehind | AwaitBehind, list[CompactionStats]]:
        """Over the hard watermark: truncate, no model call. Over the soft watermark (or letta's
        threshold; strict >): summarize. After `turn_limit` turns: summarize. A compaction that
        could make nothing smaller wrote nothing and is not listed.

        With `behind` (an async session) the summary is made behind the turn, of the stored
        context (what is appended meanwhile stays after it), one at a time; the turn waits for
        it only over the hard watermark. Its stats come with the next check's. `read`: what the
        append just before read, not read again (`_checked_steps`)."""
        return (yield from self._checked_compact_steps(pending, read))[0]

    def _counted_compact_steps(
        self, pending: Sequence[Message] = (), read: AppendRead | None = None
    ) -> Steps[Request | StartBehind | AwaitBehind, tuple[list[CompactionStats], int]]:
        """`_maybe_compact_steps`, and the tokens the context carries after it: its check's
        count, read again only when it compacted now (a summary started behind is not in it).
        `read`: what the append just before read (`_checked_steps`)."""
        done, tokens = yield from self._checked_compact_steps(pending, read)
        if tokens is None:
            tokens = yield from self._tokens_steps(pending)
        return done, tokens

    def _checked_compact_steps(
        self, pending: Sequence[Message] = (), read: AppendRead | None = None
    ) -> Steps[Request | StartBehind | AwaitBehind, tuple[list[CompactionStats], int | None]]:
        """`_maybe_compact_steps`, with its last check's tokens (None when it compacted since);
        its first check goes on from what an append just read (`read`)."""
        hard, soft = self.settings.hard_limit, self.settings.threshold
        behind = self.behind if self.settings.background_compaction else None
        done: list[CompactionStats] = behind.take() if behind is not None else []
        # Once per check: it reads the context, and the compaction it starts works on that read
        # (a commit since is caught by the compaction's compare-and-set, which reads again).
        tokens, snapshot, parts = yield from self._checked_steps(pending, read)
        if behind is not None and behind.running:
            if hard is None or tokens <= hard:
                return done, tokens  # the turn goes on while the summary is made
            waited: list[CompactionStats] = yield AwaitBehind(behind)
            done += waited
            tokens, snapshot, parts = yield from self._checked_steps(pending)
        if hard is not None and tokens > hard:
            truncated = yield from self._compact_steps(
                "truncate", "hard_watermark", None, None, pending, snapshot, parts
            )
            if truncated.compacted:
                done.append(truncated.stats)
                tokens, snapshot, parts = yield from self._checked_steps(pending)
        limit = self.settings.turn_limit
        trigger: Trigger | None = None
        given: tuple[ContextSnapshot, tuple[int, int]] | tuple[None, None] = (snapshot, parts)
        if soft is not None and tokens > soft:
            trigger = "context_window_limit"
        elif limit is not None and (yield from self._turns_since_compaction_steps()) >= limit:
            trigger, given = "turn_limit", (None, None)
        if trigger is None:
            return done, tokens
        if behind is not None:
            later = self._compact_steps(None, trigger, None, None, (), *given)
            now: list[CompactionStats] = yield StartBehind(behind, later)
            return done + now, None if now else tokens  # `now`: a plain driver compacted
        result = yield from self._compact_steps(None, trigger, None, None, pending, *given)
        if result.compacted:
            done.append(result.stats)
        return done, None if result.compacted else tokens

    def _absorb_steps(self, child: BaseSession, tool_call_id: str) -> Steps[Request, Message]:
        request = SummaryRequest(
            tuple((yield from child._context_steps())),
            "all",
            child.settings.effective_clip_chars,
            style="brief",
            task=(yield from child._task_steps()),
            timeout=child.settings.summary_timeout,
        )
        summaries = Summaries(child.summarizer, child.settings.summary_retries)
        brief = yield from summaries.steps(request)
        result = Message(
            role="tool",
            tool_call_id=tool_call_id,
            content=brief,
            metadata={"sub_agent": child.conversation_id},
        )
        appended = yield from self._append_steps([result])
        return appended[0]

    def _compact_list_steps(
        self, messages: Iterable[Mapping[str, Any]], mode: CompactionMode | None
    ) -> Steps[Request, tuple[list[dict[str, Any]], CompactionStats]]:
        """A plain OpenAI list (a leading system message becomes the system prompt), compacted."""
        items = list(messages)
        first = items[0] if items else {}
        if first.get("role") == "system" and isinstance(first.get("content"), str):
            yield from self._set_system_prompt_steps(first["content"])
            items = items[1:]
        yield from self._append_steps(items)
        result = yield from self._compact_steps(mode, "manual", None, None)
        return (yield from self._prompt_steps()), result.stats

    def _recall_steps(self, query: str, limit: int) -> Steps[Request, list[RecallHit]]:
        hits: list[RecallHit] = yield self._call(self.store.recall, query, limit)
        return hits

    def _history_steps(self) -> Steps[Request, list[Message]]:
        messages: list[Message] = yield self._call(self.store.history)
        return messages

    def _events_steps(self) -> Steps[Request, list[CompactionEvent]]:
        events: list[CompactionEvent] = yield self._call(self.store.events)
        return events
