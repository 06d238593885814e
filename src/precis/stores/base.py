"""The `ConversationStore` protocol, its value types and errors, and helpers backends share."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, Protocol, Self, TypeVar, cast, runtime_checkable

from precis.core.errors import (
    ConversationNotFound,
    IdempotencyConflict,
    InvalidInput,
    StoreError,
    UnknownMessage,
    VersionConflict,
)
from precis.core.messages import Message
from precis.stores.samples import Sample
from precis.stores.scoring import (
    SNIPPET_CHARS,
    folded_term_score,
    query_terms,
    search_text,
    search_text_of,
    snippet,
    term_score,
)

__all__ = [
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "SNIPPET_CHARS",
    "AppendCheck",
    "AppendSample",
    "Compaction",
    "CompactionEvent",
    "ContextSnapshot",
    "ContextTail",
    "ConversationNotFound",
    "ConversationStore",
    "MessageIds",
    "RecallHit",
    "StoreBase",
    "StoreError",
    "UnknownMessage",
    "VersionConflict",
    "WouldWait",
    "check_context_ids",
    "check_idempotency_key",
    "check_page",
    "check_summary",
    "duplicate_id",
    "fingerprint",
    "folded_term_score",
    "json_safe",
    "normalize_batch",
    "normalize_message",
    "query_terms",
    "replayed",
    "search_text",
    "search_text_of",
    "snippet",
    "tail_of",
    "term_score",
    "utc_now",
]

T = TypeVar("T")

# Longest idempotency key an append takes (a UUID is 36; the service's header is as long).
MAX_IDEMPOTENCY_KEY_CHARS = 255


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """One committed compaction, kept so an operator can see when and why context shrank."""

    trigger: str
    mode: str
    stats: Mapping[str, Any]
    summary_id: str
    at: str


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One message found by recall, with enough text to decide whether to fetch it whole."""

    id: str
    role: str
    seq: int
    snippet: str
    score: float


@dataclass(frozen=True, slots=True)
class ContextSnapshot:
    """What is in context at one moment, plus what a compaction needs to commit against it."""

    messages: list[Message]
    version: int
    last_seq: int
    compacted: bool


@dataclass(frozen=True, slots=True)
class ContextTail:
    """What an append is checked against, read without the rest of the context.

    `turn`: the in-context messages from the last one that is not a tool result to the end (an
    assistant message whose calls may still await results, and the results so far); all of the
    context when every message in it is a tool result. `start`: the turn's index in the context.
    `pinned`: the pinned messages in context, in context order. The rest is the conversation as
    it stood at that read (the fields of `ContextSnapshot`, its system prompt and whether a
    compaction made it stale): what a check right after an append would otherwise read again.
    """

    turn: list[Message]
    start: int
    pinned: list[Message]
    version: int
    last_seq: int
    compacted: bool
    system_prompt: str
    prompt_stale: bool


# What a store's append runs inside its transaction, against the tail as it stands then (no other
# write to the conversation can come between): it returns the messages to store, or raises to
# refuse the append, so nothing is written.
AppendCheck = Callable[[ContextTail], Sequence[Message]]

# What a store's append records in the same transaction, once the messages are stored, when the
# conversation has a sample to grow: given the stored messages and the system prompt, the sample
# of those messages alone, which the store adds to the latest (None: record nothing). So one
# append is one transaction, its composition sample included.
AppendSample = Callable[[Sequence[Message], str], Sample | None]


def tail_of(
    snapshot: ContextSnapshot, system_prompt: str = "", prompt_stale: bool = False
) -> ContextTail:
    """The `ContextTail` of a whole context."""
    context = snapshot.messages
    start = max(len(context) - 1, 0)
    while start > 0 and context[start].role == "tool":
        start -= 1
    return ContextTail(
        list(context[start:]),
        start,
        [m for m in context if m.pinned],
        snapshot.version,
        snapshot.last_seq,
        snapshot.compacted,
        system_prompt,
        prompt_stale,
    )


