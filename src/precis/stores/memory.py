"""An in-process store for tests and short-lived agents: dicts and lists behind one lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from precis.core.errors import ConversationNotFound, UnknownMessage
from precis.core.messages import Message
from precis.stores.base import (
    AppendCheck,
    AppendSample,
    Compaction,
    CompactionEvent,
    ContextSnapshot,
    ContextTail,
    MessageIds,
    RecallHit,
    StoreBase,
    WouldWait,
    check_idempotency_key,
    check_page,
    fingerprint,
    normalize_batch,
    query_terms,
    replayed,
    search_text,
)
from precis.stores.recall import CANDIDATES, Found, found, holds_all, recall, scan_bound
from precis.stores.samples import Sample, check_sample, grown, numbered

T = TypeVar("T")

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Conversation:
    """One conversation's state; `id_list` is None until the first compaction."""

    system_prompt: str
    prompt_stale: bool = False
    log: list[Message] = field(default_factory=list)
    seq_of: dict[str, int] = field(default_factory=dict)
    id_list: list[str] | None = None
    # The messages of `id_list`, looked up once (None: look them up at the next read).
    in_context: list[Message] | None = None
    version: int = 0
    events: list[CompactionEvent] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    pinned: set[str] = field(default_factory=set)  # ids of the pinned messages in the log
    # Idempotency key -> (fingerprint of the append, ids it stored).
    keys: dict[str, tuple[str, list[str]]] = field(default_factory=dict)


