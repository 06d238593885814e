"""The scale-out store: PostgreSQL through a psycopg 3 connection pool, shared by many hosts.

Thread- and process-safety: every call borrows a pooled connection for one transaction. Writes
lock the conversation row (`SELECT … FOR UPDATE`), so appends to one conversation get gapless seq
numbers and a compaction's compare-and-set on `version` cannot interleave with anything that
touches the same conversation; reads run in REPEATABLE READ so a snapshot is consistent.
Recall combines a `simple`-config tsvector (word matches, ts_rank) with `ILIKE` over a pg_trgm
GIN index, which also finds Chinese text and terms shorter than a trigram.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from precis.core.errors import ConversationNotFound, StoreError, UnknownMessage, VersionConflict
from precis.core.messages import Message, ToolCall
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
    snippet,
    utc_now,
)
from precis.stores.rows import (
    M_COLUMNS,
    MESSAGE_COLUMNS,
    apply_pins,
    json_text,
    message_from_row,
    tool_calls_json,
)

__all__ = ["DEFAULT_SCHEMA", "MIGRATIONS", "PostgresStore"]

DEFAULT_SCHEMA = "precis"
# Seconds to wait for the server when opening the store, so a wrong URL fails fast.
CONNECT_TIMEOUT_S = 10
# Seconds a call waits for a free pooled connection before failing.
POOL_TIMEOUT_S = 30.0
# Serializes schema migrations across processes and schemas (CREATE EXTENSION is database-wide).
_MIGRATION_LOCK_KEY = 0x70726563  # "prec"
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

# The text recall searches: content plus tool-call names and arguments (base.search_text).
_DOC = "(content || E'\\n' || calls_text)"

# The context read walks the positions index, then fetches each message by (conversation, id).
CONTEXT_SQL = (
    f"SELECT {M_COLUMNS} FROM in_context AS c JOIN messages AS m "
    "ON m.conversation_id = c.conversation_id AND m.id = c.message_id "
    "WHERE c.conversation_id = %s ORDER BY c.position"
)

Cursor = psycopg.Cursor[tuple[Any, ...]]

_SCHEMA_V1 = (
    """CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        version BIGINT NOT NULL DEFAULT 0,
        next_seq BIGINT NOT NULL DEFAULT 1,
        next_position BIGINT NOT NULL DEFAULT 0,
        system_prompt TEXT NOT NULL DEFAULT '',
        prompt_stale BOOLEAN NOT NULL DEFAULT FALSE,
        created_at TEXT NOT NULL
    )""",
    """CREATE TABLE messages (
        conversation_id TEXT NOT NULL REFERENCES conversations (id),
        seq BIGINT NOT NULL,
        id TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_calls TEXT NOT NULL DEFAULT '[]',
        calls_text TEXT NOT NULL DEFAULT '',
        tool_call_id TEXT,
        kind TEXT NOT NULL,
        pinned BOOLEAN NOT NULL DEFAULT FALSE,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        reasoning TEXT NOT NULL DEFAULT '',
        images INTEGER NOT NULL DEFAULT 0,
        openai_extra TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (conversation_id, seq),
        UNIQUE (conversation_id, id)
    )""",
    """CREATE FUNCTION precis_messages_are_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'precis messages are immutable'; END $$""",
    """CREATE TRIGGER messages_are_immutable BEFORE UPDATE ON messages
        FOR EACH ROW EXECUTE FUNCTION precis_messages_are_immutable()""",
    """CREATE TABLE in_context (
        conversation_id TEXT NOT NULL,
        position BIGINT NOT NULL,
        message_id TEXT NOT NULL,
        PRIMARY KEY (conversation_id, position)
    )""",
    """CREATE TABLE events (
        row_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        trigger TEXT NOT NULL,
        mode TEXT NOT NULL,
        stats TEXT NOT NULL,
        summary_id TEXT NOT NULL,
        at TEXT NOT NULL
    )""",
    "CREATE INDEX events_by_conversation ON events (conversation_id, row_id)",
    """CREATE TABLE pins (
        conversation_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        pinned BOOLEAN NOT NULL,
        PRIMARY KEY (conversation_id, message_id)
    )""",
)


def _migrate_core(cur: Cursor) -> None:
    """Step 1: conversations, the immutable message log, positions, events and pins."""
    for statement in _SCHEMA_V1:
        cur.execute(statement)


def _migrate_recall(cur: Cursor) -> None:
    """Step 2: the recall indexes: a `simple` tsvector column and, with pg_trgm, a trigram index."""
    cur.execute(
        "ALTER TABLE messages ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
        f"(to_tsvector('simple'::regconfig, {_DOC})) STORED"
    )
    cur.execute("CREATE INDEX messages_tsv ON messages USING gin (tsv)")
    trgm = _trigram_schema(cur)
    if trgm is not None:
        cur.execute(
            sql.SQL("CREATE INDEX messages_trgm ON messages USING gin ({} {}.gin_trgm_ops)").format(
                sql.SQL(_DOC), sql.Identifier(trgm)
            )
        )
    # Without pg_trgm recall still answers every query; short and Chinese terms then scan.


# Applied in order; a schema records how many it has in `schema_version`. Append only.
MIGRATIONS: tuple[Callable[[Cursor], None], ...] = (_migrate_core, _migrate_recall)


def _trigram_schema(cur: Cursor) -> str | None:
    """The schema pg_trgm lives in, installing it into `public` when allowed; None if unavailable.

    Never into the store's own schema: dropping that schema would drop the extension for all.
    """
    cur.execute("SAVEPOINT precis_trgm")
    try:
        cur.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
    except psycopg.Error:
        cur.execute("ROLLBACK TO SAVEPOINT precis_trgm")
    cur.execute("RELEASE SAVEPOINT precis_trgm")
    row = cur.execute(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n "
        "ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"
    ).fetchone()
    return None if row is None else str(row[0])


def redact(url: str) -> str:
    """The URL with any password replaced, so error messages can name the store safely."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class PostgresStore:
    """A `ConversationStore` in one PostgreSQL schema; one pooled connection per call."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: int = CONNECT_TIMEOUT_S,
        pool_timeout: float = POOL_TIMEOUT_S,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise StoreError(
                f"PostgreSQL schema name {schema!r} must be letters, digits and _ "
                "(not starting with a digit, at most 63 chars)"
            )
        self.url = url
        self.schema = schema
        self._where = f"PostgreSQL store {redact(url)!r} (schema {schema!r})"
        self._ids = MessageIds()
        self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] | None = None
        self._migrate(connect_timeout)
        try:
            pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                timeout=pool_timeout,
                kwargs={"autocommit": True, "connect_timeout": connect_timeout},
                configure=self._configure,
                name=f"precis-{schema}",
                open=False,
            )
        except (psycopg.Error, ValueError) as exc:
            raise StoreError(f"cannot open {self._where}: {exc}") from exc
        try:
            pool.open(wait=True, timeout=float(connect_timeout))
        except psycopg.Error as exc:
            pool.close()
            raise StoreError(f"cannot open {self._where}: {exc}") from exc
        self._pool = pool

    # --- plumbing -----------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Point a new pooled connection at this store's schema."""
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    def _migrate(self, connect_timeout: int) -> None:
        """Create the schema and apply missing migrations, one process at a time."""
        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=connect_timeout
            ) as conn:
                self._configure(conn)
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
                    cur.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self.schema)
                        )
                    )
                    cur.execute(
                        "CREATE TABLE IF NOT EXISTS schema_version "
                        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
                    )
                    row = cur.execute(
                        "SELECT coalesce(max(version), 0) FROM schema_version"
                    ).fetchone()
                    applied = int(row[0]) if row else 0
                    if applied > len(MIGRATIONS):
                        raise StoreError(
                            f"{self._where}: schema version {applied} is newer than this "
                            f"precis knows ({len(MIGRATIONS)}); upgrade precis"
                        )
                    for version in range(applied + 1, len(MIGRATIONS) + 1):
                        MIGRATIONS[version - 1](cur)
                        cur.execute(
                            "INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                            (version, utc_now()),
                        )
        except (psycopg.Error, ValueError) as exc:
            raise StoreError(f"cannot open {self._where}: {exc}") from exc

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Cursor]:
        """One transaction on a pooled connection; reads see one consistent snapshot."""
        pool = self._pool
        if pool is None:
            raise StoreError(f"{self._where} is closed")
        try:
            with pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                if not write:
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield cur
        except psycopg.Error as exc:
            raise StoreError(f"{self._where}: {exc}") from exc

    @staticmethod
    def _conversation_row(
        cur: Cursor, conversation_id: str, *, lock: bool = False
    ) -> tuple[int, int, int]:
        """(version, next_seq, next_position), row-locked for a write; or ConversationNotFound."""
        row = cur.execute(
            "SELECT version, next_seq, next_position FROM conversations WHERE id = %s"
            + (" FOR UPDATE" if lock else ""),
            (conversation_id,),
        ).fetchone()
        if row is None:
            raise ConversationNotFound(conversation_id)
        return int(row[0]), int(row[1]), int(row[2])

    @staticmethod
    def _existing_ids(cur: Cursor, conversation_id: str, ids: Sequence[str]) -> set[str]:
        rows = cur.execute(
            "SELECT id FROM messages WHERE conversation_id = %s AND id = ANY(%s)",
            (conversation_id, list(dict.fromkeys(ids))),
        ).fetchall()
        return {str(row[0]) for row in rows}

    def _insert(
        self, cur: Cursor, conversation_id: str, messages: Sequence[Message], first_seq: int
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
            clash = self._existing_ids(cur, conversation_id, given)
            if clash:
                raise _duplicate(conversation_id, next(i for i in given if i in clash))
        if stored:
            cur.executemany(
                "INSERT INTO messages (conversation_id, seq, id, role, content, tool_calls, "
                "calls_text, tool_call_id, kind, pinned, metadata, created_at, reasoning, "
                "images, openai_extra) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [_message_row(conversation_id, first_seq + i, m) for i, m in enumerate(stored)],
            )
        return stored

    def _snapshot(self, cur: Cursor, conversation_id: str) -> ContextSnapshot:
        version, next_seq, _ = self._conversation_row(cur, conversation_id)
        if version == 0:
            cur.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = %s ORDER BY seq",
                (conversation_id,),
            )
        else:
            cur.execute(CONTEXT_SQL, (conversation_id,))
        messages = [message_from_row(row) for row in cur.fetchall()]
        return ContextSnapshot(
            messages=_with_pins(cur, conversation_id, messages),
            version=version,
            last_seq=next_seq - 1,
            compacted=version > 0,
        )

    # --- the protocol -------------------------------------------------------------------------

    def create(self, conversation_id: str, *, system_prompt: str = "") -> None:
        """Create the conversation if missing; an existing one is left untouched."""
        with self._transaction(write=True) as cur:
            cur.execute(
                "INSERT INTO conversations (id, system_prompt, created_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (conversation_id, system_prompt, utc_now()),
            )

    def exists(self, conversation_id: str) -> bool:
        """Whether the conversation is in the store."""
        with self._transaction(write=False) as cur:
            row = cur.execute(
                "SELECT 1 FROM conversations WHERE id = %s", (conversation_id,)
            ).fetchone()
            return row is not None

    def conversations(self) -> list[str]:
        """Every conversation id, sorted (bytewise, as SQLite and Python sort)."""
        with self._transaction(write=False) as cur:
            rows = cur.execute('SELECT id FROM conversations ORDER BY id COLLATE "C"').fetchall()
            return [str(row[0]) for row in rows]

    def append(self, conversation_id: str, messages: Sequence[Message]) -> list[Message]:
        """Append in one transaction under the conversation's row lock; ids and seq filled in."""
        with self._transaction(write=True) as cur:
            cur.execute(
                "INSERT INTO conversations (id, created_at) VALUES (%s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (conversation_id, utc_now()),
            )
            version, next_seq, next_position = self._conversation_row(
                cur, conversation_id, lock=True
            )
            stored = self._insert(cur, conversation_id, messages, next_seq)
            if version > 0 and stored:
                cur.executemany(
                    "INSERT INTO in_context (conversation_id, position, message_id) "
                    "VALUES (%s, %s, %s)",
                    [(conversation_id, next_position + i, m.id) for i, m in enumerate(stored)],
                )
                next_position += len(stored)
            cur.execute(
                "UPDATE conversations SET next_seq = %s, next_position = %s WHERE id = %s",
                (next_seq + len(stored), next_position, conversation_id),
            )
            return stored

    def context(self, conversation_id: str) -> ContextSnapshot:
        """The in-context messages in order; everything when never compacted."""
        with self._transaction(write=False) as cur:
            return self._snapshot(cur, conversation_id)

    def history(
        self, conversation_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[Message]:
        """Every message ever appended (summaries included), in seq order."""
        check_page(offset, limit)
        with self._transaction(write=False) as cur:
            self._conversation_row(cur, conversation_id)
            # seq runs 1, 2, 3… without gaps, so the offset is a seq bound, not a row skip.
            rows = cur.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = %s AND seq > %s "
                "ORDER BY seq LIMIT %s",
                (conversation_id, offset, limit),
            ).fetchall()
            return _with_pins(cur, conversation_id, [message_from_row(row) for row in rows])

    def get(self, conversation_id: str, ids: Sequence[str]) -> list[Message]:
        """The messages with these ids, in the order asked; UnknownMessage for a missing one."""
        with self._transaction(write=False) as cur:
            self._conversation_row(cur, conversation_id)
            rows = cur.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages "
                "WHERE conversation_id = %s AND id = ANY(%s)",
                (conversation_id, list(dict.fromkeys(ids))),
            ).fetchall()
            found = {str(row[0]): message_from_row(row) for row in rows}
            for message_id in ids:
                if message_id not in found:
                    raise UnknownMessage(conversation_id, message_id)
            return _with_pins(cur, conversation_id, [found[i] for i in ids])

    def set_pinned(self, conversation_id: str, message_id: str, pinned: bool) -> None:
        """Pin or unpin a stored message (an overlay row; the message row never changes)."""
        with self._transaction(write=True) as cur:
            self._conversation_row(cur, conversation_id, lock=True)
            if not self._existing_ids(cur, conversation_id, [message_id]):
                raise UnknownMessage(conversation_id, message_id)
            cur.execute(
                "INSERT INTO pins (conversation_id, message_id, pinned) VALUES (%s, %s, %s) "
                "ON CONFLICT (conversation_id, message_id) DO UPDATE SET pinned = excluded.pinned",
                (conversation_id, message_id, pinned),
            )

    def count(self, conversation_id: str) -> int:
        """How many messages the log holds."""
        with self._transaction(write=False) as cur:
            _, next_seq, _ = self._conversation_row(cur, conversation_id)
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
        """Compare-and-set on `version` under the row lock: summary, id list, event, or nothing."""
        with self._transaction(write=True) as cur:
            version, next_seq, _ = self._conversation_row(cur, conversation_id, lock=True)
            if version != expected_version:
                raise VersionConflict(conversation_id, expected_version, version)
            check_summary(conversation_id, summary, event)
            existing = self._existing_ids(cur, conversation_id, [*context_ids, summary.id])
            if summary.id in existing:
                raise _duplicate(conversation_id, summary.id)
            check_context_ids(conversation_id, context_ids, summary.id, existing.__contains__)
            stats = json.dumps(
                json_safe(event.stats, f"stats of the compaction event of {conversation_id!r}"),
                ensure_ascii=False,
            )
            kept = set(context_ids)
            later = [
                str(row[0])
                for row in cur.execute(
                    "SELECT id FROM messages WHERE conversation_id = %s AND seq > %s ORDER BY seq",
                    (conversation_id, snapshot_last_seq),
                ).fetchall()
                if row[0] not in kept
            ]
            (stored,) = self._insert(cur, conversation_id, [summary], next_seq)
            id_list = [*context_ids, *later]
            cur.execute("DELETE FROM in_context WHERE conversation_id = %s", (conversation_id,))
            if id_list:
                cur.executemany(
                    "INSERT INTO in_context (conversation_id, position, message_id) "
                    "VALUES (%s, %s, %s)",
                    [(conversation_id, i, message_id) for i, message_id in enumerate(id_list)],
                )
            # The WHERE repeats the compare-and-set, so the write itself cannot skip a version.
            cur.execute(
                "UPDATE conversations SET version = version + 1, next_seq = %s, "
                "next_position = %s, prompt_stale = TRUE WHERE id = %s AND version = %s",
                (next_seq + 1, len(id_list), conversation_id, expected_version),
            )
            if cur.rowcount != 1:
                raise VersionConflict(conversation_id, expected_version, expected_version + 1)
            cur.execute(
                "INSERT INTO events (conversation_id, trigger, mode, stats, summary_id, at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (conversation_id, event.trigger, event.mode, stats, stored.id, event.at),
            )
            return self._snapshot(cur, conversation_id)

    def events(self, conversation_id: str) -> list[CompactionEvent]:
        """The compaction events, oldest first."""
        with self._transaction(write=False) as cur:
            self._conversation_row(cur, conversation_id)
            rows = cur.execute(
                "SELECT trigger, mode, stats, summary_id, at FROM events "
                "WHERE conversation_id = %s ORDER BY row_id",
                (conversation_id,),
            ).fetchall()
            return [
                CompactionEvent(
                    trigger=row[0],
                    mode=row[1],
                    stats=json.loads(row[2]),
                    summary_id=row[3],
                    at=row[4],
                )
                for row in rows
            ]

    def system_prompt(self, conversation_id: str) -> tuple[str, bool]:
        """The compiled system prompt and whether a compaction made it stale."""
        with self._transaction(write=False) as cur:
            row = cur.execute(
                "SELECT system_prompt, prompt_stale FROM conversations WHERE id = %s",
                (conversation_id,),
            ).fetchone()
            if row is None:
                raise ConversationNotFound(conversation_id)
            return str(row[0]), bool(row[1])

    def set_system_prompt(self, conversation_id: str, text: str) -> None:
        """Store a recompiled system prompt and clear the stale flag."""
        with self._transaction(write=True) as cur:
            cur.execute(
                "UPDATE conversations SET system_prompt = %s, prompt_stale = FALSE WHERE id = %s",
                (text, conversation_id),
            )
            if cur.rowcount == 0:
                raise ConversationNotFound(conversation_id)

    def recall(self, conversation_id: str, query: str, limit: int = 10) -> list[RecallHit]:
        """Search every message: tsvector word matches or trigram-indexed substrings, best first.

        Each term is a bound parameter (plainto_tsquery, an escaped ILIKE pattern), so no query
        syntax can raise. Score: distinct terms present, plus ts_rank of the word matches.
        """
        terms = query_terms(query)
        with self._transaction(write=False) as cur:
            self._conversation_row(cur, conversation_id)
            if not terms or limit <= 0:
                return []
            tsquery = " || ".join(["plainto_tsquery('simple'::regconfig, %s)"] * len(terms))
            present = " + ".join([f"({_DOC} ILIKE %s)::int"] * len(terms))
            patterns = [_like_pattern(t) for t in terms]
            rows = cur.execute(
                f"WITH q AS (SELECT ({tsquery}) AS q) "
                "SELECT id, role, seq, content, calls_text, score FROM ("
                f"  SELECT m.id, m.role, m.seq, m.content, m.calls_text, "
                f"    ({present}) + ts_rank(m.tsv, q.q) AS score "
                "  FROM messages AS m, q "
                f"  WHERE m.conversation_id = %s AND (m.tsv @@ q.q OR {_DOC} ILIKE ANY(%s))"
                ") AS hits WHERE score > 0 ORDER BY score DESC, seq DESC LIMIT %s",
                (*terms, *patterns, conversation_id, patterns, limit),
            ).fetchall()
        return [
            RecallHit(
                id=str(row[0]),
                role=str(row[1]),
                seq=int(row[2]),
                snippet=snippet(_doc_text(row[3], row[4]), terms),
                score=float(row[5]),
            )
            for row in rows
        ]

    def close(self) -> None:
        """Close the pool; later calls raise StoreError."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _duplicate(conversation_id: str, message_id: str) -> StoreError:
    return StoreError(
        f"message id {message_id!r} already exists in conversation {conversation_id!r}"
    )


def _like_pattern(term: str) -> str:
    """An ILIKE pattern matching `term` anywhere, with its own %, _ and \\ taken literally."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _calls_text(calls: Sequence[ToolCall]) -> str:
    """What recall indexes of the tool calls, exactly as base.search_text joins them."""
    return " ".join(f"{tc.name} {tc.arguments}" for tc in calls)


def _doc_text(content: str, calls_text: str) -> str:
    """base.search_text rebuilt from the stored columns, for snippets."""
    if not calls_text:
        return content
    return f"{content}\n{calls_text}" if content else calls_text


def _message_row(conversation_id: str, seq: int, m: Message) -> tuple[Any, ...]:
    calls = tool_calls_json(m.tool_calls)
    return (
        conversation_id,
        seq,
        m.id,
        m.role,
        m.content,
        calls,
        _calls_text(m.tool_calls),
        m.tool_call_id,
        m.kind,
        m.pinned,
        json_text(m.metadata),
        m.created_at,
        m.reasoning,
        m.images,
        json_text(m.openai_extra),
    )


def _with_pins(cur: Cursor, conversation_id: str, messages: list[Message]) -> list[Message]:
    """Apply the pin overlay: one indexed read of this conversation's (few) pin rows."""
    rows = cur.execute(
        "SELECT message_id, pinned FROM pins WHERE conversation_id = %s", (conversation_id,)
    ).fetchall()
    return apply_pins(messages, {str(r[0]): bool(r[1]) for r in rows})
