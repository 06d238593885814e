"""Conversation stores: the protocol, the memory and SQLite backends, and `open_store`."""

from __future__ import annotations

from pathlib import Path

from precis.stores.base import (
    CompactionEvent,
    ContextSnapshot,
    ConversationNotFound,
    ConversationStore,
    RecallHit,
    StoreError,
    UnknownMessage,
    VersionConflict,
)
from precis.stores.jsonl import JsonlLineError, export_jsonl, import_jsonl
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import SQLiteStore

__all__ = [
    "DB_FILENAME",
    "CompactionEvent",
    "ContextSnapshot",
    "ConversationNotFound",
    "ConversationStore",
    "JsonlLineError",
    "MemoryStore",
    "RecallHit",
    "SQLiteStore",
    "StoreError",
    "UnknownMessage",
    "VersionConflict",
    "export_jsonl",
    "import_jsonl",
    "open_store",
]

# The default store's file name under PRECIS_HOME.
DB_FILENAME = "precis.db"
_SQLITE_PREFIX = "sqlite://"
_ACCEPTED = "'memory', 'memory:', 'sqlite' (PRECIS_HOME/precis.db) or 'sqlite:///path/to/file.db'"


def open_store(url: str | None, *, home: Path) -> ConversationStore:
    """Open the store a URL names; None means the default SQLite file under `home`."""
    if url in ("memory", "memory:"):
        return MemoryStore()
    if url is None or url == "sqlite":
        return SQLiteStore(home / DB_FILENAME)
    if url.startswith(_SQLITE_PREFIX + "/"):
        path = url[len(_SQLITE_PREFIX) :]
        if path.strip("/"):
            return SQLiteStore(Path(path).expanduser())
    raise StoreError(f"unsupported store URL {url!r}; accepted: {_ACCEPTED}")
