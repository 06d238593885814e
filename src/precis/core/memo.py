"""What a session remembers to spare repeated work, kept on the session and dropped with it.

State that speeds a conversation lives on the object that owns the conversation (as h11 keeps a
connection's state on the connection): each session has one `Memo`, passes it down to what reads
it, and lets it go with the session, so no answer made for one session is handed to another and
a service's memory does not grow with the conversations it has served. A function called without
a memo works the same and remembers nothing past the call.
"""

from __future__ import annotations

import threading
from typing import Any, Generic, TypeVar

__all__ = ["CALL_ENTRIES", "Bounded", "Memo", "Table"]

K = TypeVar("K")
V = TypeVar("V")

# Distinct inputs a function remembers within one call (a token or a sentence met again in the
# same text): a `Bounded` of this size, dropped when the call returns.
CALL_ENTRIES = 4096


class Table(Generic[K, V]):
    """One kind of answer a memo keeps (a module's constant): its name and how many at most."""

    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int) -> None:
        if size < 1:
            raise ValueError(f"a memo table keeps at least one entry, got {size} for {name!r}")
        self.name = name
        self.size = size

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.size})"


class Bounded(dict[K, V]):
    """A table's entries in one memo; when full, `put` drops the oldest (spans move forward in
    time, so the oldest is the least likely asked again)."""

    __slots__ = ("_lock", "size")

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self._lock = threading.Lock()

    def put(self, key: K, value: V) -> V:
        """Remember `value` under `key` and give it back."""
        with self._lock:  # an async session's worker thread may add while the loop reads
            if key not in self and len(self) >= self.size:
                del self[next(iter(self))]
            self[key] = value
        return value


class Memo:
    """One session's remembered answers, a bounded table per kind (`Table`), made on first use."""

    __slots__ = ("__weakref__", "_tables")

    def __init__(self) -> None:
        self._tables: dict[Table[Any, Any], Bounded[Any, Any]] = {}

    def __getitem__(self, table: Table[K, V]) -> Bounded[K, V]:
        found = self._tables.get(table)
        if found is None:
            found = self._tables.setdefault(table, Bounded(table.size))
        return found

    def entries(self) -> int:
        """How many answers it holds, over all its tables."""
        return sum(map(len, list(self._tables.values())))
