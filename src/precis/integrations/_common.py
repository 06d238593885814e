"""What the framework integrations share: one flow over the public session API, run sync or async.

An integration turns the framework's messages into precis `Message`s (the framework's own object
kept as JSON in `metadata`), lets a `Mirror` store the new ones and compact, and turns the view
back into the framework's messages. The flow asks for public session methods (`Op`) and is
answered by a `Session` with plain calls or by an `AsyncSession` with awaits, so it is written
once; store calls of an `AsyncSession` run off the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias, TypeVar

from precis.core.errors import CompactionError
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.core.steps import Steps, arun_steps, run_steps
from precis.session import AsyncSession, BaseSession, Session
from precis.session.tools import TOOLS, handle_tool_call

T = TypeVar("T")
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
HISTORY_TOOL_NAMES = frozenset(t.name for t in TOOLS)


@dataclass(frozen=True, slots=True)
class Op:
    """One public method of a session to call, with its positional arguments."""

    method: str
    args: tuple[Any, ...] = ()


Flow: TypeAlias = Steps[Op, T]


def run_flow(flow: Flow[T], session: Session) -> T:
    """Answer the flow with plain calls on a sync session."""
    return run_steps(flow, lambda op: getattr(session, op.method)(*op.args))


async def arun_flow(flow: Flow[T], session: AsyncSession) -> T:
    """Answer the flow with awaits on an async session (its store calls run off the loop)."""

    async def perform(op: Op) -> Any:
        return await getattr(session, op.method)(*op.args)

    return await arun_steps(flow, perform)


def sync_face(session: BaseSession) -> Session:
    """A `Session` over the same store, conversation, counter, summarizer, settings and hooks."""
    if isinstance(session, Session):
        return session
    return Session(
        session.store,
        session.conversation_id,
        session.counter,
        session.summarizer,
        session.settings,
        tools=session.tools,
        hooks=session.hooks,
    )


def async_face(session: BaseSession) -> AsyncSession:
    """An `AsyncSession` over the same store, conversation, counter, summarizer and settings."""
    if isinstance(session, AsyncSession):
        return session
    return AsyncSession(
        session.store,
        session.conversation_id,
        session.counter,
        session.summarizer,
        session.settings,
        tools=session.tools,
        hooks=session.hooks,
    )


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


class _StoreHistory:
    """What the history tools read, straight from the session's store."""

    def __init__(self, session: BaseSession) -> None:
        self.store = session.store
        self.conversation_id = session.conversation_id

    def recall(self, query: str, limit: int = 10) -> list[Any]:
        hits: list[Any] = self.store.recall(self.conversation_id, query, limit)
        return hits


def answer_history_tool(session: BaseSession, name: str, arguments: str | Mapping[str, Any]) -> str:
    """Answer `search_history` or `read_original`; a mistake comes back as text, never a raise."""
    return handle_tool_call(_StoreHistory(session), name, arguments)


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


class Mirror:
    """Stores a framework's new messages, compacts, and returns the view, in one flow.

    Which framework messages are stored is known by key; on first use the keys are read back
    from the conversation's history, so a restarted process does not store anything twice.
    """

    def __init__(self) -> None:
        self.stored: dict[str, tuple[str, ...]] | None = None
        self._system: str | None = None

    def knows(self, key: str) -> bool:
        return self.stored is not None and key in self.stored

    def remember(self, key: str, ids: Iterable[str]) -> None:
        if self.stored is not None:
            self.stored[key] = tuple(ids)

    def flow(
        self, entries: Sequence[Entry], *, system: str | None = None, compact: bool = True
    ) -> Flow[list[Message]]:
        """Store what is new, compact when a trigger fires, and return the view (with `compact`
        off: only store, and return nothing)."""
        if self.stored is None:
            yield Op("context")  # creates the conversation on first use; `history` would not
            self.stored = _index(list((yield Op("history"))))
        if system is not None and system != self._system:
            current: str = yield Op("system_prompt")
            if current != system:
                yield Op("set_system_prompt", (system,))
            self._system = system
        stored = self.stored
        new: dict[str, Sequence[Message]] = {}
        for entry in entries:
            if entry.key not in stored and entry.key not in new:
                made = entry.make()
                if made:
                    new[entry.key] = made
        if new:
            batch = yield from _answerable([m for made in new.values() for m in made])
            appended: list[Message] = list((yield Op("append", tuple(batch))))
            i = 0
            for key, made in new.items():
                stored[key] = tuple(m.id for m in appended[i : i + len(made)])
                i += len(made)
        if not compact:
            return []
        try:
            yield Op("maybe_compact")
        except CompactionError as exc:  # the request goes out as it is; the store is intact
            log.warning("precis: no compaction this turn: %s", exc)
        view: list[Message] = list((yield Op("view")))
        for m in view:
            if m.kind in PRECIS_KINDS:
                stored.setdefault(m.id, (m.id,))
        return view


def _index(history: Sequence[Message]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for m in history:
        key = m.metadata.get(KEY)
        if isinstance(key, str):
            out.setdefault(key, []).append(m.id)
        elif m.kind in PRECIS_KINDS:
            out[m.id] = [m.id]
    return {k: tuple(v) for k, v in out.items()}


def _answerable(batch: list[Message]) -> Flow[list[Message]]:
    """The batch with each tool result whose call is nowhere in context stored as a user message.

    A framework may hand over a result whose call it dropped; precis refuses such a result, and
    the model must not see it as one, so it is kept (searchable) as plain text.
    """
    calls = {c.id for m in batch for c in m.tool_calls}
    if all(m.role != "tool" or m.tool_call_id in calls for m in batch):
        return batch
    context: list[Message] = list((yield Op("context")))
    calls |= {c.id for m in context for c in m.tool_calls}
    return [
        m
        if m.role != "tool" or m.tool_call_id in calls
        else replace(
            m, role="user", tool_call_id=None, metadata={**m.metadata, "orphan_result": True}
        )
        for m in batch
    ]


def precis_ids(view: Sequence[Message]) -> set[str]:
    return {m.id for m in view}
