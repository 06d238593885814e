"""What the framework integrations share: one precis session per framework thread, and one flow.

`Sessions` opens a session per thread (LangChain's `thread_id`, pydantic-ai's conversation, an
Agents SDK session id) over one store, so one middleware, capability or factory serves many
users at once and no thread ever sees another's messages. Each thread's `Mirror` turns the
framework's new messages into precis `Message`s (the framework's object kept as JSON in
`metadata`), stores them, compacts, and returns the view. The flow is the thread's own session's
sans-IO steps, driven with plain calls (`drive`) or awaits (`adrive`), so the session's system
prompt compiler, caches and hooks are the ones that run.

What an integration calls: `Sessions.mirror(thread_id)`, then `Mirror.flow(entries, system=...)`
under the mirror's lock before each model call (store what is new, compact, view), or
`Mirror.compactions(force=...)` for a compaction outside a model call. Every compaction goes
through `Mirror.compactions`, which records its OpenTelemetry span; `Turn.compactions` hands
the integration each one (`Compaction`: stats, summary, facts kept) to tell its framework in the
framework's own terms. `_models` makes the framework's model a summarizer (`FrameworkSummarizer`
over a plain and an awaited chat call), a counter (`CallbackCounter`), and fills or checks the
window (`settings_for`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias, TypeVar

from precis.core.errors import InvalidInput, PrecisError
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.core.steps import Steps
from precis.core.tokens import TokenCounter
from precis.engine.hooks import Hooks
from precis.engine.settings import CompactionSettings
from precis.integrations._telemetry import Compaction, emit_span, facts_kept
from precis.session import AsyncSession, BaseSession
from precis.session._base import AppendRead, SystemPromptCompiler
from precis.session._io import SessionRequest
from precis.session.tools import TOOLS, answer_history_tool
from precis.stores.base import ConversationStore
from precis.summarize.base import Summarizer

log = logging.getLogger("precis.integrations")

# Metadata of a stored message: the framework that wrote it, the key of the framework message it
# came from, and that message (or part) as JSON, so the original comes back exactly.
FRAMEWORK = "framework"
KEY = "framework_key"
RAW = "framework_raw"
# Metadata a view puts on a message whose content is not the original (head+tail, masked).
SHOWN = ("shortened_from", "masked")
# What precis itself writes into a conversation: summaries and truncation markers.
PRECIS_KINDS = frozenset({KIND_SUMMARY, KIND_MARKER})
# A conversation id the CLI and the service accept: safe in a URL path, a file name, a log line.
CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# A thread id used as it is (after the prefix); any other is named by its digest. A digest id
# holds a colon and a verbatim one never does, so the two can never name one conversation.
VERBATIM_THREAD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DIGEST_TAG = "sha256:"
# Threads whose session a `Sessions` keeps open by default; the least recently used idle one
# is let go past it (its conversation stays in the store and is read back on its next turn).
MAX_OPEN_THREADS = 1024

T = TypeVar("T")
Flow: TypeAlias = Steps[SessionRequest, T]


class Sessions:
    """One precis session per framework thread, all over one store with one set of settings.

    A thread's conversation id is `prefix` plus the thread id when that is short and plain (a
    letter or digit, then letters, digits, `._-`), else `prefix` plus a digest of it. Each
    thread keeps its own session (and with it its caches) while it is one of the `max_open`
    threads used last; keep `max_open` above the threads served at once.
    """

    def __init__(
        self,
        store: ConversationStore,
        *,
        prefix: str = "",
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        settings: CompactionSettings | None = None,
        compile_system_prompt: SystemPromptCompiler | None = None,
        hooks: Hooks | None = None,
        max_open: int = MAX_OPEN_THREADS,
        tracer_provider: Any = None,
    ) -> None:
        if max_open < 1:
            raise InvalidInput(f"Sessions max_open: must be at least 1, got {max_open}")
        longest = (prefix + "x" * 64, prefix + DIGEST_TAG + "0" * 40)
        if prefix and not all(CONVERSATION_ID.fullmatch(name) for name in longest):
            raise InvalidInput(
                f"Sessions prefix {prefix[:40]!r}: must start with a letter or digit, hold only "
                "letters, digits and ._:- and leave room for a thread id (at most 64 characters)"
            )
        self.store = store
        self.prefix = prefix
        self.counter = counter
        self.summarizer = summarizer
        self.settings = settings
        self.compile_system_prompt = compile_system_prompt
        self.hooks = hooks
        self.max_open = max_open
        # Where the compaction spans go (an OpenTelemetry TracerProvider); None: the global one.
        self.tracer_provider = tracer_provider
        if settings is None or settings.context_window is None:
            warnings.warn(
                "precis Sessions: no context_window in the settings, so nothing is ever "
                "compacted and requests can grow past the model's window; pass "
                "CompactionSettings(context_window=...) or build them from the framework's model",
                UnboundedWindow,
                stacklevel=2,
            )
        self._threads: OrderedDict[str, Mirror] = OrderedDict()
        self._lock = threading.Lock()

    def conversation_id(self, thread_id: str) -> str:
        """The precis conversation a framework thread is kept in."""
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidInput(f"thread id {thread_id!r}: must be a non-empty string")
        if VERBATIM_THREAD.fullmatch(thread_id):
            return self.prefix + thread_id
        digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return f"{self.prefix}{DIGEST_TAG}{digest}"

    def session(self, thread_id: str) -> AsyncSession:
        """The thread's session (opened on first use): read it, search it, compact it."""
        return self.mirror(thread_id).session

    def mirror(self, thread_id: str) -> Mirror:
        """The thread's session with what the integration keeps between its requests."""
        conversation_id = self.conversation_id(thread_id)
        with self._lock:
            mirror = self._threads.get(conversation_id)
            if mirror is None:
                extra: dict[str, Any] = {}
                if self.compile_system_prompt is not None:
                    extra["compile_system_prompt"] = self.compile_system_prompt
                session = AsyncSession(
                    self.store,
                    conversation_id,
                    self.counter,
                    self.summarizer,
                    self.settings,
                    hooks=self.hooks,
                    **extra,
                )
                mirror = self._threads[conversation_id] = Mirror(session, self.tracer_provider)
            self._threads.move_to_end(conversation_id)
            if len(self._threads) > self.max_open:
                self._let_go()
            return mirror

    def _let_go(self) -> None:
        """Drop the least recently used idle threads past `max_open` (never the newest)."""
        for conversation_id in list(self._threads)[:-1]:
            if len(self._threads) <= self.max_open:
                return
            mirror = self._threads[conversation_id]
            busy = mirror.lock.locked() or mirror.alock.locked()
            if not (busy or (mirror.session.behind and mirror.session.behind.running)):
                del self._threads[conversation_id]

    async def aclose(self, *, cancel: bool = False) -> None:
        """Wait for (or `cancel`) every thread's compaction behind its turns: none is left."""
        with self._lock:
            sessions = [mirror.session for mirror in self._threads.values()]
        for session in sessions:
            await session.aclose(cancel=cancel)


