"""The default store: one SQLite file in WAL mode, shared safely by several local processes.

Thread-safety: a `SQLiteStore` holds one connection and serializes every call on it with a
lock, so one object may be shared by threads. Processes (or several objects) coordinate through
SQLite itself: WAL lets readers run beside a writer, every write is a `BEGIN IMMEDIATE`
transaction, and `busy_timeout` makes a second writer wait instead of failing.

The queries are the shared ones of `SQLStore`; this module adds SQLite's dialect (an FTS5 recall
index keyed by the message row id) and its connection handling.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from precis.core.errors import ReadOnlyStore, StoreError
from precis.core.messages import Message
from precis.stores.base import RecallHit, search_text, snippet, term_score
from precis.stores.migrations import bind, migrate, pending_migrations
from precis.stores.rows import tool_calls_from_json
from precis.stores.sql import Dialect, Handle, SQLStore

__all__ = ["CONTEXT_SQL", "MIGRATIONS", "SQLiteDialect", "SQLiteStore"]

# How long a writer waits for another process's write transaction before giving up.
BUSY_TIMEOUT_MS = 30_000
# Page cache per connection, in KiB: FTS5 merges reread index pages, and misses dominate appends.
CACHE_KIB = 32 * 1024
# Trigram FTS cannot match terms shorter than this; such queries scan with instr() instead.
TRIGRAM_MIN_CHARS = 3
# Most candidate rows the instr() fallback reads before ranking, so a scan stays bounded.
SCAN_CANDIDATES = 500


class SQLiteDialect(Dialect):
    """SQLite: WITHOUT ROWID tables, a message row id that keys a contentless FTS5 index."""

    clustered = " WITHOUT ROWID"
    # An explicit alias of the rowid, so VACUUM cannot renumber it under the FTS index.
    message_row_key = "\n        row_id INTEGER PRIMARY KEY,"
    immutable_messages = (
        """CREATE TRIGGER messages_are_immutable BEFORE UPDATE ON messages
        BEGIN SELECT RAISE(ABORT, 'precis messages are immutable'); END""",
    )
    # schema_version 1, 2, 3 of the count-based precis.
    legacy_steps = (("m001_core",), ("m002_recall",), ("m003_pins",))
    extra_columns = ("row_id",)

    def __init__(self) -> None:
        super().__init__(context_join="CROSS JOIN")
        # Set by `inspect`: whether the FTS index exists, and whether it is trigram-tokenized.
        self.fts = False
        self.trigram = False

    def inspect(self, db: Handle) -> None:
        """Learn which recall index this database has (FTS5 and its tokenizer vary by build)."""
        row = db.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").fetchone()
        self.fts = row is not None
        self.trigram = row is not None and "trigram" in str(row[0])

    def create_recall_index(self, db: Handle) -> None:
        """FTS5, trigram-tokenized where SQLite has it (Chinese needs it); filled from the log."""
        for tokenizer in ("trigram", "unicode61 remove_diacritics 2"):
            try:
                db.execute(
                    "CREATE VIRTUAL TABLE messages_fts USING fts5"
                    f"(text, content='', tokenize='{tokenizer}')"
                )
            except sqlite3.OperationalError:
                continue
            rows = db.execute("SELECT row_id, content, tool_calls FROM messages").fetchall()
            db.executemany(
                "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                [(row[0], _row_search_text(row[1], row[2])) for row in rows],
            )
            return
        # No FTS5 in this SQLite build: recall falls back to scanning.

    def message_extras(self, db: Handle, messages: Sequence[Message]) -> list[tuple[Any, ...]]:
        """Row ids for the batch, known before the insert so the FTS rows can share them."""
        top = db.execute("SELECT coalesce(max(row_id), 0) FROM messages").fetchone()
        return [(int(top[0]) + 1 + i,) for i in range(len(messages))]

    def after_insert(
        self, db: Handle, messages: Sequence[Message], extras: Sequence[tuple[Any, ...]]
    ) -> None:
        if self.fts:
            db.executemany(
                "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                [(extra[0], search_text(m)) for m, extra in zip(messages, extras, strict=True)],
            )

    def recall(
        self, db: Handle, conversation_id: str, terms: Sequence[str], limit: int
    ) -> list[RecallHit]:
        """FTS5 ranked by bm25, or a bounded instr() scan for terms the index cannot match."""
        if self._fts_can_match(terms):
            try:
                return self._recall_fts(db, conversation_id, terms, limit)
            except sqlite3.OperationalError:
                pass  # a query FTS5 still refuses; the scan below answers it instead
        return self._recall_scan(db, conversation_id, terms, limit)

    def _fts_can_match(self, terms: Sequence[str]) -> bool:
        """Whether the FTS index can answer every term (trigram needs 3+ chars, unicode61 words)."""
        if not self.fts:
            return False
        if self.trigram:
            return all(len(t) >= TRIGRAM_MIN_CHARS for t in terms)
        return all(t.isascii() and any(c.isalnum() for c in t) for t in terms)

    def _recall_fts(
        self, db: Handle, conversation_id: str, terms: Sequence[str], limit: int
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
        self, db: Handle, conversation_id: str, terms: Sequence[str], limit: int
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
        ).fetchall():
            text = _row_search_text(row[3], row[4])
            score = term_score(text, terms)
            if score > 0:  # instr() on the tool_calls JSON can hit its keys; drop those
                scored.append(RecallHit(row[0], row[1], int(row[2]), snippet(text, terms), score))
        scored.sort(key=lambda hit: (-hit.score, -hit.seq))
        return scored[:limit]

    def optimize(self, db: Handle) -> None:
        """FTS5 leaves merge work behind a large import that later small appends would pay for."""
        if self.fts:
            db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
        db.execute("PRAGMA optimize")


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused a write because the file or its directory is read-only."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_READONLY


def _row_search_text(content: str, tool_calls: str) -> str:
    return search_text(
        Message(role="assistant", content=content, tool_calls=tool_calls_from_json(tool_calls))
    )


# The context read, and the migration steps schema_version counts, as SQLite runs them (tests
# read the query plan of the one and build older databases with the others).
CONTEXT_SQL = SQLiteDialect().context_sql
MIGRATIONS = bind(SQLiteDialect())


class SQLiteStore(SQLStore):
    """A `ConversationStore` in one SQLite file; one locked connection per object."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        dialect = SQLiteDialect()
        super().__init__(dialect, f"SQLite store {str(path)!r}")
        self._lock = threading.RLock()
        in_memory = str(path) == ":memory:"
        if read_only:
            db = self._connect_read_only(busy_timeout_ms)
        else:
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
                raise self._cannot_open(exc) from exc
        self._db: sqlite3.Connection | None = db
        try:
            db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not in_memory and not read_only:
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: could not switch to WAL (got {mode!r})")
            # In WAL, NORMAL survives application crashes; only power loss may drop last commits.
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            if read_only:
                with self._transaction(write=False) as handle:
                    self._check_current(handle, dialect)
                    dialect.inspect(handle)
            else:
                with self._transaction(write=True) as handle:
                    migrate(handle, dialect, self._where)
                    dialect.inspect(handle)
        except sqlite3.Error as exc:
            self.close()
            raise self._cannot_open(exc) from exc
        except BaseException:
            self.close()
            raise

    def _connect_read_only(self, busy_timeout_ms: int) -> sqlite3.Connection:
        """Open for reading only; in a directory nobody may write, read the file as immutable.

        WAL readers need the `-shm` file; where it cannot be made and no `-wal` holds unmerged
        commits, the main file is the whole database, so SQLite may read it as it stands.
        """
        uri = self.path.resolve().as_uri()
        frozen = not os.access(self.path.parent, os.W_OK) and not Path(f"{self.path}-wal").exists()
        try:
            return sqlite3.connect(
                f"{uri}?mode=ro{'&immutable=1' if frozen else ''}",
                uri=True,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise self._cannot_open(exc) from exc

    def _check_current(self, db: Handle, dialect: SQLiteDialect) -> None:
        """A read-only open cannot migrate: refuse a database that needs it, saying so."""
        tables = {
            str(row[0])
            for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        }
        pending = pending_migrations(db, dialect, tables)
        if pending:
            raise StoreError(
                f"{self._where} is opened read-only and needs migrating ({', '.join(pending)}); "
                "open it once where it can be written"
            )

    def _cannot_open(self, exc: sqlite3.Error) -> StoreError:
        """Why the file cannot be opened, saying "read-only" when that is the reason."""
        if self.path.exists() and not (
            os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)
        ):
            return ReadOnlyStore(
                f"{self._where} is read-only (cannot write {self.path}); "
                f"reading works, writing needs write access ({exc})"
            )
        return StoreError(f"cannot open {self._where}: {exc}")

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"{self._where} is closed")
        return self._db

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Handle]:
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
                if write and _is_read_only_error(exc):
                    where = self._where
                    raise ReadOnlyStore(f"{where} is read-only: cannot write ({exc})") from exc
                raise StoreError(f"{self._where}: {exc}") from exc

    def close(self) -> None:
        """Close the connection; later calls raise StoreError."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
