"""The default store: one SQLite file in WAL mode, shared safely by several local processes.

Thread-safety: a `SQLiteStore` holds one connection and serializes every call on it with a
lock, so one object may be shared by threads. Processes (or several objects) coordinate through
SQLite itself: WAL lets readers run beside a writer, every write is a `BEGIN IMMEDIATE`
transaction, and `busy_timeout` makes a second writer wait instead of failing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from precis.core.errors import ConversationNotFound, StoreError, UnknownMessage, VersionConflict
from precis.core.messages import Message
from precis.stores.base import (
    CompactionEvent,
    ContextSnapshot,
    MessageIds,
    RecallHit,
    check_context_ids,
    check_page,
    check_summary,
    json_safe,
    normalize_message,
    query_terms,
    search_text,
    snippet,
    term_score,
    utc_now,
)
from precis.stores.rows import (
    M_COLUMNS,
    MESSAGE_COLUMNS,
    apply_pins,
    json_text,
    message_from_row,
    tool_calls_from_json,
    tool_calls_json,
)

__all__ = ["CONTEXT_SQL", "MIGRATIONS", "SQLiteStore"]

# How long a writer waits for another process's write transaction before giving up.
BUSY_TIMEOUT_MS = 30_000
# Page cache per connection, in KiB: FTS5 merges reread index pages, and misses dominate appends.
CACHE_KIB = 32 * 1024
# Trigram FTS cannot match terms shorter than this; such queries scan with instr() instead.
TRIGRAM_MIN_CHARS = 3
# Most candidate rows the instr() fallback reads before ranking, so a scan stays bounded.
SCAN_CANDIDATES = 500
# SQLite's default cap on host parameters is 999 in old builds; stay under it.
_IN_CHUNK = 500


# The context read: walk the positions index, then fetch each message by its (conversation, id)
# index. CROSS JOIN pins the loop order, so the cost is O(in-context), not O(history).
CONTEXT_SQL = (
    f"SELECT {M_COLUMNS} FROM in_context AS c CROSS JOIN messages AS m "
    "ON m.conversation_id = c.conversation_id AND m.id = c.message_id "
    "WHERE c.conversation_id = ? ORDER BY c.position"
)

_SCHEMA_V1 = (
    """CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL DEFAULT 0,
        next_seq INTEGER NOT NULL DEFAULT 1,
        next_position INTEGER NOT NULL DEFAULT 0,
        system_prompt TEXT NOT NULL DEFAULT '',
        prompt_stale INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    # row_id is an explicit alias of the rowid so VACUUM cannot renumber it under the FTS index.
    """CREATE TABLE messages (
        row_id INTEGER PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        id TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_calls TEXT NOT NULL DEFAULT '[]',
        tool_call_id TEXT,
        kind TEXT NOT NULL,
        pinned INTEGER NOT NULL DEFAULT 0,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        reasoning TEXT NOT NULL DEFAULT '',
        images INTEGER NOT NULL DEFAULT 0,
        openai_extra TEXT NOT NULL DEFAULT '{}',
        UNIQUE (conversation_id, seq),
        UNIQUE (conversation_id, id)
    )""",
    """CREATE TRIGGER messages_are_immutable BEFORE UPDATE ON messages
        BEGIN SELECT RAISE(ABORT, 'precis messages are immutable'); END""",
    """CREATE TABLE in_context (
        conversation_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        PRIMARY KEY (conversation_id, position)
    ) WITHOUT ROWID""",
    """CREATE TABLE events (
        row_id INTEGER PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        trigger TEXT NOT NULL,
        mode TEXT NOT NULL,
        stats TEXT NOT NULL,
        summary_id TEXT NOT NULL,
        at TEXT NOT NULL
    )""",
    "CREATE INDEX events_by_conversation ON events (conversation_id, row_id)",
)


def _migrate_core(db: sqlite3.Connection) -> None:
    """Step 1: conversations, the message log, the positions table and the event log."""
    for statement in _SCHEMA_V1:
        db.execute(statement)


