"""The default store: one SQLite file in WAL mode, shared safely by several local processes.

Thread-safety: a `SQLiteStore` holds one connection and serializes every call on it with a
lock, so one object may be shared by threads. Processes (or several objects) coordinate through
SQLite itself: WAL lets readers run beside a writer, every write is a `BEGIN IMMEDIATE`
transaction, and `busy_timeout` makes a second writer wait instead of failing.

The queries are the shared ones of `SQLStore`; this module adds SQLite's dialect (an FTS5 recall
index keyed by the message row id) and its connection handling.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from precis.core.errors import ReadOnlyStore, StoreError, StoreUnavailable
from precis.core.messages import Message
from precis.stores.base import WouldWait, search_text, search_text_of
from precis.stores.dialect import Dialect, Handle
from precis.stores.migrations import bind, migrate, pending_migrations
from precis.stores.recall import (
    MOST_TRIGRAMS,
    Found,
    found,
    holds_all,
    scan_bound,
    spaced_gram,
    spaced_runs,
    term_kind,
    trigrams,
)
from precis.stores.rows import tool_calls_from_json
from precis.stores.sql import SQLStore
from precis.stores.sql_series import SQLSeries

__all__ = ["CONTEXT_SQL", "MIGRATIONS", "SQLiteDialect", "SQLiteStore"]

T = TypeVar("T")

# How long a writer waits for another process's write transaction before giving up.
BUSY_TIMEOUT_MS = 30_000
# Page cache per connection, in KiB: FTS5 merges reread index pages, and misses dominate appends.
CACHE_KIB = 32 * 1024
# Bytes of the file read through a memory map rather than copied a page at a time: recall reads
# rows all over a large history. SQLite caps it at its build's maximum (often 2 GB).
MMAP_BYTES = 1 << 31
# Page size of a new database file: rows of a few KB leave a fifth of each 4 KiB page empty,
# a tenth of a 16 KiB one. An existing file keeps the page size it was made with.
PAGE_BYTES = 16_384
# Write transactions made without waiting (on an event loop, where no checkpoint runs) before
# one is refused there, so that it is made the waiting way and its commit checkpoints the log
# when the log is long (SQLite's own rule): the log grows by at most this many writes unchecked.
WRITES_BETWEEN_CHECKPOINTS = 32
# Rows the m004 migration indexes per statement when it rebuilds the recall index.
BACKFILL_ROWS = 5_000
# The recall index since m004: an FTS5 table (rowid = message row id) without positions, so a
# term is the conjunction of its trigrams and every candidate is checked against the text.
TRIGRAM_TABLE = "messages_trigrams"
_FOUND = "m.row_id, m.id, m.role, m.seq, m.content, m.tool_calls"
# How many of a conversation's newest messages tell which trigrams of a long term are rare.
SAMPLE = 128


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
        # Set by `inspect`: whether this database has the m004 recall index (FTS5 and its
        # trigram tokenizer vary by build); without it, recall scans for every term.
        self.trigram = False

    def inspect(self, db: Handle) -> None:
        """Learn whether this database has the m004 recall index."""
        row = db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (TRIGRAM_TABLE,))
        self.trigram = row.fetchone() is not None

    def create_recall_index(self, db: Handle) -> None:
        """m002: FTS5 with positions, trigram-tokenized where SQLite has it (m004 replaces it)."""
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

    def create_bounded_recall(self, db: Handle) -> None:
        """m004: the m002 index gives way to a contentless FTS5 table without positions (a third
        of the size): the trigrams of each message's search text and `recall.spaced_runs`, so a
        term is the conjunction of its trigrams, each candidate checked against the text."""
        db.execute("DROP TABLE IF EXISTS messages_fts")
        try:
            db.execute(
                f"CREATE VIRTUAL TABLE {TRIGRAM_TABLE} USING fts5(text, content='', "
                "tokenize='trigram', detail=none, columnsize=0)"
            )
        except sqlite3.OperationalError:
            return  # no FTS5, or no trigram tokenizer (SQLite < 3.34): recall scans
        self.inspect(db)
        last = 0
        while rows := db.execute(
            "SELECT row_id, content, tool_calls FROM messages WHERE row_id > ? "
            "ORDER BY row_id LIMIT ?",
            (last, BACKFILL_ROWS),
        ).fetchall():
            self._index(db, [(int(row[0]), _row_search_text(row[1], row[2])) for row in rows])
            last = int(rows[-1][0])

    def message_extras(self, db: Handle, messages: Sequence[Message]) -> list[tuple[Any, ...]]:
        """Row ids for the batch, known before the insert so the FTS rows can share them."""
        top = db.execute("SELECT coalesce(max(row_id), 0) FROM messages").fetchone()
        return [(int(top[0]) + 1 + i,) for i in range(len(messages))]

    def after_insert(
        self, db: Handle, messages: Sequence[Message], extras: Sequence[tuple[Any, ...]]
    ) -> None:
        self._index(
            db, [(int(extra[0]), search_text(m)) for m, extra in zip(messages, extras, strict=True)]
        )

    def _index(self, db: Handle, texts: Sequence[tuple[int, str]]) -> None:
        """Add (row id, search text) pairs to the recall index, when the database has one."""
        if self.trigram:
            db.executemany(
                f"INSERT INTO {TRIGRAM_TABLE} (rowid, text) VALUES (?, ?)",
                [(row_id, text + spaced_runs(text)) for row_id, text in texts],
            )

    def newest(
        self, db: Handle, conversation_id: str, phases: Sequence[Sequence[str]], n: int
    ) -> list[Found]:
        """Walk an index newest first (or, for terms none answers, the log), check each row's
        text against the terms, stop at `n` that hold them all; for each phase."""
        out: list[Found] = []
        walk = _Walk(db, conversation_id, n)
        for terms in phases:
            if self.trigram and any(term_kind(t) != "scan" for t in terms):
                try:
                    out += walk.indexed(terms)
                    continue
                except sqlite3.OperationalError:
                    pass  # a term the index still refuses: the scan answers it instead
            out += walk.scanned(terms)
        return out

    def optimize(self, db: Handle) -> None:
        """FTS5 leaves merge work behind a large import that later small appends would pay for."""
        if self.trigram:
            db.execute(f"INSERT INTO {TRIGRAM_TABLE} ({TRIGRAM_TABLE}) VALUES ('optimize')")
        db.execute("PRAGMA optimize")


# What SQLite says when it cannot do the work just now, though the request was sound: another
# writer held the file past busy_timeout, the disk is full, reading or writing the file failed.
_UNAVAILABLE = frozenset(
    (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_PROTOCOL,
    )
)


def _is_unavailable_error(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused for want of the file (locked, full, failing), not the request."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _UNAVAILABLE


def _is_busy_error(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused for a lock another connection holds (it would have waited)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused a write because the file or its directory is read-only."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_READONLY


class _Walk:
    """The newest `n` matches of each phase in one conversation: what the phases share (its
    row ids and length, a sample of its newest messages) is read once, when first needed."""

    def __init__(self, db: Handle, conversation_id: str, n: int) -> None:
        self.db = db
        self.conversation_id = conversation_id
        self.n = n
        self._ends: tuple[int, int, int] | None = None
        self._sample: list[str] | None = None
        self._shares: dict[str, float] = {}

    def ends(self) -> tuple[int, int, int]:
        """The conversation's first and last row id (row ids grow with seq) and last seq."""
        if self._ends is None:
            row = self.db.execute(
                "SELECT (SELECT row_id FROM messages WHERE conversation_id = ?1 "
                "ORDER BY seq LIMIT 1), (SELECT row_id FROM messages WHERE conversation_id = ?1 "
                "ORDER BY seq DESC LIMIT 1), "
                "(SELECT next_seq - 1 FROM conversations WHERE id = ?1)",
                (self.conversation_id,),
            ).fetchone()
            self._ends = (int(row[0] or 0), int(row[1] or -1), int(row[2] or 0))
        return self._ends

    def share(self, gram: str) -> float:
        """The share of the newest SAMPLE messages whose folded search text holds `gram`."""
        if self._sample is None:
            rows = self.db.execute(
                "SELECT content, tool_calls FROM messages WHERE conversation_id = ? "
                "ORDER BY seq DESC LIMIT ?",
                (self.conversation_id, SAMPLE),
            ).fetchall()
            self._sample = [_row_search_text(row[0], row[1]).casefold() for row in rows]
        if gram not in self._shares:
            held = sum(1 for text in self._sample if gram in text)
            self._shares[gram] = held / len(self._sample) if self._sample else 0.0
        return self._shares[gram]

    def indexed(self, terms: Sequence[str]) -> list[Found]:
        """Through the trigram table: every term that has trigrams (its rare ones) or is a gram
        (`recall.spaced_gram`), in one conjunction; terms without either are checked after."""
        low, high, last_seq = self.ends()
        bound = scan_bound(terms, last_seq)
        if bound:  # a term no index answers: only the newest messages
            row = self.db.execute(
                "SELECT row_id FROM messages WHERE conversation_id = ? AND seq > ? "
                "ORDER BY seq LIMIT 1",
                (self.conversation_id, bound),
            ).fetchone()
            low = high + 1 if row is None else int(row[0])
        tokens: list[str] = []
        # Several terms narrow each other: each is asked by its rarest trigram only.
        most = MOST_TRIGRAMS if len(terms) == 1 else 1
        for term in terms:
            kind = term_kind(term)
            if kind == "trigram":
                tokens += trigrams(term, self.share, most)
            elif kind == "gram":
                tokens.append(spaced_gram(term))
        query = (
            f"SELECT {_FOUND} FROM {TRIGRAM_TABLE} AS f JOIN messages AS m ON m.row_id = f.rowid "
            f"WHERE {TRIGRAM_TABLE} MATCH ? AND f.rowid >= ? AND f.rowid <= ? "
            "AND m.conversation_id = ? ORDER BY f.rowid DESC LIMIT ?"
        )
        return self._walk(query, (_match(tokens), low), high, (self.conversation_id,), terms)

    def scanned(self, terms: Sequence[str]) -> list[Found]:
        """By reading the log backwards: for terms no index answers (`--`, `C#`)."""
        # `lower` folds ASCII only: it narrows, and the check of each row's text decides.
        found_in = " AND ".join(
            "(instr(lower(content), lower(?)) > 0 OR instr(lower(tool_calls), lower(?)) > 0)"
            for _ in terms
        )
        query = (
            "SELECT seq, id, role, seq, content, tool_calls FROM messages "
            f"WHERE conversation_id = ? AND seq > ? AND seq <= ? AND {found_in} "
            "ORDER BY seq DESC LIMIT ?"
        )
        bound = scan_bound(terms, self.ends()[2])
        tail = tuple(term for term in terms for _ in range(2))
        return self._walk(query, (self.conversation_id, bound), 1 << 62, tail, terms)

    def _walk(
        self,
        query: str,
        head: tuple[Any, ...],
        high: int,
        tail: tuple[Any, ...],
        terms: Sequence[str],
    ) -> list[Found]:
        """Run `query` (head, upper key bound, tail, limit) a page of `n` rows at a time, newest
        first, until `n` rows hold every term; a row is (key, id, role, seq, content, calls)."""
        out: list[Found] = []
        n = self.n
        while True:
            rows = self.db.execute(query, (*head, high, *tail, n)).fetchall()
            for row in rows:
                text = _row_search_text(row[4], row[5])
                hit = found(str(row[1]), str(row[2]), int(row[3]), text)
                if holds_all(hit, terms):
                    out.append(hit)
                    if len(out) == n:
                        return out
            if len(rows) < n:
                return out
            high = int(rows[-1][0]) - 1