class UnboundedWindow(UserWarning):
    """Settings that let requests grow past the model's window (no window set, no input filter)."""


def fingerprint(value: Any) -> str:
    """A short stable digest of JSON-able data (keys sorted)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def shown_differently(message: Message) -> bool:
    """Whether the view changed this message's content (a long output shown head+tail, masked)."""
    return any(message.metadata.get(key) for key in SHOWN)


def tool_schemas() -> list[dict[str, Any]]:
    """`search_history` and `read_original` as (name, description, JSON schema) dicts."""
    return [
        {"name": t.name, "description": t.description, "parameters": t.json_schema()} for t in TOOLS
    ]


# --- the history tools ----------------------------------------------------------------------


async def aanswer_history_tool(
    session: BaseSession, name: str, arguments: str | Mapping[str, Any]
) -> str:
    """`answer_history_tool` with its store reads on a worker thread."""
    return await asyncio.to_thread(answer_history_tool, session, name, arguments)


# --- keeping a framework's message list and a conversation in step ----------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One framework message: its key, and how to make the precis messages to store when the key
    is new (made only then: most of a long history is known already).

    Objects precis made itself (a summary, a shortened copy) are entries whose key is already
    known, so they are never stored twice.
    """

    key: str
    make: Callable[[], Sequence[Message]]


@dataclass(frozen=True, slots=True)
class Turn:
    """What to send the model: the view, the system prompt as the session has it (compiled
    after a compaction when the session has a compiler; None when the framework gave none), and
    the compactions this turn ran, for the integration to tell its framework in its own terms."""

    view: list[Message]
    system: str | None
    compactions: tuple[Compaction, ...] = ()


class Mirror:
    """One thread: its session, and which framework messages are stored in it, by key.

    On first use the keys are read back from the conversation's history, so a restarted process
    does not store anything twice. `lock` (plain calls) and `alock` (awaits) keep two requests
    of one thread from storing the same message twice.
    """

    def __init__(self, session: AsyncSession, tracer_provider: Any = None) -> None:
        self.session = session
        self.tracer_provider = tracer_provider
        self.stored: dict[str, tuple[str, ...]] | None = None
        # The system prompt the framework last gave; the session may hold it compiled.
        self.source: str | None = None
        # Digests of the content parts stored (pydantic-ai merges adjacent requests).
        self.parts: set[str] | None = None
        # Compactions run but not yet told to the framework (pydantic-ai tells them in its own
        # compaction step, after the hook that ran them).
        self.unreported: tuple[Compaction, ...] = ()
        self.lock = threading.Lock()
        self.alock = asyncio.Lock()

    def load(self) -> Flow[list[Message]]:
        """Read back what is stored, once; the history read, or [] when it was read before."""
        if self.stored is not None:
            return []
        yield from self.session._context_steps()  # creates the conversation; history would not
        history: list[Message] = yield from self.session._history_steps()
        self.stored = _index(history)
        return history

    def flow(
        self,
        entries: Sequence[Entry],
        *,
        system: str | None = None,
        compact: bool = True,
        force: bool = False,
        focus: str | None = None,
    ) -> Flow[Turn]:
        """Store what is new, compact when a trigger fires (with `force`: now, keeping `focus`),
        and return the view (with `compact` off: only store, and return an empty turn)."""
        session = self.session
        yield from self.load()
        if system is not None and system != self.source:
            current: str = yield from session._system_prompt_steps()
            if current != system:
                yield from session._set_system_prompt_steps(system)
            self.source = system
        stored = self.stored
        assert stored is not None
        new: dict[str, Sequence[Message]] = {}
        for entry in entries:
            if entry.key not in stored and entry.key not in new:
                made = entry.make()
                if made:
                    new[entry.key] = made
        read: AppendRead | None = None
        if new:
            batch = yield from _answerable(session, [m for made in new.values() for m in made])
            appended, read = yield from session._append_read_steps(batch)
            i = 0
            for key, made in new.items():
                stored[key] = tuple(m.id for m in appended[i : i + len(made)])
                i += len(made)
        if not compact:
            return Turn([], None)
        compactions = yield from self.compactions(force=force, focus=focus, read=read)
        # The prompt before the view: a compaction behind the turn that commits between them
        # leaves the view smaller, never an old view beside the longer prompt compiled after it.
        compiled = (yield from session._system_prompt_steps()) if system is not None else None
        view: list[Message] = yield from session._view_steps()
        for m in view:
            if m.kind in PRECIS_KINDS:
                stored.setdefault(m.id, (m.id,))
        return Turn(view, compiled, compactions)

    def compactions(
        self,
        *,
        force: bool = False,
        focus: str | None = None,
        when: str = "this turn",
        read: AppendRead | None = None,
    ) -> Flow[tuple[Compaction, ...]]:
        """Compact when a trigger fires (with `force`: now, the summary told to keep `focus`),
        and record a span per compaction. `read`: what the append just before read, which the
        check need not read again.

        The one place every integration's compactions go through, so each is traced once. A
        compaction that failed changed nothing and is logged: the request goes out as it is (the
        hard watermark's truncation, which needs no model, ran first if it was due)."""
        session = self.session
        started = time.time_ns()
        try:
            if force:
                result = yield from session._compact_steps(None, "manual", focus, None)
                done = [result.stats] if result.compacted else []
            else:
                done = yield from session._maybe_compact_steps((), read)
        except Exception as exc:
            not_compacted(when, exc)
            return ()
        if not done:
            return ()
        ended = time.time_ns()
        context: list[Message] = yield from session._context_steps()
        written = [m for m in context if m.kind in PRECIS_KINDS]
        out: list[Compaction] = []
        for i, stats in enumerate(done):
            # The last one's summary is in context; an earlier one's (a truncation) was replaced.
            summary = written[-1] if written and i == len(done) - 1 else None
            out.append(
                Compaction(
                    session.conversation_id, stats, summary, facts_kept(summary), started, ended
                )
            )
        for compaction in out:
            emit_span(compaction, self.tracer_provider)
        return tuple(out)


def _index(history: Sequence[Message]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for m in history:
        key = m.metadata.get(KEY)
        if isinstance(key, str):
            out.setdefault(key, []).append(m.id)
        elif m.kind in PRECIS_KINDS:
            out[m.id] = [m.id]
    return {k: tuple(v) for k, v in out.items()}


def _answerable(session: BaseSession, batch: list[Message]) -> Flow[list[Message]]:
    """The batch with each tool result whose call is nowhere in context stored as a user message.

    A framework may hand over a result whose call it dropped; precis refuses such a result, and
    the model must not see it as one, so it is kept (searchable) as plain text.
    """
    calls = {c.id for m in batch for c in m.tool_calls}
    if all(m.role != "tool" or m.tool_call_id in calls for m in batch):
        return batch
    context: list[Message] = yield from session._context_steps()
    calls |= {c.id for m in context for c in m.tool_calls}
    return [
        m
        if m.role != "tool" or m.tool_call_id in calls
        else replace(
            m, role="user", tool_call_id=None, metadata={**m.metadata, "orphan_result": True}
        )
        for m in batch
    ]


def not_compacted(when: str, exc: Exception) -> None:
    """Log a compaction that failed (it changed nothing); a non-precis error with its trace.

    A summarizer that is down, slow or talking nonsense never stops the agent: the turn goes on
    with the context as it is."""
    log.warning(
        "precis: no compaction %s (%s): %s",
        when,
        type(exc).__name__,
        exc,
        exc_info=not isinstance(exc, PrecisError),
    )
