"""The scale-out store: PostgreSQL through a psycopg 3 connection pool, shared by many hosts.

Thread- and process-safety: every call borrows a pooled connection for one transaction. Writes
lock the conversation row (`SELECT … FOR UPDATE`), so appends to one conversation get gapless seq
numbers and a compaction's compare-and-set on `version` cannot interleave with anything that
touches the same conversation; reads run in REPEATABLE READ so a snapshot is consistent.
Recall (stores/recall.py) reads one GIN index a window of messages at a time, newest first: each
message's window, its grams (one or two CJK characters) and, with pg_trgm, its trigrams; a long
term is asked of the index by its rare pieces only (stores/pg_terms.py), each row found checked
for the whole term.

The queries are the shared ones of `SQLStore`; this module adds PostgreSQL's dialect and the pool.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import IsolationLevel, sql
from psycopg_pool import ConnectionPool

from precis.core.errors import StoreError, StoreUnavailable
from precis.core.messages import Message
from precis.stores.dialect import Dialect, Handle
from precis.stores.migrations import bind, migrate
from precis.stores.pg_terms import (
    Samples,
    caseless,
    doc_text,
    index_patterns,
    index_pieces,
    like_pattern,
    rarest_piece,
)
from precis.stores.recall import (
    IDEOGRAPHIC_RANGES,
    Found,
    found,
    holds_all,
    scan_bound,
    term_kind,
    text_grams,
)
from precis.stores.rows import M_COLUMNS
from precis.stores.sql import SQLStore
from precis.stores.sql_series import SQLSeries

__all__ = ["CONTEXT_SQL", "DEFAULT_SCHEMA", "MIGRATIONS", "PostgresDialect", "PostgresStore"]

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
# Recall reads a conversation in windows of this many seq numbers (see `_newest`); a message's
# window is a key of the recall index, so changing this needs a migration.
WINDOW_ROWS = 256
SPAN_ROWS = 64 * WINDOW_ROWS
# A message's keys in the recall index: its window and its span (of its conversation).
_WINDOW = (
    f"ARRAY[conversation_id || ':' || (seq / {WINDOW_ROWS})::text, "
    f"conversation_id || '::' || (seq / {SPAN_ROWS})::text]"
)
# Recall reads this many windows first: a common word has enough in them.
FIRST_WINDOWS = 4
# The first read walks those windows row by row (the primary key) when the sample expects at
# least one row in this many to match the phase; rarer, it asks the recall index for them.
RARE_ROWS = 32
# A phase the sample finds in at least this share of messages is walked row by row whatever the
# planner would do: it finds what it wants among the first few hundred rows and stops, where a
# bitmap of the windows checks every match in them (`migration` alone: 407 long tool outputs,
# 8.4 ms, against some 3 ms walked; after some ANALYZE runs the planner prefers the bitmap).
COMMON_SHARE = 0.2
# When no more than this many matches are expected in all the history left, it is read at once.
FEW_LEFT = 2
# The same text as an expression the recall index does not hold: a term none of its trigrams
# can find is checked on each row of the window instead of sending the index through them all.
_UNINDEXED_DOC = "(content || E'\\n' || calls_text || '')"
# Any character `recall.text_grams` indexes, as a PostgreSQL regular expression.
_GRAM_PATTERN = "[" + "".join(f"\\U{a:08X}-\\U{b:08X}" for a, b in IDEOGRAPHIC_RANGES) + "]"
Connection = psycopg.Connection[tuple[Any, ...]]


def _pyformat(statement: str) -> str:
    """`?` placeholders as psycopg's `%s`, and a literal % doubled."""
    return statement.replace("%", "%%").replace("?", "%s")