def _quoted(text: str) -> str:
    """An FTS5 string: operators and punctuation inside it are plain text."""
    return '"' + text.replace('"', '""') + '"'


def _match(tokens: Sequence[str]) -> str:
    """An FTS5 query for the rows holding every trigram."""
    return " AND ".join(_quoted(token) for token in dict.fromkeys(tokens))


def _row_search_text(content: str, tool_calls: str) -> str:
    return search_text_of(content, tool_calls_from_json(tool_calls))


# Conversations are private: a new database file (and so its -wal and -shm) is the owner's only.
DATABASE_FILE_MODE = 0o600

# The context read, and the migration steps schema_version counts, as SQLite runs them (tests
# read the query plan of the one and build older databases with the others).
CONTEXT_SQL = SQLiteDialect().context_sql
MIGRATIONS = bind(SQLiteDialect())


def _create_private(path: Path) -> None:
    """Create a missing database file readable by its owner only (0600); SQLite gives the `-wal`
    and `-shm` files it makes beside it the same mode. An existing file keeps its own."""
    # There already, or not creatable here (sqlite3.connect then says why).
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DATABASE_FILE_MODE))


class SQLiteStore(SQLStore, SQLSeries):
    """A `ConversationStore` in one SQLite file; one locked connection per object."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        read_only: bool = False,
        mmap_bytes: int = MMAP_BYTES,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        dialect = SQLiteDialect()
        super().__init__(dialect, f"SQLite store {str(path)!r}")
        self._lock = threading.RLock()
        self._busy_timeout_ms = int(busy_timeout_ms)
        # Whether the call under the lock must not wait (`without_waiting`), whether the
        # connection is set to wait (busy timeout, checkpoints at commit), and the writes made
        # without waiting since one was made the waiting way.
        self._at_once = False
        self._waiting = True
        self._writes_at_once = 0
        self._checkpoint_pages = 0
        in_memory = str(path) == ":memory:"
        if read_only:
            db = self._connect_read_only(busy_timeout_ms)
        else:
            if not in_memory:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                _create_private(self.path)
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
            if not read_only:
                db.execute(f"PRAGMA page_size = {PAGE_BYTES}")  # before WAL, or it is too late
            if not in_memory and not read_only:
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: could not switch to WAL (got {mode!r})")
            # In WAL, NORMAL survives application crashes; only power loss may drop last commits.
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            db.execute(f"PRAGMA mmap_size = {int(mmap_bytes)}")
            self._checkpoint_pages = int(db.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
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

    def without_waiting(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn` now if it waits for nothing: the store's lock is free, no other connection holds
        the write lock (no busy wait), and its commit runs no checkpoint (no fsync); else
        `WouldWait` before anything is written. It still reads pages the cache lacks."""
        if not self._lock.acquire(blocking=False):
            raise WouldWait(getattr(fn, "__name__", "call"))
        try:
            self._at_once = True
            return fn(*args, **kwargs)
        finally:
            self._at_once = False
            self._lock.release()

    def _wait(self, db: sqlite3.Connection, wait: bool) -> None:
        """Set the connection to wait (for another writer, for a checkpoint at commit) or not."""
        if wait != self._waiting:
            db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms if wait else 0}")
            db.execute(f"PRAGMA wal_autocheckpoint = {self._checkpoint_pages if wait else 0}")
            self._waiting = wait

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Handle]:
        """One transaction under the lock; writes take the write lock up front (IMMEDIATE)."""
        with self._lock:
            db = self._connection()
            at_once = self._at_once
            if at_once and write and self._writes_at_once >= WRITES_BETWEEN_CHECKPOINTS:
                raise WouldWait("a checkpoint is due")
            self._wait(db, not at_once)
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
                if at_once and _is_busy_error(exc):
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise WouldWait(str(exc)) from exc
                if write and _is_read_only_error(exc):
                    where = self._where
                    raise ReadOnlyStore(f"{where} is read-only: cannot write ({exc})") from exc
                if _is_unavailable_error(exc):
                    raise StoreUnavailable(f"{self._where}: {exc}") from exc
                raise StoreError(f"{self._where}: {exc}") from exc
            if write:
                self._writes_at_once = self._writes_at_once + 1 if at_once else 0

    def close(self) -> None:
        """Close the connection; later calls raise StoreError."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