@runtime_checkable
class ConversationStore(Protocol):
    """Where conversations live: an append-only log, an in-context id list, prompt and events."""

    def create(self, conversation_id: str, *, system_prompt: str = "") -> None:
        """Create the conversation if missing; an existing one is left untouched."""
        ...

    def exists(self, conversation_id: str) -> bool:
        """Whether the conversation is in the store."""
        ...

    def conversations(self) -> list[str]:
        """Every conversation id, sorted."""
        ...

    def append(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        check: AppendCheck | None = None,
        idempotency_key: str | None = None,
        sample: AppendSample | None = None,
    ) -> list[Message]:
        """Append in one transaction; return the messages with id and created_at filled in.

        `check` is run on the context's tail inside the transaction, under the conversation's
        write lock, and the messages it returns are the ones stored. With `idempotency_key`, an
        append whose key the conversation already holds writes nothing and returns the messages
        that key stored (without running `check` or `sample`); IdempotencyConflict if it stored
        others. `sample` is called after the write when the conversation has a latest sample,
        and what it returns is recorded as `add_sample(..., grow=True)` records it, there.
        """
        ...

    def context(
        self, conversation_id: str, *, since: ContextSnapshot | None = None
    ) -> ContextSnapshot:
        """The in-context messages in order; everything when never compacted.

        `since` is a snapshot this store gave of the conversation: when only appends came after
        it, the store may return its messages (the same objects) with the appended ones after
        them, read alone, or `since` itself when nothing came; a compaction or a pin since means
        a whole read."""
        ...

    def tail(self, conversation_id: str) -> ContextTail:
        """The context's last turn and pinned messages, at a cost that does not grow with it."""
        ...

    def history(
        self, conversation_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Every message ever appended (summaries included), in seq order."""
        ...

    def get(self, conversation_id: str, ids: Sequence[str]) -> list[Message]:
        """The messages with these ids, in the order asked; UnknownMessage for a missing one."""
        ...

    def count(self, conversation_id: str) -> int:
        """How many messages the log holds."""
        ...

    def commit_compaction(
        self,
        conversation_id: str,
        *,
        expected_version: int,
        snapshot_last_seq: int,
        summary: Message,
        context_ids: Sequence[str],
        event: CompactionEvent,
    ) -> ContextSnapshot:
        """Atomically append the summary, replace the id list, bump the version, log the event."""
        ...

    def set_pinned(self, conversation_id: str, message_id: str, pinned: bool) -> None:
        """Pin or unpin a stored message; the log stays append-only (the flag is an overlay).

        Bumps the context version, so a compaction planned before the pin cannot commit."""
        ...

    def events(self, conversation_id: str) -> list[CompactionEvent]:
        """The compaction events, oldest first."""
        ...

    def system_prompt(self, conversation_id: str) -> tuple[str, bool]:
        """The compiled system prompt and whether a compaction made it stale."""
        ...

    def set_system_prompt(self, conversation_id: str, text: str) -> None:
        """Store a recompiled system prompt and clear the stale flag."""
        ...

    def recall(self, conversation_id: str, query: str, limit: int = 10) -> list[RecallHit]:
        """Search every message, evicted ones and summaries included; best first."""
        ...

    def add_sample(
        self, conversation_id: str, sample: Sample, *, grow: bool = False
    ) -> Sample | None:
        """Record what filled the window after a turn, as the next turn; return it as stored.

        The store sets `turn` (1, 2, … per conversation) and `version` (how many compactions
        came before it: the context version they made, pins aside). With
        `grow` the sample holds only an append's new messages, added to the latest sample's; when
        there is none yet, nothing is recorded and None returned (the caller counts it whole).
        """
        ...

    def samples(self, conversation_id: str, *, since: int = 0) -> list[Sample]:
        """The samples after turn `since`, oldest first."""
        ...

    def latest_sample(self, conversation_id: str) -> Sample | None:
        """The newest sample, or None before the first."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


@dataclass(frozen=True, slots=True)
class Compaction:
    """The arguments of one `commit_compaction`, with the checks every backend makes of them."""

    expected_version: int
    snapshot_last_seq: int
    summary: Message
    context_ids: tuple[str, ...]
    event: CompactionEvent

    def check(
        self, conversation_id: str, version: int, holds: Callable[[str], bool]
    ) -> dict[str, Any]:
        """Refuse a stale version, a bad summary or id list; return the event's stats as data.

        `holds(id)` says whether the conversation already has a message with that id.
        """
        if version != self.expected_version:
            raise VersionConflict(conversation_id, self.expected_version, version)
        check_summary(conversation_id, self.summary, self.event)
        if holds(self.summary.id):
            raise duplicate_id(conversation_id, self.summary.id)
        check_context_ids(conversation_id, self.context_ids, self.summary.id, holds)
        return json_safe(self.event.stats, f"stats of the compaction event of {conversation_id!r}")

    def id_list(self, later: Iterable[str]) -> list[str]:
        """The new context: the kept ids, then those appended after the snapshot not among them."""
        kept = set(self.context_ids)
        return [*self.context_ids, *(i for i in later if i not in kept)]


class WouldWait(Exception):
    """A store call that could not be made without waiting (for a lock, another writer, the
    network): nothing was done, and the caller makes it again where it may wait."""


class StoreBase:
    """What the backends share above their storage: the commit's argument handling, `with`."""

    def without_waiting(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)`, one of this store's methods, made now if it can be made
        without waiting on I/O; else `WouldWait`, nothing done. An async session makes its
        store calls this way on its event loop, and those refused on a worker thread. A store
        that can promise nothing (over a network) refuses every call."""
        raise WouldWait(getattr(fn, "__name__", "call"))

    def commit_compaction(
        self,
        conversation_id: str,
        *,
        expected_version: int,
        snapshot_last_seq: int,
        summary: Message,
        context_ids: Sequence[str],
        event: CompactionEvent,
    ) -> ContextSnapshot:
        """Atomically append the summary, replace the id list, bump the version, log the event."""
        compaction = Compaction(
            expected_version, snapshot_last_seq, summary, tuple(context_ids), event
        )
        return self._commit(conversation_id, compaction)

    def _commit(self, conversation_id: str, compaction: Compaction) -> ContextSnapshot:
        """commit_compaction in one transaction: `compaction.check` first, then all or nothing."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections and files."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MessageIds:
    """Makes 'msg_' + 13 hex ms + 16 hex random ids that sort by time, strictly within one store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def new(self) -> str:
        """A fresh id greater than every id this generator returned before."""
        with self._lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self._last_ms:
                ms = self._last_ms
                rand = self._last_rand + 1
                if rand >= 1 << 64:
                    ms += 1
                    rand = int.from_bytes(os.urandom(8), "big") >> 1
            else:
                # Keep the top bit clear so increments within one ms rarely overflow.
                rand = int.from_bytes(os.urandom(8), "big") >> 1
            self._last_ms, self._last_rand = ms, rand
            return f"msg_{ms:013x}{rand:016x}"


def utc_now() -> str:
    """The current UTC time as ISO 8601 with microseconds and a Z, the created_at format.

    Microseconds, so that a message appended right after a compaction sorts after its summary.
    """
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def json_safe(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A JSON round-tripped copy, so every backend returns the same plain data or fails alike."""
    if not value:
        return {}
    top = dict(value)
    copied = _plain_dict(top, 0)  # what the round trip gives, when the data is plain already
    if copied is not _NOT_PLAIN:
        return cast(dict[str, Any], copied)
    try:
        loaded: dict[str, Any] = json.loads(json.dumps(top, ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} is not JSON-serialisable: {exc}") from None
    return loaded


# Plain data nested deeper than this goes through the JSON round trip (which also meets cycles).
_PLAIN_DEPTH = 100
_NOT_PLAIN: Final = object()


def _plain_dict(data: dict[Any, Any], depth: int) -> object:
    """A fresh copy of dicts and lists of str, int, float, bool and None (str keys only), which
    is what a JSON round trip gives of them; `_NOT_PLAIN` for anything else (a tuple, a Mapping,
    a subclass, a number key), which the round trip itself handles or refuses."""
    if depth > _PLAIN_DEPTH:
        return _NOT_PLAIN
    out: dict[str, Any] = {}
    for key, item in data.items():
        if type(key) is not str:
            return _NOT_PLAIN
        kind = type(item)
        if kind is str or kind is int or kind is float or kind is bool or item is None:
            out[key] = item
        elif kind is dict:
            copied = _plain_dict(item, depth + 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            out[key] = copied
        elif kind is list:
            copied = _plain_list(item, depth + 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            out[key] = copied
        else:
            return _NOT_PLAIN
    return out


def _plain_list(items: list[Any], depth: int) -> object:
    """`_plain_dict` for a list."""
    if depth > _PLAIN_DEPTH:
        return _NOT_PLAIN
    out: list[Any] = []
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is float or kind is bool or item is None:
            out.append(item)
        elif kind is dict:
            copied = _plain_dict(item, depth + 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            out.append(copied)
        elif kind is list:
            copied = _plain_list(item, depth + 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            out.append(copied)
        else:
            return _NOT_PLAIN
    return out


def normalize_message(
    message: Message, *, conversation_id: str, ids: MessageIds, now: str
) -> Message:
    """The message as the store will keep it: id and created_at set, JSON fields plain data."""
    message_id = message.id or ids.new()
    where = f"message {message_id!r} of conversation {conversation_id!r}"
    return replace(
        message,
        id=message_id,
        created_at=message.created_at if message.created_at is not None else now,
        metadata=json_safe(message.metadata, f"metadata of {where}"),
        openai_extra=json_safe(message.openai_extra, f"openai_extra of {where}"),
    )


def normalize_batch(
    conversation_id: str, messages: Sequence[Message], ids: MessageIds, held: Container[str]
) -> list[Message]:
    """The batch as the store will keep it; StoreError for an id repeated in it or in `held`."""
    now = utc_now()
    out: list[Message] = []
    seen: set[str] = set()
    for message in messages:
        stored = normalize_message(message, conversation_id=conversation_id, ids=ids, now=now)
        if stored.id in seen or stored.id in held:
            raise duplicate_id(conversation_id, stored.id)
        seen.add(stored.id)
        out.append(stored)
    return out


def duplicate_id(conversation_id: str, message_id: str) -> StoreError:
    """The error for an id the conversation (or the batch being appended) already holds."""
    return StoreError(
        f"message id {message_id!r} already exists in conversation {conversation_id!r}"
    )


def check_idempotency_key(key: str | None) -> None:
    """Refuse an idempotency key that is empty, too long or holds control characters."""
    if key is None:
        return
    if not isinstance(key, str) or not key or len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidInput(
            f"idempotency key: 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters, got {str(key)[:40]!r}"
        )
    if not key.isprintable():
        raise InvalidInput(f"idempotency key {key[:40]!r}: only printable characters")


def fingerprint(messages: Sequence[Message]) -> str:
    """A digest of an append's messages as the caller gave them, so a retry is told apart
    from a different append reusing its idempotency key."""
    rows = [
        [
            m.role,
            m.content,
            m.id,
            [[tc.id, tc.name, tc.arguments] for tc in m.tool_calls],
            m.tool_call_id,
            m.kind,
            m.pinned,
            m.metadata,
            m.created_at,
            m.reasoning,
            m.images,
            m.openai_extra,
        ]
        for m in messages
    ]
    try:
        text = json.dumps(rows, sort_keys=True, default=repr)  # ASCII: lone surrogates escaped
    except (TypeError, ValueError):  # keys no JSON has: the store refuses the data after this
        text = repr(rows).encode("ascii", "backslashreplace").decode("ascii")
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def replayed(conversation_id: str, key: str, stored: str, given: str) -> None:
    """Refuse a key whose stored fingerprint is not the one given (another append's key)."""
    if stored != given:
        raise IdempotencyConflict(conversation_id, key)


def check_page(offset: int, limit: int | None) -> None:
    """Refuse a negative history page before any backend turns it into a query."""
    if offset < 0:
        raise StoreError(f"history offset must be >= 0, got {offset}")
    if limit is not None and limit < 0:
        raise StoreError(f"history limit must be >= 0 or None, got {limit}")


def check_summary(conversation_id: str, summary: Message, event: CompactionEvent) -> None:
    """Refuse a summary without a preassigned id, or an event that names another summary."""
    if not summary.id:
        raise StoreError(
            f"conversation {conversation_id!r}: the summary needs a preassigned id "
            "so context_ids can place it"
        )
    if event.summary_id and event.summary_id != summary.id:
        raise StoreError(
            f"conversation {conversation_id!r}: event.summary_id {event.summary_id!r} "
            f"is not the summary's id {summary.id!r}"
        )


def check_context_ids(
    conversation_id: str,
    context_ids: Sequence[str],
    summary_id: str,
    exists: Callable[[str], bool],
) -> None:
    """Refuse duplicate ids and ids the conversation does not hold (the summary excepted)."""
    distinct = set(context_ids)
    placed = summary_id in distinct
    distinct.discard(summary_id)
    if len(distinct) + placed == len(context_ids) and all(map(exists, distinct)):
        return  # the usual case, found without naming the first bad id
    seen: set[str] = set()
    for message_id in context_ids:
        if message_id in seen:
            raise StoreError(
                f"conversation {conversation_id!r}: id {message_id!r} appears twice in context_ids"
            )
        seen.add(message_id)
        if message_id != summary_id and not exists(message_id):
            raise UnknownMessage(conversation_id, message_id)
