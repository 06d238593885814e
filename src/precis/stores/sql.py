"""The SQL store: the store contract written once, for SQLite and PostgreSQL alike.

`SQLStore` holds every query the two backends share. What differs between the databases is a
`Dialect` (stores/dialect.py: the placeholder style, the row lock, the DDL types, the extra
columns a message row carries for search, recall); what differs in connection handling is a
subclass (`SQLiteStore`: one WAL file shared by threads under a lock; `PostgresStore`: a psycopg
pool, one pooled connection per call). The shared SQL is written with `?` placeholders;
`Dialect.sql` rewrites a statement into the driver's style.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from precis.core.errors import ConversationNotFound, UnknownMessage, VersionConflict
from precis.core.messages import Message
from precis.stores import base, recall
from precis.stores.base import (
    AppendCheck,
    AppendSample,
    Compaction,
    CompactionEvent,
    ContextSnapshot,
    ContextTail,
    RecallHit,
    StoreBase,
)
from precis.stores.dialect import Dialect, Handle, Rows, context_sql
from precis.stores.recall import CANDIDATES
from precis.stores.rows import (
    INSERT_COLUMNS,
    M_COLUMNS,
    MESSAGE_COLUMNS,
    apply_pins,
    message_from_row,
    message_values,
)
from precis.stores.samples import check_sample, grown
from precis.stores.sql_samples import SQLSamples

__all__ = ["Dialect", "Handle", "Rows", "SQLStore", "context_sql"]

# Ids per IN (...) list: SQLite's default cap on host parameters is 999 in old builds.
IN_CHUNK = 500


class _Row(NamedTuple):
    """A conversation's counters: `version` moves with every compaction and pin, `compactions`
    with compactions only (the context is the in_context list once there was one)."""

    version: int
    next_seq: int
    next_position: int
    compactions: int


class _Head(NamedTuple):
    """A conversation's row as an append or a tail reads it: counters and system prompt."""

    counters: _Row
    system_prompt: str
    prompt_stale: bool


_IN_CONTEXT_HEAD = "INSERT INTO in_context (conversation_id, position, message_id) VALUES "