class MemoryStore(StoreBase):
    """A `ConversationStore` in memory; every method holds one lock, so it is thread-safe.

    Its calls never wait on I/O: an async session makes them on its loop (`without_waiting`);
    a subclass whose calls block refuses there (`StoreBase.without_waiting`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._conversations: dict[str, _Conversation] = {}
        self._ids = MessageIds()

    def without_waiting(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn` now, unless another thread holds the store's lock (a commit behind the turn)."""
        if not self._lock.acquire(blocking=False):
            raise WouldWait(getattr(fn, "__name__", "call"))
        try:
            return fn(*args, **kwargs)
        finally:
            self._lock.release()

    def _conversation(self, conversation_id: str) -> _Conversation:
        conv = self._conversations.get(conversation_id)
        if conv is None:
            raise ConversationNotFound(conversation_id)
        return conv

    def create(self, conversation_id: str, *, system_prompt: str = "") -> None:
        """Create the conversation if missing; an existing one is left untouched."""
        with self._lock:
            self._conversations.setdefault(conversation_id, _Conversation(system_prompt))

    def exists(self, conversation_id: str) -> bool:
        """Whether the conversation is in the store."""
        with self._lock:
            return conversation_id in self._conversations

    def conversations(self) -> list[str]:
        """Every conversation id, sorted."""
        with self._lock:
            return sorted(self._conversations)

    def _store(self, conv: _Conversation, messages: Sequence[Message]) -> None:
        for message in messages:
            conv.log.append(message)
            conv.seq_of[message.id] = len(conv.log)
            if message.pinned:
                conv.pinned.add(message.id)

    def append(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        check: AppendCheck | None = None,
        idempotency_key: str | None = None,
        sample: AppendSample | None = None,
    ) -> list[Message]:
        """Append in one step under the lock, `check` run on the tail first and `sample` after
        (see the protocol)."""
        check_idempotency_key(idempotency_key)
        given = fingerprint(messages) if idempotency_key is not None else ""
        with self._lock:
            conv = self._conversations.get(conversation_id)
            if conv is not None and idempotency_key in conv.keys:
                stored_print, stored_ids = conv.keys[idempotency_key]
                replayed(conversation_id, idempotency_key, stored_print, given)
                return [conv.log[conv.seq_of[i] - 1] for i in stored_ids]
            if check is not None:
                tail = self._tail(conv if conv is not None else _Conversation(""))
                messages = check(tail)
            held: Container[str] = conv.seq_of if conv is not None else ()
            stored = normalize_batch(conversation_id, messages, self._ids, held)
            if conv is None:
                conv = self._conversations.setdefault(conversation_id, _Conversation(""))
            self._store(conv, stored)
            if conv.id_list is not None:
                conv.id_list.extend(m.id for m in stored)
                if conv.in_context is not None:
                    conv.in_context.extend(stored)
            if idempotency_key is not None:
                conv.keys[idempotency_key] = (given, [m.id for m in stored])
            if sample is not None and conv.samples:
                made = sample(stored, conv.system_prompt)
                if made is not None:
                    self._add_sample(conversation_id, conv, made, grow=True)
            return stored

    def set_pinned(self, conversation_id: str, message_id: str, pinned: bool) -> None:
        """Pin or unpin a stored message."""
        with self._lock:
            conv = self._conversation(conversation_id)
            seq = conv.seq_of.get(message_id)
            if seq is None:
                raise UnknownMessage(conversation_id, message_id)
            conv.log[seq - 1] = replace(conv.log[seq - 1], pinned=pinned)
            conv.in_context = None
            conv.version += 1  # a compaction planned before the pin must plan again
            if pinned:
                conv.pinned.add(message_id)
            else:
                conv.pinned.discard(message_id)

    def _snapshot(self, conv: _Conversation) -> ContextSnapshot:
        if conv.id_list is None:
            messages = list(conv.log)
        else:
            if conv.in_context is None:
                log, seq_of = conv.log, conv.seq_of
                conv.in_context = [log[seq_of[i] - 1] for i in conv.id_list]
            messages = list(conv.in_context)
        return ContextSnapshot(
            messages=messages,
            version=conv.version,
            last_seq=len(conv.log),
            compacted=conv.id_list is not None,
        )

    def tail(self, conversation_id: str) -> ContextTail:
        """The context's last turn and its pinned messages."""
        with self._lock:
            return self._tail(self._conversation(conversation_id))

    def _tail(self, conv: _Conversation) -> ContextTail:
        ids = conv.id_list
        log = conv.log
        if ids is not None:
            # `tail_of` the context, reading only the last turn's messages and the pinned.
            seq_of, held = conv.seq_of, conv.pinned
            start = max(len(ids) - 1, 0)
            while start > 0 and log[seq_of[ids[start]] - 1].role == "tool":
                start -= 1
            turn = [log[seq_of[i] - 1] for i in ids[start:]]
            pinned = [log[seq_of[i] - 1] for i in ids if i in held]
        else:
            start = max(len(log) - 1, 0)
            while start > 0 and log[start].role == "tool":
                start -= 1
            turn = log[start:]
            pinned = [log[seq - 1] for seq in sorted(conv.seq_of[i] for i in conv.pinned)]
        return ContextTail(
            turn,
            start,
            pinned,
            conv.version,
            len(log),
            ids is not None,
            conv.system_prompt,
            conv.prompt_stale,
        )

    def context(
        self, conversation_id: str, *, since: ContextSnapshot | None = None
    ) -> ContextSnapshot:
        """The in-context messages in order; everything when never compacted (the stored
        messages themselves, so `since` spares nothing here)."""
        with self._lock:
            return self._snapshot(self._conversation(conversation_id))

    def history(
        self, conversation_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Every message ever appended (summaries included), in seq order."""
        check_page(offset, limit)
        with self._lock:
            log = self._conversation(conversation_id).log
            end = len(log) if limit is None else offset + limit
            return log[offset:end]

    def get(self, conversation_id: str, ids: Sequence[str]) -> list[Message]:
        """The messages with these ids, in the order asked; UnknownMessage for a missing one."""
        with self._lock:
            conv = self._conversation(conversation_id)
            out: list[Message] = []
            for message_id in ids:
                seq = conv.seq_of.get(message_id)
                if seq is None:
                    raise UnknownMessage(conversation_id, message_id)
                out.append(conv.log[seq - 1])
            return out

    def count(self, conversation_id: str) -> int:
        """How many messages the log holds."""
        with self._lock:
            return len(self._conversation(conversation_id).log)

    def _commit(self, conversation_id: str, compaction: Compaction) -> ContextSnapshot:
        """Append the summary, replace the id list, bump the version, log the event, at once."""
        with self._lock:
            conv = self._conversation(conversation_id)
            stats = compaction.check(conversation_id, conv.version, conv.seq_of.__contains__)
            (stored,) = normalize_batch(conversation_id, [compaction.summary], self._ids, ())
            later = [m.id for m in conv.log[max(compaction.snapshot_last_seq, 0) :]]
            self._store(conv, [stored])
            conv.id_list = compaction.id_list(later)
            conv.in_context = None
            conv.version += 1
            conv.prompt_stale = True
            conv.events.append(replace(compaction.event, stats=stats, summary_id=stored.id))
            return self._snapshot(conv)

    def events(self, conversation_id: str) -> list[CompactionEvent]:
        """The compaction events, oldest first."""
        with self._lock:
            return list(self._conversation(conversation_id).events)

    def system_prompt(self, conversation_id: str) -> tuple[str, bool]:
        """The compiled system prompt and whether a compaction made it stale."""
        with self._lock:
            conv = self._conversation(conversation_id)
            return conv.system_prompt, conv.prompt_stale

    def set_system_prompt(self, conversation_id: str, text: str) -> None:
        """Store a recompiled system prompt and clear the stale flag."""
        with self._lock:
            conv = self._conversation(conversation_id)
            conv.system_prompt = text
            conv.prompt_stale = False

    def recall(self, conversation_id: str, query: str, limit: int = 10) -> list[RecallHit]:
        """Search every message, evicted ones and summaries included; best first (stores.recall)."""
        terms = query_terms(query)
        with self._lock:
            log = self._conversation(conversation_id).log
            if not terms or limit <= 0:
                return []
            return recall(lambda phases: [h for p in phases for h in _newest(log, p)], terms, limit)

    def add_sample(
        self, conversation_id: str, sample: Sample, *, grow: bool = False
    ) -> Sample | None:
        """Record the sample as the next turn (on top of the latest with `grow`; None if none)."""
        with self._lock:
            return self._add_sample(
                conversation_id, self._conversation(conversation_id), sample, grow=grow
            )

    def _add_sample(
        self, conversation_id: str, conv: _Conversation, sample: Sample, *, grow: bool
    ) -> Sample | None:
        """`add_sample` under the lock."""
        check_sample(conversation_id, sample)
        if grow:
            if not conv.samples:
                return None
            sample = grown(conv.samples[-1], sample)
        stored = numbered(sample, len(conv.samples) + 1, len(conv.events))
        conv.samples.append(stored)
        return stored

    def samples(self, conversation_id: str, *, since: int = 0) -> list[Sample]:
        """The samples after turn `since`, oldest first."""
        with self._lock:
            return self._conversation(conversation_id).samples[max(since, 0) :]

    def latest_sample(self, conversation_id: str) -> Sample | None:
        """The newest sample, or None before the first."""
        with self._lock:
            found = self._conversation(conversation_id).samples
            return found[-1] if found else None

    def close(self) -> None:
        """Nothing to release; kept so callers can treat every store alike."""


def _newest(log: list[Message], terms: list[str]) -> list[Found]:
    """The newest CANDIDATES messages of the log holding every term, newest first."""
    out: list[Found] = []
    for seq in range(len(log), scan_bound(terms, len(log)), -1):
        message = log[seq - 1]
        hit = found(message.id, message.role, seq, search_text(message))
        if holds_all(hit, terms):
            out.append(hit)
            if len(out) == CANDIDATES:
                break
    return out