def _migrate_fts(db: sqlite3.Connection) -> None:
    """Step 2: the recall index, trigram-tokenized where SQLite has it (Chinese needs it)."""
    for tokenizer in ("trigram", "unicode61 remove_diacritics 2"):
        try:
            db.execute(
                "CREATE VIRTUAL TABLE messages_fts USING fts5"
                f"(text, content='', tokenize='{tokenizer}')"
            )
        except sqlite3.OperationalError:
            continue
        # Fill the index when a database from before this step already holds messages.
        rows = db.execute("SELECT row_id, content, tool_calls FROM messages").fetchall()
        db.executemany(
            "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
            ((row[0], _row_search_text(row[1], row[2])) for row in rows),
        )
        return
    # No FTS5 in this SQLite build: recall falls back to scanning.


def _migrate_pins(db: sqlite3.Connection) -> None:
    """Step 3: pin flags set after append, an overlay because message rows never change."""
    db.execute(
        "CREATE TABLE pins (conversation_id TEXT NOT NULL, message_id TEXT NOT NULL, "
        "pinned INTEGER NOT NULL, PRIMARY KEY (conversation_id, message_id)) WITHOUT ROWID"
    )


# Applied in order; a database records how many it has in `schema_version`. Append only.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migrate_core,
    _migrate_fts,
    _migrate_pins,
)