class PostgresDialect(Dialect):
    """PostgreSQL: real types, a row lock, calls_text beside each message for the text indexes."""

    int_type = "BIGINT"
    bool_type = "BOOLEAN"
    false = "FALSE"
    identity = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    conversation_ref = " REFERENCES conversations (id)"
    message_search_columns = "\n        calls_text TEXT NOT NULL DEFAULT '',"
    seq_key = "PRIMARY KEY"
    immutable_messages = (
        """CREATE FUNCTION precis_messages_are_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'precis messages are immutable'; END $$""",
        """CREATE TRIGGER messages_are_immutable BEFORE UPDATE ON messages
        FOR EACH ROW EXECUTE FUNCTION precis_messages_are_immutable()""",
    )
    # schema_version 1 of the count-based precis made the pins table with the core, 2 recall.
    legacy_steps = (("m001_core", "m003_pins"), ("m002_recall",))
    for_update = " FOR UPDATE"
    extra_columns = ("calls_text", "grams")
    # A batch's rows in one statement: executemany's pipeline costs the client more per row.
    rows_per_insert = 64

    def __init__(self) -> None:
        super().__init__()
        self._samples = Samples()
        # The counters and the messages appended after a seq, as one statement (one snapshot,
        # no transaction): never compacted, then compacted (the context is in_context's list).
        counters = "SELECT v.version, v.next_seq, v.compactions, "
        self.context_since_one = (
            self.sql(
                f"{counters}{M_COLUMNS} FROM conversations AS v LEFT JOIN messages AS m "
                "ON m.conversation_id = v.id AND m.seq > ? WHERE v.id = ? ORDER BY m.seq"
            ),
            self.sql(
                f"{counters}{M_COLUMNS} FROM conversations AS v LEFT JOIN (in_context AS c "
                "JOIN messages AS m ON m.conversation_id = c.conversation_id "
                "AND m.id = c.message_id AND m.seq > ?) ON c.conversation_id = v.id "
                "WHERE v.id = ? ORDER BY c.position"
            ),
        )

    def sql(self, statement: str) -> str:
        return _pyformat(statement)

    def create_recall_index(self, db: Handle) -> None:
        """A `simple` tsvector column and, with pg_trgm, a trigram index over the same text."""
        db.execute(
            "ALTER TABLE messages ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
            f"(to_tsvector('simple'::regconfig, {_DOC})) STORED"
        )
        db.execute("CREATE INDEX messages_tsv ON messages USING gin (tsv)")
        trgm = _trigram_schema(db)
        if trgm is not None:
            schema = '"' + trgm.replace('"', '""') + '"'
            db.execute(
                f"CREATE INDEX messages_trgm ON messages USING gin ({_DOC} {schema}.gin_trgm_ops)"
            )
        # Without pg_trgm recall still answers every query; short and Chinese terms then scan.

    def create_bounded_recall(self, db: Handle) -> None:
        """m004: the tsvector column and the m002 indexes go; a column of `recall.text_grams`
        comes (filled for the rows that have any), and one GIN index of each message's window,
        grams and, with pg_trgm, trigrams, which `newest` reads a window at a time."""
        db.execute("ALTER TABLE messages DROP COLUMN IF EXISTS tsv")
        db.execute("DROP INDEX IF EXISTS messages_trgm")
        # Long texts are compressed with lz4 where the server has it: recall reads each
        # candidate's text, and lz4 gives it back several times faster than the default pglz.
        _try(db, "ALTER TABLE messages ALTER COLUMN content SET COMPRESSION lz4")
        db.execute("ALTER TABLE messages ADD COLUMN grams TEXT[]")
        rows = db.execute(
            self.sql(
                f"SELECT conversation_id, seq, content, calls_text FROM messages WHERE {_DOC} ~ ?"
            ),
            (_GRAM_PATTERN,),
        ).fetchall()
        if rows:
            # Messages never change, save for this one backfill of a column they did not have.
            db.execute("ALTER TABLE messages DISABLE TRIGGER messages_are_immutable")
            db.executemany(
                self.sql("UPDATE messages SET grams = ? WHERE conversation_id = ? AND seq = ?"),
                [(text_grams(doc_text(row[2], row[3])), row[0], row[1]) for row in rows],
            )
            db.execute("ALTER TABLE messages ENABLE TRIGGER messages_are_immutable")
        columns = [f"({_WINDOW})", "grams"]
        trgm = _trigram_schema(db)
        if trgm is not None:
            schema = '"' + trgm.replace('"', '""') + '"'
            columns.append(f"{_DOC} {schema}.gin_trgm_ops")
        # Without pg_trgm a term of three or more characters is looked for window by window.
        db.execute(f"CREATE INDEX messages_recall ON messages USING gin ({', '.join(columns)})")

    def message_extras(self, db: Handle, messages: Sequence[Message]) -> list[tuple[Any, ...]]:
        """The tool calls as recall indexes them (base.search_text joins them so), and the grams
        of the search text (None when it has none, as for most English)."""
        extras: list[tuple[Any, ...]] = []
        for m in messages:
            calls = " ".join(f"{tc.name} {tc.arguments}" for tc in m.tool_calls)
            extras.append((calls, text_grams(doc_text(m.content, calls)) or None))
        return extras

    def newest(
        self, db: Handle, conversation_id: str, phases: Sequence[Sequence[str]], n: int
    ) -> list[Found]:
        """Each phase's newest matches (`_newest`), each read planned for its own parameters:
        psycopg prepares a statement run five times, and a generic plan cannot know how rare a
        recall term or how wide a window is (SET LOCAL: for this transaction only)."""
        db.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        return [hit for terms in phases for hit in self._newest(db, conversation_id, terms, n)]

    def _newest(
        self, db: Handle, conversation_id: str, terms: Sequence[str], n: int
    ) -> list[Found]:
        """Window by window back from the newest: one query each, every term an index condition
        together with the windows (a trigram ILIKE, a lookup in the grams column), so no query
        reads all the matches of a common term, nor walks the whole history for a rare one.
        Each read is sized from the rate of matches in those before it, to hold what is missing
        (asked by spans of 64 windows when it is long); once few matches are expected in all
        that is left, that is read at once. The first read walks its windows row by row unless
        the conversation's newest messages show the terms to be rare together; then it too asks
        the index (checking every row of four windows for two words costs some 12 ms). The
        reads of spans and of all the rest ask the index for each term of several by its rarest
        key only (`rarest_piece`), each row it lets through checked for the whole term: there
        each key costs its list of rows over most of the history, not over a few windows.

        A first read walked row by row folds each row's text once for all the terms (`lower`,
        then `LIKE ALL`), where an `ILIKE` per term folds it for each: 15 -> 7 ms for `deploy
        staging cluster` at 1,000,000 messages.

        Each term is a bound parameter (an escaped ILIKE pattern, an array), so no query syntax
        can raise. A term no index answers is checked on the rows of the window only.
        """
        top = db.execute(
            self.sql("SELECT next_seq - 1 FROM conversations WHERE id = ?"), (conversation_id,)
        ).fetchone()
        last = int(top[0]) if top is not None else 0
        kinds = [term_kind(t) for t in terms]
        grams = [t for t, kind in zip(terms, kinds, strict=True) if kind == "gram"]
        indexed = [t for t, kind in zip(terms, kinds, strict=True) if kind == "trigram"]
        scanned = [t for t, kind in zip(terms, kinds, strict=True) if kind == "scan"]
        # A long term alone is asked of the index by its rare trigrams, each row checked for it
        # all; several terms narrow each other, and checking each row for each costs more.
        share, held = self._samples.share(db, conversation_id, last)
        asked: list[tuple[str, str]] = []
        checked = [like_pattern(t) for t in scanned]
        # For the reads of spans and of all the rest, where each key asked costs its list of
        # rows over most of the history: each term of several by its rarest key alone.
        wide_asked: list[tuple[str, str]] = []
        wide_checked = list(checked)
        for term in indexed:
            pieces = index_pieces(term, share) if len(terms) == 1 else None
            if pieces is None:
                asked += index_patterns([term])  # LIKE for a term without letters
            else:
                asked += index_patterns(pieces)
                checked.append(like_pattern(term))
            piece = rarest_piece(term, share) if len(terms) > 1 else term
            if piece == term:
                wide_asked += index_patterns([term])
            else:
                wide_asked += index_patterns([piece])
                wide_checked.append(like_pattern(term))
        if len(terms) == 1:
            wide_asked, wide_checked = asked, checked
        where, conditions = _where(asked, checked, grams)
        select = "SELECT id, role, seq, content, calls_text FROM messages WHERE conversation_id = ?"
        rest = f" AND seq >= ? AND seq <= ? AND {where} ORDER BY seq"
        windowed = self.sql(f"{select} AND {_WINDOW} && ?{rest} DESC LIMIT ?")
        # The same through the recall index only: `seq + 0`, a range the primary key cannot give.
        indexed_rest = rest.replace("seq >= ? AND seq <= ?", "seq + 0 >= ? AND seq + 0 <= ?")
        through_index = self.sql(f"{select} AND {_WINDOW} && ?{indexed_rest} DESC LIMIT ?")
        wide_where, wide_conditions = _where(wide_asked, wide_checked, grams)
        wide_rest = f" AND seq >= ? AND seq <= ? AND {wide_where} ORDER BY seq"
        spans = windowed
        if wide_conditions != conditions:
            # Asked by keys the planner may think common: through the recall index only.
            indexed_wide = wide_rest.replace(
                "seq >= ? AND seq <= ?", "seq + 0 >= ? AND seq + 0 <= ?"
            )
            spans = self.sql(f"{select} AND {_WINDOW} && ?{indexed_wide} + 0 DESC LIMIT ?")
        # `seq + 0`: an order the primary key cannot give, or the planner, which cannot know a
        # term is rare, may walk the history backwards through it checking every row.
        everything = self.sql(f"{select}{wide_rest} + 0 DESC LIMIT ?")
        # A first read of two terms with letters or more, or of a phase in COMMON_SHARE of the
        # sample or more, row by row, each row's text folded once for all its terms (`ILIKE`
        # folds it for each: lower(a) LIKE lower(b) is how PostgreSQL does a ILIKE b); the grams
        # not indexed. Another is left to the planner, which may ask the index within the
        # windows (`port=9200`, in some 10 % of messages: 8.5 ms so, 12 walked).
        texts = [t for t, kind in zip(terms, kinds, strict=True) if kind != "gram"]
        bare = [like_pattern(t) for t in texts if caseless(t)]  # no case to fold: LIKE
        cased = [like_pattern(t) for t in texts if not caseless(t)]
        walked_where = [f"{_UNINDEXED_DOC} LIKE ?" for _ in bare]
        if cased:
            folded = ", ".join(["lower(?)"] * len(cased))
            walked_where.append(f"lower({_UNINDEXED_DOC}) LIKE ALL (ARRAY[{folded}])")
        if grams:
            walked_where.append("coalesce(grams, '{}') @> ?")
        walked_rest = f" AND seq >= ? AND seq <= ? AND {' AND '.join(walked_where)}"
        walked = self.sql(f"{select}{walked_rest} ORDER BY seq DESC LIMIT ?")
        walked_conditions = (*bare, *cased, *([list(grams)] if grams else []))
        floor = scan_bound(terms, last) + 1  # the oldest seq a match may have
        out: list[Found] = []
        high, wanted = last, FIRST_WINDOWS * WINDOW_ROWS
        # Reading the first windows row by row checks each row's text for each term: cheap
        # when many rows match, wasted when few do. Which is so, the sample of the newest says.
        share_held = held(terms)
        walk_first = not ((asked or grams) and share_held * RARE_ROWS < 1)
        walk_always = walk_first and (len(cased) > 1 or share_held >= COMMON_SHARE)
        window: tuple[Any, ...]
        while high >= floor and len(out) < n:
            rate = (len(out) + 1) / max(1, last - high)
            if rate * (high - floor + 1) <= FEW_LEFT * (n - len(out)) and high < last:
                # Few matches are left to find: all the rest at once, the terms narrowing it.
                low, query, window, asking = floor, everything, (), wide_conditions
            else:
                start = max(floor, high - wanted + 1)
                low, keys = _windows(conversation_id, high, start)
                low, window, asking = max(low, floor), (keys,), conditions
                if high == last and walk_always:
                    query, window, asking = walked, (), walked_conditions
                elif high == last:
                    query = windowed if walk_first else through_index
                elif high - start < SPAN_ROWS:
                    query = windowed
                else:
                    query, asking = spans, wide_conditions
            params = (conversation_id, *window, low, high, *asking, n - len(out))
            for row in db.execute(query, params).fetchall():
                hit = found(str(row[0]), str(row[1]), int(row[2]), doc_text(row[3], row[4]))
                if holds_all(hit, terms):
                    out.append(hit)
            high = low - 1
            # The rows that should hold what is missing, at the rate found so far (one more,
            # so that finding none does not read everything at once).
            wanted = (n - len(out)) * (last - high) // (len(out) + 1)
        return out

    def optimize(self, db: Handle) -> None:
        """Move the recall index's pending list into the index proper, and ANALYZE.

        GIN gathers new entries in a pending list of up to gin_pending_list_limit (4 MB by
        default), and every read of the index reads all of it: after a bulk load a few
        milliseconds of every recall query (autovacuum empties it too, in its own time). Only
        the index's owner may: anyone else leaves it to autovacuum."""
        _try(db, "SELECT gin_clean_pending_list('messages_recall'::regclass)")
        db.execute("ANALYZE conversations, messages, in_context, events, pins")