class SQLStore(SQLSamples, StoreBase):
    """A `ConversationStore` over SQL; subclasses open the connection and run transactions."""

    def __init__(self, dialect: Dialect, where: str) -> None:
        self._dialect = dialect
        self._where = where
        self._ids = base.MessageIds()
        self._q = dialect.sql
        columns = (*INSERT_COLUMNS, *dialect.extra_columns)
        self._insert_head = f"INSERT INTO messages ({', '.join(columns)}) VALUES "

    # --- what a subclass provides -------------------------------------------------------------

    def _transaction(self, *, write: bool) -> AbstractContextManager[Handle]:
        """One transaction; a write one keeps other writers of the same rows out until commit."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection(s); later calls raise StoreError."""
        raise NotImplementedError

    def _statement(self) -> AbstractContextManager[Handle]:
        """Where a read of one statement runs: one statement sees one snapshot by itself, so a
        store may run it without a transaction around it (PostgreSQL: one round trip, not 3)."""
        return self._transaction(write=False)

    # --- shared plumbing ----------------------------------------------------------------------

    def _conversation_row(self, db: Handle, conversation_id: str, *, lock: bool = False) -> _Row:
        """The conversation's counters, row-locked for a write; or ConversationNotFound."""
        row = db.execute(
            self._q(
                "SELECT version, next_seq, next_position, compactions FROM conversations "
                "WHERE id = ?"
            )
            + (self._dialect.for_update if lock else ""),
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise ConversationNotFound(conversation_id)
        return _Row(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    def _head(self, db: Handle, conversation_id: str, *, lock: bool = False) -> _Head | None:
        """The conversation's counters (row-locked for a write) and its system prompt, in one
        read; None if missing."""
        row = db.execute(
            self._q(
                "SELECT version, next_seq, next_position, compactions, system_prompt, "
                "prompt_stale FROM conversations WHERE id = ?"
            )
            + (self._dialect.for_update if lock else ""),
            (conversation_id,),
        ).fetchone()
        if row is None:
            return None
        counters = _Row(int(row[0]), int(row[1]), int(row[2]), int(row[3]))
        return _Head(counters, str(row[4]), bool(row[5]))

    def _chunks(
        self, db: Handle, select: str, conversation_id: str, ids: Sequence[str], column: str = "id"
    ) -> list[Any]:
        """The rows of `select … WHERE conversation_id = ? AND <column> IN (…)` for these ids."""
        found: list[Any] = []
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), IN_CHUNK):
            chunk = unique[start : start + IN_CHUNK]
            marks = ", ".join("?" * len(chunk))
            query = f"{select} WHERE conversation_id = ? AND {column} IN ({marks})"
            found += db.execute(self._q(query), (conversation_id, *chunk)).fetchall()
        return found

    def _existing_ids(self, db: Handle, conversation_id: str, ids: Sequence[str]) -> set[str]:
        return {
            str(row[0]) for row in self._chunks(db, "SELECT id FROM messages", conversation_id, ids)
        }

    def _insert(
        self, db: Handle, conversation_id: str, messages: Sequence[Message], first_seq: int
    ) -> list[Message]:
        """Normalize and insert a batch at seq `first_seq`…; refuse ids the conversation has."""
        given = [m.id for m in messages if m.id]
        held = self._existing_ids(db, conversation_id, given) if given else set()
        stored = base.normalize_batch(conversation_id, messages, self._ids, held)
        if stored:
            extras = self._dialect.message_extras(db, stored)
            self._dialect.insert_rows(
                db,
                self._insert_head,
                [
                    (*message_values(conversation_id, first_seq + i, m), *extra)
                    for i, (m, extra) in enumerate(zip(stored, extras, strict=True))
                ],
            )
            self._dialect.after_insert(db, stored, extras)
        return stored

    def _pin_overlay(self, db: Handle, conversation_id: str) -> dict[str, bool]:
        """The pin flags set after append: one indexed read of the conversation's (few) rows."""
        rows = db.execute(
            self._q("SELECT message_id, pinned FROM pins WHERE conversation_id = ?"),
            (conversation_id,),
        ).fetchall()
        return {str(r[0]): bool(r[1]) for r in rows}

    def _with_pins(
        self, db: Handle, conversation_id: str, messages: list[Message]
    ) -> list[Message]:
        """Apply the pin overlay."""
        return apply_pins(messages, self._pin_overlay(db, conversation_id))

    def _pins(self, db: Handle, conversation_id: str) -> tuple[dict[str, bool], list[str]]:
        """The pin overlay (`_pin_overlay`) and the ids of the messages appended pinned, in one
        read: the pins table's (few) rows and the index of pinned rows (m004)."""
        rows = db.execute(
            self._q(
                "SELECT message_id, pinned, 1 FROM pins WHERE conversation_id = ? UNION ALL "
                "SELECT id, pinned, 0 FROM messages WHERE conversation_id = ? AND pinned"
            ),
            (conversation_id, conversation_id),
        ).fetchall()
        overlay = {str(r[0]): bool(r[1]) for r in rows if int(r[2])}
        return overlay, [str(r[0]) for r in rows if not int(r[2])]

    def _pinned(
        self,
        db: Handle,
        conversation_id: str,
        compacted: bool,
        overlay: dict[str, bool],
        flagged: list[str],
    ) -> list[Message]:
        """The pinned messages in context, in context order: those appended pinned (`flagged`)
        and the overlay's, read with their place in one statement rather than by reading the
        context."""
        ids = flagged + [i for i, pinned in overlay.items() if pinned]
        ids = [i for i in dict.fromkeys(ids) if overlay.get(i, True)]
        if compacted:  # only what is in context: its place is its position
            head = (
                f"SELECT c.position, {M_COLUMNS} FROM in_context AS c "
                f"{self._dialect.context_join} messages AS m ON m.conversation_id = "
                "c.conversation_id AND m.id = c.message_id WHERE c.conversation_id = ? AND "
                "c.message_id IN"
            )
        else:
            head = (
                f"SELECT seq, {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND id IN "
            )
        rows: list[Any] = []
        for start in range(0, len(ids), IN_CHUNK):
            chunk = ids[start : start + IN_CHUNK]
            query = self._q(f"{head} ({', '.join('?' * len(chunk))})")
            rows += db.execute(query, (conversation_id, *chunk)).fetchall()
        rows.sort(key=lambda row: int(row[0]))
        return apply_pins([message_from_row(row[1:]) for row in rows], overlay)

    def _snapshot(self, db: Handle, conversation_id: str) -> ContextSnapshot:
        version, next_seq, _, compactions = self._conversation_row(db, conversation_id)
        if compactions == 0:
            query = self._q(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY seq"
            )
        else:
            query = self._dialect.context_sql
        rows = db.execute(query, (conversation_id,)).fetchall()
        return ContextSnapshot(
            messages=self._with_pins(db, conversation_id, [message_from_row(r) for r in rows]),
            version=version,
            last_seq=next_seq - 1,
            compacted=compactions > 0,
        )

    def _ensure(self, db: Handle, conversation_id: str, system_prompt: str = "") -> None:
        db.execute(
            self._q(
                "INSERT INTO conversations (id, system_prompt, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING"
            ),
            (conversation_id, system_prompt, base.utc_now()),
        )

    # --- the protocol -------------------------------------------------------------------------

    def create(self, conversation_id: str, *, system_prompt: str = "") -> None:
        """Create the conversation if missing; an existing one is left untouched (and unwritten,
        so a read-only database still opens its conversations)."""
        if self.exists(conversation_id):
            return
        with self._transaction(write=True) as db:
            self._ensure(db, conversation_id, system_prompt)

    def exists(self, conversation_id: str) -> bool:
        """Whether the conversation is in the store."""
        with self._statement() as db:
            query = self._q("SELECT 1 FROM conversations WHERE id = ?")
            return db.execute(query, (conversation_id,)).fetchone() is not None

    def conversations(self) -> list[str]:
        """Every conversation id, sorted by code point (as SQLite's BINARY and C collations)."""
        with self._transaction(write=False) as db:
            return sorted(
                str(row[0]) for row in db.execute("SELECT id FROM conversations").fetchall()
            )

    def append(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        check: AppendCheck | None = None,
        idempotency_key: str | None = None,
        sample: AppendSample | None = None,
    ) -> list[Message]:
        """Append in one transaction under the conversation's lock; ids and seq filled in. The
        key's record, the tail `check` is given, the write and `sample`'s record are all read
        and made there."""
        base.check_idempotency_key(idempotency_key)
        given = base.fingerprint(messages) if idempotency_key is not None else ""
        with self._transaction(write=True) as db:
            # The conversation's row locked, and its system prompt for the sample, in one read;
            # a conversation not yet made is made first (the write a session's first use does).
            head = self._head(db, conversation_id, lock=True)
            if head is None:
                self._ensure(db, conversation_id)
                head = self._head(db, conversation_id, lock=True)
                if head is None:
                    raise ConversationNotFound(conversation_id)
            _, next_seq, next_position, compactions = head.counters
            if idempotency_key is not None:
                row = db.execute(
                    self._q(
                        "SELECT fingerprint, message_ids FROM idempotency_keys "
                        "WHERE conversation_id = ? AND key = ?"
                    ),
                    (conversation_id, idempotency_key),
                ).fetchone()
                if row is not None:
                    base.replayed(conversation_id, idempotency_key, str(row[0]), given)
                    return self._messages(db, conversation_id, json.loads(row[1]))
            if check is not None:
                messages = check(self._tail(db, conversation_id, head))
            stored = self._insert(db, conversation_id, messages, next_seq)
            if compactions > 0 and stored:
                self._dialect.insert_rows(
                    db,
                    _IN_CONTEXT_HEAD,
                    [(conversation_id, next_position + i, m.id) for i, m in enumerate(stored)],
                )
                next_position += len(stored)
            db.execute(
                self._q("UPDATE conversations SET next_seq = ?, next_position = ? WHERE id = ?"),
                (next_seq + len(stored), next_position, conversation_id),
            )
            if idempotency_key is not None:
                db.execute(
                    self._q(
                        "INSERT INTO idempotency_keys (conversation_id, key, fingerprint, "
                        "message_ids, created_at) VALUES (?, ?, ?, ?, ?)"
                    ),
                    (
                        conversation_id,
                        idempotency_key,
                        given,
                        json.dumps([m.id for m in stored]),
                        base.utc_now(),
                    ),
                )
            if sample is not None:
                self._sample_append(
                    db, conversation_id, stored, sample, compactions, head.system_prompt
                )
            return stored

    def _sample_append(
        self,
        db: Handle,
        conversation_id: str,
        stored: Sequence[Message],
        sample: AppendSample,
        compactions: int,
        system_prompt: str,
    ) -> None:
        """An append's sample, in its transaction: grown onto the latest, if there is one."""
        latest = self._latest_sample(db, conversation_id)
        if latest is None:
            return
        made = sample(stored, system_prompt)
        if made is not None:
            check_sample(conversation_id, made)
            self._insert_sample(db, conversation_id, grown(latest, made), latest, compactions)

    def context(
        self, conversation_id: str, *, since: ContextSnapshot | None = None
    ) -> ContextSnapshot:
        """The in-context messages in order; everything when never compacted. With `since`,
        when only appends came after it, only the messages they added are read."""
        one = self._dialect.context_since_one
        if since is not None and one is not None:
            with self._statement() as db:
                query = one[1] if since.compacted else one[0]
                rows = db.execute(query, (since.last_seq, conversation_id)).fetchall()
            if not rows:
                raise ConversationNotFound(conversation_id)
            version, next_seq, compactions = (int(v) for v in rows[0][:3])
            if version == since.version and (compactions > 0) == since.compacted:
                later = [message_from_row(r[3:]) for r in rows if r[3] is not None]
                return ContextSnapshot(
                    [*since.messages, *later], version, next_seq - 1, since.compacted
                )
        with self._transaction(write=False) as db:
            if since is None:
                return self._snapshot(db, conversation_id)
            version, next_seq, _, compactions = self._conversation_row(db, conversation_id)
            if version != since.version or (compactions > 0) != since.compacted:
                return self._snapshot(db, conversation_id)
            added: list[Message] = []
            if next_seq - 1 != since.last_seq:
                query = self._dialect.context_since_sql
                if compactions == 0:
                    query = self._q(
                        f"SELECT {MESSAGE_COLUMNS} FROM messages "
                        "WHERE conversation_id = ? AND seq > ? ORDER BY seq"
                    )
                rows = db.execute(query, (conversation_id, since.last_seq)).fetchall()
                added = [message_from_row(r) for r in rows]
            return ContextSnapshot(
                [*since.messages, *added], version, next_seq - 1, since.compacted
            )

    def tail(self, conversation_id: str) -> ContextTail:
        """The context's last turn and its pinned messages: indexed reads of those rows only."""
        with self._transaction(write=False) as db:
            return self._tail(db, conversation_id)

    def _tail(self, db: Handle, conversation_id: str, head: _Head | None = None) -> ContextTail:
        """`tail` inside a transaction: an append's reads it under the conversation's lock
        (and has read the conversation's row, `head`)."""
        if head is None:
            head = self._head(db, conversation_id)
            if head is None:
                raise ConversationNotFound(conversation_id)
        compacted = head.counters.compactions > 0
        overlay, flagged = self._pins(db, conversation_id)
        # The turn with where it starts; no rows: an empty context, which starts at 0.
        query = self._dialect.turn_sql[1 if compacted else 0]
        rows = db.execute(query, (conversation_id,) * 3).fetchall()
        first = int(rows[0][0]) if rows else (0 if compacted else 1)
        return ContextTail(
            turn=apply_pins([message_from_row(r[1:]) for r in rows], overlay),
            start=first if compacted else first - 1,  # seq counts from 1, positions from 0
            pinned=self._pinned(db, conversation_id, compacted, overlay, flagged),
            version=head.counters.version,
            last_seq=head.counters.next_seq - 1,
            compacted=compacted,
            system_prompt=head.system_prompt,
            prompt_stale=head.prompt_stale,
        )

    def history(
        self, conversation_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Every message ever appended (summaries included), in seq order."""
        base.check_page(offset, limit)
        # seq runs 1, 2, 3… without gaps, so the offset is a seq bound, not a row skip.
        query = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND seq > ? "
        query += "ORDER BY seq" if limit is None else "ORDER BY seq LIMIT ?"
        params = (conversation_id, offset) if limit is None else (conversation_id, offset, limit)
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            rows = db.execute(self._q(query), params).fetchall()
            return self._with_pins(db, conversation_id, [message_from_row(r) for r in rows])

    def get(self, conversation_id: str, ids: Sequence[str]) -> list[Message]:
        """The messages with these ids, in the order asked; UnknownMessage for a missing one."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            return self._messages(db, conversation_id, ids)

    def _messages(self, db: Handle, conversation_id: str, ids: Sequence[str]) -> list[Message]:
        """`get` inside a transaction."""
        select = f"SELECT {MESSAGE_COLUMNS} FROM messages"
        rows = self._chunks(db, select, conversation_id, ids)
        found = {str(row[0]): message_from_row(row) for row in rows}
        for message_id in ids:
            if message_id not in found:
                raise UnknownMessage(conversation_id, message_id)
        return self._with_pins(db, conversation_id, [found[i] for i in ids])

    def set_pinned(self, conversation_id: str, message_id: str, pinned: bool) -> None:
        """Pin or unpin a stored message (an overlay row; the message row never changes)."""
        with self._transaction(write=True) as db:
            self._conversation_row(db, conversation_id, lock=True)
            if not self._existing_ids(db, conversation_id, [message_id]):
                raise UnknownMessage(conversation_id, message_id)
            db.execute(
                self._q(
                    "INSERT INTO pins (conversation_id, message_id, pinned) VALUES (?, ?, ?) "
                    "ON CONFLICT (conversation_id, message_id) "
                    "DO UPDATE SET pinned = excluded.pinned"
                ),
                (conversation_id, message_id, pinned),
            )
            # A compaction planned before the pin must plan again (its compare-and-set fails).
            db.execute(
                self._q("UPDATE conversations SET version = version + 1 WHERE id = ?"),
                (conversation_id,),
            )

    def count(self, conversation_id: str) -> int:
        """How many messages the log holds."""
        with self._transaction(write=False) as db:
            return self._conversation_row(db, conversation_id).next_seq - 1

    def _commit(self, conversation_id: str, compaction: Compaction) -> ContextSnapshot:
        """Compare-and-set on `version` under the lock: summary, id list, event, or nothing."""
        summary = compaction.summary
        with self._transaction(write=True) as db:
            version, next_seq, _, _ = self._conversation_row(db, conversation_id, lock=True)
            # A stale version fails the check before anything else; only a current one reads ids.
            existing = (
                self._existing_ids(db, conversation_id, [*compaction.context_ids, summary.id])
                if version == compaction.expected_version
                else set()
            )
            stats = compaction.check(conversation_id, version, existing.__contains__)
            later = db.execute(
                self._q(
                    "SELECT id FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq"
                ),
                (conversation_id, compaction.snapshot_last_seq),
            ).fetchall()
            (stored,) = self._insert(db, conversation_id, [summary], next_seq)
            id_list = compaction.id_list(str(row[0]) for row in later)
            db.execute(
                self._q("DELETE FROM in_context WHERE conversation_id = ?"), (conversation_id,)
            )
            if id_list:
                self._dialect.insert_rows(
                    db,
                    _IN_CONTEXT_HEAD,
                    [(conversation_id, i, message_id) for i, message_id in enumerate(id_list)],
                )
            # The WHERE repeats the compare-and-set, so the write itself cannot skip a version.
            updated = db.execute(
                self._q(
                    "UPDATE conversations SET version = version + 1, next_seq = ?, next_position = "
                    "?, compactions = compactions + 1, prompt_stale = TRUE "
                    "WHERE id = ? AND version = ?"
                ),
                (next_seq + 1, len(id_list), conversation_id, compaction.expected_version),
            )
            if updated.rowcount != 1:
                raise VersionConflict(
                    conversation_id, compaction.expected_version, compaction.expected_version + 1
                )
            event = compaction.event
            db.execute(
                self._q(
                    "INSERT INTO events (conversation_id, trigger, mode, stats, summary_id, at) "
                    "VALUES (?, ?, ?, ?, ?, ?)"
                ),
                (
                    conversation_id,
                    event.trigger,
                    event.mode,
                    json.dumps(stats, ensure_ascii=False),
                    stored.id,
                    event.at,
                ),
            )
            return self._snapshot(db, conversation_id)

    def events(self, conversation_id: str) -> list[CompactionEvent]:
        """The compaction events, oldest first."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            rows = db.execute(
                self._q(
                    "SELECT trigger, mode, stats, summary_id, at FROM events "
                    "WHERE conversation_id = ? ORDER BY row_id"
                ),
                (conversation_id,),
            ).fetchall()
        return [
            CompactionEvent(
                trigger=row[0], mode=row[1], stats=json.loads(row[2]), summary_id=row[3], at=row[4]
            )
            for row in rows
        ]

    def system_prompt(self, conversation_id: str) -> tuple[str, bool]:
        """The compiled system prompt and whether a compaction made it stale."""
        with self._statement() as db:
            row = db.execute(
                self._q("SELECT system_prompt, prompt_stale FROM conversations WHERE id = ?"),
                (conversation_id,),
            ).fetchone()
        if row is None:
            raise ConversationNotFound(conversation_id)
        return str(row[0]), bool(row[1])

    def set_system_prompt(self, conversation_id: str, text: str) -> None:
        """Store a recompiled system prompt and clear the stale flag."""
        with self._transaction(write=True) as db:
            updated = db.execute(
                self._q(
                    "UPDATE conversations SET system_prompt = ?, prompt_stale = FALSE WHERE id = ?"
                ),
                (text, conversation_id),
            )
            if updated.rowcount == 0:
                raise ConversationNotFound(conversation_id)

    def recall(self, conversation_id: str, query: str, limit: int = 10) -> list[RecallHit]:
        """Search every message, evicted ones and summaries included; best first (see
        stores/recall.py: the newest matches of each term are ranked, not every match)."""
        terms = base.query_terms(query)
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            if not terms or limit <= 0:
                return []
            return recall.recall(
                lambda phases: self._dialect.newest(db, conversation_id, phases, CANDIDATES),
                terms,
                limit,
            )

    def optimize(self) -> None:
        """Compact the recall index and refresh planner statistics; run after bulk loads."""
        with self._transaction(write=True) as db:
            self._dialect.optimize(db)