class SQLiteStore:
    """A `ConversationStore` in one SQLite file; one locked connection per object."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._ids = MessageIds()
        in_memory = str(path) == ":memory:"
        if not in_memory:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(
                str(path),
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {str(path)!r}: {exc}") from exc
        self._db: sqlite3.Connection | None = db
        try:
            db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not in_memory:
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: could not switch to WAL (got {mode!r})")
            # In WAL, NORMAL survives application crashes; only power loss may drop last commits.
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self._migrate()
            self._fts, self._trigram = self._fts_kind()
        except sqlite3.Error as exc:
            self.close()
            raise StoreError(f"cannot open SQLite store {str(path)!r}: {exc}") from exc
        except BaseException:
            self.close()
            raise

    # --- plumbing -----------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"SQLite store {str(self.path)!r} is closed")
        return self._db

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock; writes take the write lock up front (IMMEDIATE)."""
        with self._lock:
            db = self._connection()
            try:
                db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield db
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {str(self.path)!r}: {exc}") from exc

    def _migrate(self) -> None:
        with self._transaction(write=True) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            current = db.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
            applied = int(current[0])
            if applied > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path}: schema version {applied} is newer than this precis knows "
                    f"({len(MIGRATIONS)}); upgrade precis"
                )
            for version in range(applied + 1, len(MIGRATIONS) + 1):
                MIGRATIONS[version - 1](db)
                db.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                    (version, utc_now()),
                )

    def _fts_kind(self) -> tuple[bool, bool]:
        """Whether the recall index exists, and whether it is trigram-tokenized."""
        row = (
            self._connection()
            .execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'")
            .fetchone()
        )
        if row is None:
            return False, False
        return True, "trigram" in str(row[0])

    @staticmethod
    def _conversation_row(db: sqlite3.Connection, conversation_id: str) -> tuple[int, int, int]:
        """(version, next_seq, next_position) of a conversation, or ConversationNotFound."""
        row = db.execute(
            "SELECT version, next_seq, next_position FROM conversations WHERE id = ?",
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise ConversationNotFound(conversation_id)
        return int(row[0]), int(row[1]), int(row[2])

    @staticmethod
    def _existing_ids(db: sqlite3.Connection, conversation_id: str, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            marks = ", ".join("?" * len(chunk))
            found.update(
                row[0]
                for row in db.execute(
                    f"SELECT id FROM messages WHERE conversation_id = ? AND id IN ({marks})",
                    (conversation_id, *chunk),
                )
            )
        return found

    def _insert(
        self,
        db: sqlite3.Connection,
        conversation_id: str,
        messages: Sequence[Message],
        first_seq: int,
    ) -> list[Message]:
        """Normalize and insert a batch at seq `first_seq`…; refuse ids the conversation has."""
        now = utc_now()
        stored = [
            normalize_message(m, conversation_id=conversation_id, ids=self._ids, now=now)
            for m in messages
        ]
        seen: set[str] = set()
        for message in stored:
            if message.id in seen:
                raise _duplicate(conversation_id, message.id)
            seen.add(message.id)
        given = [m.id for m in messages if m.id]
        if given:
            clash = self._existing_ids(db, conversation_id, given)
            if clash:
                raise _duplicate(conversation_id, next(i for i in given if i in clash))
        top = db.execute("SELECT coalesce(max(row_id), 0) FROM messages").fetchone()
        first_row = int(top[0]) + 1
        rows = [
            _message_row(first_row + i, conversation_id, first_seq + i, m)
            for i, m in enumerate(stored)
        ]
        try:
            db.executemany(
                "INSERT INTO messages (row_id, conversation_id, seq, id, role, content, "
                "tool_calls, tool_call_id, kind, pinned, metadata, created_at, reasoning, "
                "images, openai_extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"conversation {conversation_id!r}: could not append ({exc})") from exc
        if self._fts:
            db.executemany(
                "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                ((first_row + i, search_text(m)) for i, m in enumerate(stored)),
            )
        return stored

    def _snapshot(self, db: sqlite3.Connection, conversation_id: str) -> ContextSnapshot:
        version, next_seq, _ = self._conversation_row(db, conversation_id)
        if version == 0:
            cursor = db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            )
        else:
            cursor = db.execute(CONTEXT_SQL, (conversation_id,))
        return ContextSnapshot(
            messages=_with_pins(db, conversation_id, [message_from_row(row) for row in cursor]),
            version=version,
            last_seq=next_seq - 1,
            compacted=version > 0,
        )

    # --- the protocol -------------------------------------------------------------------------

    def create(self, conversation_id: str, *, system_prompt: str = "") -> None:
        """Create the conversation if missing; an existing one is left untouched."""
        with self._transaction(write=True) as db:
            db.execute(
                "INSERT OR IGNORE INTO conversations (id, system_prompt, created_at) "
                "VALUES (?, ?, ?)",
                (conversation_id, system_prompt, utc_now()),
            )

    def exists(self, conversation_id: str) -> bool:
        """Whether the conversation is in the store."""
        with self._transaction(write=False) as db:
            row = db.execute(
                "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
            return row is not None

    def conversations(self) -> list[str]:
        """Every conversation id, sorted."""
        with self._transaction(write=False) as db:
            return [row[0] for row in db.execute("SELECT id FROM conversations ORDER BY id")]

    def append(self, conversation_id: str, messages: Sequence[Message]) -> list[Message]:
        """Append in one transaction; return the messages with id and created_at filled in."""
        with self._transaction(write=True) as db:
            db.execute(
                "INSERT OR IGNORE INTO conversations (id, created_at) VALUES (?, ?)",
                (conversation_id, utc_now()),
            )
            version, next_seq, next_position = self._conversation_row(db, conversation_id)
            stored = self._insert(db, conversation_id, messages, next_seq)
            if version > 0:
                db.executemany(
                    "INSERT INTO in_context (conversation_id, position, message_id) "
                    "VALUES (?, ?, ?)",
                    ((conversation_id, next_position + i, m.id) for i, m in enumerate(stored)),
                )
                next_position += len(stored)
            db.execute(
                "UPDATE conversations SET next_seq = ?, next_position = ? WHERE id = ?",
                (next_seq + len(stored), next_position, conversation_id),
            )
            return stored

    def context(self, conversation_id: str) -> ContextSnapshot:
        """The in-context messages in order; everything when never compacted."""
        with self._transaction(write=False) as db:
            return self._snapshot(db, conversation_id)

    def history(
        self, conversation_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Every message ever appended (summaries included), in seq order."""
        check_page(offset, limit)
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            # seq runs 1, 2, 3… without gaps, so the offset is a seq bound, not a row skip.
            cursor = db.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (conversation_id, offset, -1 if limit is None else limit),
            )
            return _with_pins(db, conversation_id, [message_from_row(row) for row in cursor])

    def get(self, conversation_id: str, ids: Sequence[str]) -> list[Message]:
        """The messages with these ids, in the order asked; UnknownMessage for a missing one."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            found: dict[str, Message] = {}
            unique = list(dict.fromkeys(ids))
            for start in range(0, len(unique), _IN_CHUNK):
                chunk = unique[start : start + _IN_CHUNK]
                marks = ", ".join("?" * len(chunk))
                for row in db.execute(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages "
                    f"WHERE conversation_id = ? AND id IN ({marks})",
                    (conversation_id, *chunk),
                ):
                    found[row[0]] = message_from_row(row)
            for message_id in ids:
                if message_id not in found:
                    raise UnknownMessage(conversation_id, message_id)
            return _with_pins(db, conversation_id, [found[i] for i in ids])

    def set_pinned(self, conversation_id: str, message_id: str, pinned: bool) -> None:
        """Pin or unpin a stored message (an overlay row; the message row never changes)."""
        with self._transaction(write=True) as db:
            self._conversation_row(db, conversation_id)
            if not self._existing_ids(db, conversation_id, [message_id]):
                raise UnknownMessage(conversation_id, message_id)
            db.execute(
                "INSERT INTO pins (conversation_id, message_id, pinned) VALUES (?, ?, ?) "
                "ON CONFLICT (conversation_id, message_id) DO UPDATE SET pinned = excluded.pinned",
                (conversation_id, message_id, int(pinned)),
            )

    def count(self, conversation_id: str) -> int:
        """How many messages the log holds."""
        with self._transaction(write=False) as db:
            _, next_seq, _ = self._conversation_row(db, conversation_id)
            return next_seq - 1

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
        with self._transaction(write=True) as db:
            version, next_seq, _ = self._conversation_row(db, conversation_id)
            if version != expected_version:
                raise VersionConflict(conversation_id, expected_version, version)
            check_summary(conversation_id, summary, event)
            existing = self._existing_ids(db, conversation_id, [*context_ids, summary.id])
            if summary.id in existing:
                raise _duplicate(conversation_id, summary.id)
            check_context_ids(conversation_id, context_ids, summary.id, existing.__contains__)
            stats = json.dumps(
                json_safe(event.stats, f"stats of the compaction event of {conversation_id!r}"),
                ensure_ascii=False,
            )
            kept = set(context_ids)
            later = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq",
                    (conversation_id, snapshot_last_seq),
                )
                if row[0] not in kept
            ]
            (stored,) = self._insert(db, conversation_id, [summary], next_seq)
            id_list = [*context_ids, *later]
            db.execute("DELETE FROM in_context WHERE conversation_id = ?", (conversation_id,))
            db.executemany(
                "INSERT INTO in_context (conversation_id, position, message_id) VALUES (?, ?, ?)",
                ((conversation_id, i, message_id) for i, message_id in enumerate(id_list)),
            )
            db.execute(
                "UPDATE conversations SET version = version + 1, next_seq = ?, "
                "next_position = ?, prompt_stale = 1 WHERE id = ?",
                (next_seq + 1, len(id_list), conversation_id),
            )
            db.execute(
                "INSERT INTO events (conversation_id, trigger, mode, stats, summary_id, at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, event.trigger, event.mode, stats, stored.id, event.at),
            )
            return self._snapshot(db, conversation_id)

    def events(self, conversation_id: str) -> list[CompactionEvent]:
        """The compaction events, oldest first."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            return [
                CompactionEvent(
                    trigger=row[0],
                    mode=row[1],
                    stats=json.loads(row[2]),
                    summary_id=row[3],
                    at=row[4],
                )
                for row in db.execute(
                    "SELECT trigger, mode, stats, summary_id, at FROM events "
                    "WHERE conversation_id = ? ORDER BY row_id",
                    (conversation_id,),
                )
            ]

    def system_prompt(self, conversation_id: str) -> tuple[str, bool]:
        """The compiled system prompt and whether a compaction made it stale."""
        with self._transaction(write=False) as db:
            row = db.execute(
                "SELECT system_prompt, prompt_stale FROM conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
            if row is None:
                raise ConversationNotFound(conversation_id)
            return str(row[0]), bool(row[1])

    def set_system_prompt(self, conversation_id: str, text: str) -> None:
        """Store a recompiled system prompt and clear the stale flag."""
        with self._transaction(write=True) as db:
            cursor = db.execute(
                "UPDATE conversations SET system_prompt = ?, prompt_stale = 0 WHERE id = ?",
                (text, conversation_id),
            )
            if cursor.rowcount == 0:
                raise ConversationNotFound(conversation_id)

    def recall(self, conversation_id: str, query: str, limit: int = 10) -> list[RecallHit]:
        """Search every message: FTS5 ranked by bm25, or a bounded instr() scan for short terms."""
        terms = query_terms(query)
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            if not terms or limit <= 0:
                return []
            if self._fts_can_match(terms):
                try:
                    return self._recall_fts(db, conversation_id, terms, limit)
                except sqlite3.OperationalError:
                    pass  # a query FTS5 still refuses; the scan below answers it instead
            return self._recall_scan(db, conversation_id, terms, limit)

    def _fts_can_match(self, terms: Sequence[str]) -> bool:
        """Whether the FTS index can answer every term (trigram needs 3+ chars, unicode61 words)."""
        if not self._fts:
            return False
        if self._trigram:
            return all(len(t) >= TRIGRAM_MIN_CHARS for t in terms)
        return all(t.isascii() and any(c.isalnum() for c in t) for t in terms)

    def _recall_fts(
        self, db: sqlite3.Connection, conversation_id: str, terms: Sequence[str], limit: int
    ) -> list[RecallHit]:
        # Each term is an FTS string literal, so ", *, (, ), :, -, AND, NEAR are plain text.
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        rows = db.execute(
            "SELECT m.id, m.role, m.seq, m.content, m.tool_calls, bm25(messages_fts) AS rank "
            "FROM messages_fts JOIN messages AS m ON m.row_id = messages_fts.rowid "
            "WHERE messages_fts MATCH ? AND m.conversation_id = ? ORDER BY rank LIMIT ?",
            (match, conversation_id, limit),
        ).fetchall()
        return [
            RecallHit(
                id=row[0],
                role=row[1],
                seq=int(row[2]),
                snippet=snippet(_row_search_text(row[3], row[4]), terms),
                score=-float(row[5]),
            )
            for row in rows
        ]

    def _recall_scan(
        self, db: sqlite3.Connection, conversation_id: str, terms: Sequence[str], limit: int
    ) -> list[RecallHit]:
        """Newest matching rows first, at most SCAN_CANDIDATES of them, ranked by term_score."""
        condition = " OR ".join(
            "instr(lower(content), lower(?)) > 0 OR instr(lower(tool_calls), lower(?)) > 0"
            for _ in terms
        )
        params: list[Any] = [conversation_id]
        for term in terms:
            params += [term, term]
        params.append(max(SCAN_CANDIDATES, limit))
        scored: list[RecallHit] = []
        for row in db.execute(
            f"SELECT id, role, seq, content, tool_calls FROM messages "
            f"WHERE conversation_id = ? AND ({condition}) ORDER BY seq DESC LIMIT ?",
            params,
        ):
            text = _row_search_text(row[3], row[4])
            score = term_score(text, terms)
            if score > 0:  # instr() on the tool_calls JSON can hit its keys; drop those
                scored.append(RecallHit(row[0], row[1], int(row[2]), snippet(text, terms), score))
        scored.sort(key=lambda hit: (-hit.score, -hit.seq))
        return scored[:limit]

    def optimize(self) -> None:
        """Merge the recall index's segments and refresh planner stats; run after bulk loads.

        FTS5 leaves merge work behind a large import that later small appends would pay for.
        """
        with self._transaction(write=True) as db:
            if self._fts:
                db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
            db.execute("PRAGMA optimize")

    def close(self) -> None:
        """Close the connection; later calls raise StoreError."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _duplicate(conversation_id: str, message_id: str) -> StoreError:
    return StoreError(
        f"message id {message_id!r} already exists in conversation {conversation_id!r}"
    )


def _message_row(row_id: int, conversation_id: str, seq: int, m: Message) -> tuple[Any, ...]:
    calls = tool_calls_json(m.tool_calls)
    return (
        row_id,
        conversation_id,
        seq,
        m.id,
        m.role,
        m.content,
        calls,
        m.tool_call_id,
        m.kind,
        int(m.pinned),
        json_text(m.metadata),
        m.created_at,
        m.reasoning,
        m.images,
        json_text(m.openai_extra),
    )


def _with_pins(
    db: sqlite3.Connection, conversation_id: str, messages: list[Message]
) -> list[Message]:
    """Apply the pin overlay: one indexed read of this conversation's (few) pin rows."""
    rows = db.execute(
        "SELECT message_id, pinned FROM pins WHERE conversation_id = ?", (conversation_id,)
    ).fetchall()
    return apply_pins(messages, {str(r[0]): bool(r[1]) for r in rows})


def _row_search_text(content: str, tool_calls: str) -> str:
    return search_text(
        Message(role="assistant", content=content, tool_calls=tool_calls_from_json(tool_calls))
    )