def _try(db: Handle, statement: str) -> None:
    """Run a statement the server may refuse (a missing feature, a missing right) without
    aborting the transaction around it."""
    db.execute("SAVEPOINT precis_try")
    try:
        db.execute(statement)
    except psycopg.Error:
        db.execute("ROLLBACK TO SAVEPOINT precis_try")
    db.execute("RELEASE SAVEPOINT precis_try")


def _where(
    asked: Sequence[tuple[str, str]], checked: Sequence[str], grams: Sequence[str]
) -> tuple[str, tuple[Any, ...]]:
    """The conditions of a read, and their parameters: the terms (or pieces of them) the recall
    index is asked for, those checked on each row it lets through, and the grams."""
    where = [f"{_DOC} {operator} ?" for operator, _ in asked]
    where += [f"{_UNINDEXED_DOC} ILIKE ?" for _ in checked]
    if grams:
        where.append("grams @> ?")
    params = (*(pattern for _, pattern in asked), *checked, *([list(grams)] if grams else []))
    return " AND ".join(where), params


def _windows(conversation_id: str, high: int, low: int) -> tuple[int, list[str]]:
    """Index keys for the seq numbers from `low` (widened to a boundary) up to `high`: windows,
    or spans when more than a span's worth of windows would be needed."""
    if high - low < SPAN_ROWS:
        first, last, size, mark = low // WINDOW_ROWS, high // WINDOW_ROWS, WINDOW_ROWS, ":"
    else:
        first, last, size, mark = low // SPAN_ROWS, high // SPAN_ROWS, SPAN_ROWS, "::"
    keys = [f"{conversation_id}{mark}{unit}" for unit in range(last, first - 1, -1)]
    return max(1, first * size), keys


