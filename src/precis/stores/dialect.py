"""What one database does its own way, for the SQL store (stores/sql.py) written once above it.

A `Dialect` gives the placeholder style, the row lock, the DDL types and the hooks the shared
queries cannot say in one text for both databases (the recall index among them); `Handle` and
`Rows` are what a transaction hands the shared code, whichever the driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from precis.core.messages import Message
from precis.stores.recall import Found
from precis.stores.rows import M_COLUMNS, MESSAGE_COLUMNS

__all__ = ["Dialect", "Handle", "Rows", "context_sql"]


class Rows(Protocol):
    """What a statement returns: a sqlite3 cursor or a psycopg cursor."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Handle(Protocol):
    """What a transaction hands the shared code: a sqlite3 connection or a psycopg cursor.

    Statements come already in the driver's placeholder style (see `Dialect.sql`). Read every
    result before the next statement: on PostgreSQL the handle is one cursor.
    """

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Rows: ...

    def executemany(self, query: str, params: Iterable[Sequence[Any]], /) -> object: ...


class Dialect:
    """What one database does its own way; where a default is given, it is SQLite's.

    The DDL fragments let each migration be written once (see stores/migrations.py); the hooks
    below them are what the shared queries cannot say in one text for both databases.
    """

    # DDL: integer and flag column types, false, a table clustered on its primary key,
    # an auto-numbered key column.
    int_type = "INTEGER"
    bool_type = "INTEGER"
    false = "0"
    clustered = ""
    identity = "INTEGER PRIMARY KEY"
    # DDL of the message log: a row key column before the others, the reference to the
    # conversation, columns after tool_calls that recall reads, the (conversation, seq) key.
    message_row_key = ""
    conversation_ref = ""
    message_search_columns = ""
    seq_key = "UNIQUE"
    # Statements that make UPDATE on messages fail with 'precis messages are immutable'.
    immutable_messages: tuple[str, ...] = ()
    # Which named migrations each count-based schema_version step of an older precis stood for.
    legacy_steps: tuple[tuple[str, ...], ...] = ()
    # Appended to the conversation read of a write, to lock that row until commit.
    for_update = ""
    # Columns a message row has besides rows.INSERT_COLUMNS (see `message_extras`).
    extra_columns: tuple[str, ...] = ()
    # Where a read without a transaction saves round trips (PostgreSQL): the conversation's
    # version, next seq and compactions, then the messages after a seq, in one statement; one
    # text for a context never compacted, one for a compacted one. None: two reads.
    context_since_one: tuple[str, str] | None = None
    # Rows one INSERT carries (VALUES (…), (…)); 1: each row by executemany (SQLite's is a C
    # loop over one prepared statement, as cheap as it gets there).
    rows_per_insert = 1

    def __init__(self, context_join: str = "JOIN") -> None:
        self.context_join = context_join
        self.context_sql = self.sql(context_sql(context_join))
        # The context's messages appended after a seq (no compaction or pin since).
        self.context_since_sql = self.sql(context_sql(context_join, "AND m.seq > ?"))
        # The context's last turn (from its last message not a tool result on), each row led by
        # where the turn starts, in one statement: never compacted (seq, from 1), then
        # compacted (position in in_context, from 0). Each takes the conversation id thrice.
        last_seq = (
            "SELECT seq FROM messages WHERE conversation_id = ? AND role <> 'tool' "
            "ORDER BY seq DESC LIMIT 1"
        )
        last_position = (
            f"SELECT c.position FROM in_context AS c {context_join} messages AS m "
            "ON m.conversation_id = c.conversation_id AND m.id = c.message_id "
            "WHERE c.conversation_id = ? AND m.role <> 'tool' ORDER BY c.position DESC LIMIT 1"
        )
        first = f"COALESCE(({last_position}), 0)"
        self.turn_sql = (
            self.sql(
                f"SELECT COALESCE(({last_seq}), 1), {MESSAGE_COLUMNS} FROM messages "
                f"WHERE conversation_id = ? AND seq >= COALESCE(({last_seq}), 1) ORDER BY seq"
            ),
            self.sql(
                context_sql(context_join, f"AND c.position >= {first}").replace(
                    "SELECT ", f"SELECT {first}, ", 1
                )
            ),
        )

    def insert_rows(self, db: Handle, head: str, rows: Sequence[Sequence[Any]]) -> None:
        """`head` ("INSERT INTO t (columns) VALUES ") for each row: `rows_per_insert` rows a
        statement (one round trip and one parse for a batch), or by executemany."""
        if not rows:
            return
        marks = f"({', '.join('?' * len(rows[0]))})"
        per = self.rows_per_insert
        if per <= 1:
            db.executemany(self.sql(head + marks), rows)
            return
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            query = self.sql(head + ", ".join([marks] * len(chunk)))
            db.execute(query, [value for row in chunk for value in row])

    def sql(self, statement: str) -> str:
        """The statement in this driver's placeholder style (the shared text uses `?`)."""
        return statement

    def create_recall_index(self, db: Handle) -> None:
        """Migration m002_recall: whatever recall searches with; messages may already exist."""
        raise NotImplementedError

    def message_extras(self, db: Handle, messages: Sequence[Message]) -> list[tuple[Any, ...]]:
        """The values of `extra_columns` for each message about to be inserted."""
        return [() for _ in messages]

    def after_insert(
        self, db: Handle, messages: Sequence[Message], extras: Sequence[tuple[Any, ...]]
    ) -> None:
        """Index newly inserted messages where the database does not do it by itself."""

    def create_bounded_recall(self, db: Handle) -> None:
        """Migration m004: the index `newest` walks; messages may already exist."""
        raise NotImplementedError

    def newest(
        self, db: Handle, conversation_id: str, phases: Sequence[Sequence[str]], n: int
    ) -> list[Found]:
        """For each phase (terms), the newest `n` messages of the conversation holding every one
        of its terms (see stores/recall.py), newest first."""
        raise NotImplementedError

    def optimize(self, db: Handle) -> None:
        """Compact indexes and refresh planner statistics after a bulk load."""


def context_sql(join: str, condition: str = "") -> str:
    """The context read: walk the positions index, then fetch each message by (conversation, id).

    SQLite is given CROSS JOIN, which pins that loop order, so the cost is O(in-context) rather
    than O(history); PostgreSQL plans the same loop from its statistics.
    """
    where = f"c.conversation_id = ? {condition}".strip()
    return (
        f"SELECT {M_COLUMNS} FROM in_context AS c {join} messages AS m "
        "ON m.conversation_id = c.conversation_id AND m.id = c.message_id "
        f"WHERE {where} ORDER BY c.position"
    )
