"""Conversation stores: the protocol, the memory, SQLite and PostgreSQL backends, `open_store`."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from precis.core.errors import (
    ConversationNotFound,
    ImportLineError,
    ReadOnlyStore,
    StoreError,
    StoreUnavailable,
    UnknownMessage,
    VersionConflict,
)
from precis.stores.base import CompactionEvent, ContextSnapshot, ConversationStore, RecallHit
from precis.stores.jsonl import export_jsonl, import_jsonl
from precis.stores.memory import MemoryStore
from precis.stores.samples import Sample
from precis.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from precis.stores.postgres import PostgresStore

__all__ = [
    "DB_FILENAME",
    "CompactionEvent",
    "ContextSnapshot",
    "ConversationNotFound",
    "ConversationStore",
    "ImportLineError",
    "MemoryStore",
    "ReadOnlyStore",
    "RecallHit",
    "SQLiteStore",
    "Sample",
    "StoreError",
    "StoreUnavailable",
    "UnknownMessage",
    "VersionConflict",
    "export_jsonl",
    "import_jsonl",
    "open_store",
]

# The default store's file name under PRECIS_HOME.
DB_FILENAME = "precis.db"
_SQLITE_PREFIX = "sqlite://"
_POSTGRES_PREFIXES = ("postgresql://", "postgres://")
_ACCEPTED = (
    "'memory', 'memory:', 'sqlite' (PRECIS_HOME/precis.db), 'sqlite:///path/to/file.db' "
    "or 'postgresql://user@host:5432/dbname'"
)
_POSTGRES_MISSING = (
    "the PostgreSQL store needs psycopg 3 and psycopg-pool: pip install 'precis-context[postgres]'"
)


def __getattr__(name: str) -> Any:
    """Export PostgresStore lazily, so precis without psycopg still imports."""
    if name == "PostgresStore":
        return _postgres_store_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _postgres_store_class() -> type[PostgresStore]:
    """Import the PostgreSQL backend on first use, naming the extra to install if it is missing."""
    try:
        from precis.stores.postgres import PostgresStore
    except ImportError as exc:
        # Another module missing is a bug, not the extra; psycopg without libpq is the extra.
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] not in (
            "psycopg",
            "psycopg_pool",
        ):
            raise
        raise StoreError(f"{_POSTGRES_MISSING} ({exc})") from exc
    return PostgresStore


def sqlite_path(url: str | None, *, home: Path) -> Path | None:
    """The file a SQLite store URL names (None means the default under `home`), else None."""
    if url is None or url == "sqlite":
        return home / DB_FILENAME
    if url.startswith(_SQLITE_PREFIX + "/"):
        path = url[len(_SQLITE_PREFIX) :]
        if path.strip("/"):
            return Path(path).expanduser()
    return None


def _writable(path: Path) -> bool:
    """Whether this process may write the file and make its journal beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _is_precis_database(path: Path) -> bool:
    """Whether a file holds precis's tables, looked at read-only (opening it would migrate it)."""
    if not path.is_file():
        return False
    # A WAL reader needs to make `-shm`; where it cannot and no `-wal` exists, read it as it is.
    frozen = "&immutable=1" if not _writable(path) and not Path(f"{path}-wal").exists() else ""
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro{frozen}", uri=True)
        ) as db:
            found = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'conversations'"
            ).fetchone()
    except sqlite3.Error:
        return False
    return found is not None


def open_store(
    url: str | None,
    *,
    home: Path,
    must_exist: bool = False,
    read_only_ok: bool = False,
    mmap_bytes: int | None = None,
) -> ConversationStore:
    """Open the store a URL names; None means the default SQLite file under `home`.

    A postgresql:// or postgres:// URL opens a PostgresStore in the schema "precis". With
    `must_exist`, a SQLite file that is not there is an error rather than a new database. A
    SQLite file this process may not write opens read-only for a reader (`must_exist`) or a
    face that serves reads (`read_only_ok`); writes then raise ReadOnlyStore. `mmap_bytes`
    bounds how much of a SQLite file is read through a memory map (`SQLiteStore`'s default
    when None).
    """
    if url in ("memory", "memory:"):
        return MemoryStore()
    path = sqlite_path(url, home=home)
    if path is not None:
        if must_exist and not _is_precis_database(path):
            raise StoreError(f"no precis database at {path}")
        # A read in a home nobody may write still works, and writes nothing.
        read_only = (must_exist or read_only_ok) and path.is_file() and not _writable(path)
        if mmap_bytes is None:
            return SQLiteStore(path, read_only=read_only)
        return SQLiteStore(path, read_only=read_only, mmap_bytes=mmap_bytes)
    if url is not None and url.startswith(_POSTGRES_PREFIXES) and url.split("://", 1)[1].strip("/"):
        return _postgres_store_class()(url)
    raise StoreError(f"unsupported store URL {url!r}; accepted: {_ACCEPTED}")