def _trigram_schema(db: Handle) -> str | None:
    """The schema pg_trgm lives in, installing it into `public` when allowed; None if unavailable.

    Never into the store's own schema: dropping that schema would drop the extension for all.
    """
    _try(db, "CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
    row = db.execute(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n "
        "ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"
    ).fetchone()
    return None if row is None else str(row[0])


CONTEXT_SQL = PostgresDialect().context_sql
MIGRATIONS = bind(PostgresDialect())


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


class PostgresStore(SQLStore, SQLSeries):
    """A `ConversationStore` in one PostgreSQL schema; one pooled connection per call."""

    _window_thinning = True

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
        super().__init__(PostgresDialect(), f"PostgreSQL store {redact(url)!r} (schema {schema!r})")
        self._pool: ConnectionPool[Connection] | None = None
        self._migrate(connect_timeout)
        try:
            pool: ConnectionPool[Connection] = ConnectionPool(
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

    def _configure(self, conn: Connection) -> None:
        """Point a new pooled connection at this store's schema. Its statements keep
        PostgreSQL's own plan caching (a prepared lookup by key is planned once, not at every
        call); recall plans each of its reads for its parameters (`PostgresDialect.newest`)."""
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
                    migrate(cur, self._dialect, self._where)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot open {self._where}: {exc}".rstrip()) from exc
        except (psycopg.Error, ValueError) as exc:
            raise StoreError(f"cannot open {self._where}: {exc}") from exc

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Handle]:
        """One transaction on a pooled connection; reads see one consistent snapshot."""
        pool = self._pool
        if pool is None:
            raise StoreError(f"{self._where} is closed")
        try:
            with pool.connection() as conn:
                # A read's BEGIN names its isolation: one round trip, no SET TRANSACTION after.
                conn.isolation_level = None if write else IsolationLevel.REPEATABLE_READ
                conn.read_only = None if write else True
                with conn.transaction(), conn.cursor() as cur:
                    yield cur
        except psycopg.OperationalError as exc:
            # Unreachable, connection lost, no pooled connection in time, disk full, shut down.
            raise StoreUnavailable(f"{self._where}: {exc}".rstrip()) from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self._where}: {exc}") from exc

    @contextmanager
    def _statement(self) -> Iterator[Handle]:
        """A read of one statement on an autocommit connection: no BEGIN, no COMMIT."""
        pool = self._pool
        if pool is None:
            raise StoreError(f"{self._where} is closed")
        try:
            with pool.connection() as conn, conn.cursor() as cur:
                yield cur
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"{self._where}: {exc}".rstrip()) from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self._where}: {exc}") from exc

    def close(self) -> None:
        """Close the pool; later calls raise StoreError."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
