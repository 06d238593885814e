"""The scale-out store: PostgreSQL through a psycopg 3 connection pool, shared by many hosts.

Thread- and process-safety: every call borrows a pooled connection for one transaction. Writes
lock the conversation row (`SELECT … FOR UPDATE`), so appends to one conversation get gapless seq
numbers and a compaction's compare-and-set on `version` cannot interleave with anything that
touches the same conversation; reads run in REPEATABLE READ so a snapshot is consistent.
Recall (stores/recall.py) reads one GIN index a window of messages at a time, newest first: each
message's window, its grams (one or two CJK characters) and, with pg_trgm, its trigrams; a long
term is asked of the index by its rare pieces only, each row found checked for the whole term.

The queries are the shared ones of `SQLStore`; this module adds PostgreSQL's dialect and the pool.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from precis.core.errors import StoreError
from precis.core.messages import Message
from precis.stores.dialect import Dialect, Handle
from precis.stores.migrations import bind, migrate
from precis.stores.recall import (
    IDEOGRAPHIC_RANGES,
    MOST_TRIGRAMS,
    RARE_SHARE,
    TRIGRAM_CHARS,
    Found,
    found,
    holds_all,
    scan_bound,
    term_kind,
    text_grams,
)
from precis.stores.sql import SQLStore

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
# When no more than this many matches are expected in all the history left, it is read at once.
FEW_LEFT = 2
# The same text as an expression the recall index does not hold: a term none of its trigrams
# can find is checked on each row of the window instead of sending the index through them all.
_UNINDEXED_DOC = "(content || E'\\n' || calls_text || '')"
# Any character `recall.text_grams` indexes, as a PostgreSQL regular expression.
_GRAM_PATTERN = "[" + "".join(f"\\U{a:08X}-\\U{b:08X}" for a, b in IDEOGRAPHIC_RANGES) + "]"
# A long term is asked of the index by its rare trigrams only (`_index_pieces`); which are rare
# is counted in this many of the conversation's newest messages, read again once as many more
# have been appended, and kept for this many conversations (some 200 KB each).
SAMPLE = 128
SAMPLED_CONVERSATIONS = 32
# What pg_trgm makes trigrams of: runs of letters and digits; and, to count them in a sample
# quickly, ASCII punctuation to spaces (other punctuation stays in words: an estimate only).
_TRGM_WORD = re.compile(r"[^\W_]+")
_ASCII_NON_WORD = {c: " " for c in range(128) if not chr(c).isalnum()}
# A piece of a term without letters: ASCII digits and punctuation.
_CASELESS = re.compile(r"[!-@\[-`{-~]+")

Connection = psycopg.Connection[tuple[Any, ...]]


@functools.lru_cache(maxsize=512)
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

    def __init__(self) -> None:
        super().__init__()
        self._samples = _Samples()

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
                [(text_grams(_doc_text(row[2], row[3])), row[0], row[1]) for row in rows],
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
            extras.append((calls, text_grams(_doc_text(m.content, calls)) or None))
        return extras

    def newest(
        self, db: Handle, conversation_id: str, phases: Sequence[Sequence[str]], n: int
    ) -> list[Found]:
        """Each phase's newest matches (`_newest`)."""
        return [hit for terms in phases for hit in self._newest(db, conversation_id, terms, n)]

    def _newest(
        self, db: Handle, conversation_id: str, terms: Sequence[str], n: int
    ) -> list[Found]:
        """Window by window back from the newest: one query each, every term an index condition
        together with the windows (a trigram ILIKE, a lookup in the grams column), so no query
        reads all the matches of a common term, nor walks the whole history for a rare one.
        Each read is sized from the rate of matches in those before it, to hold what is missing
        (asked by spans of 64 windows when it is long); once few matches are expected in all
        that is left, that is read at once.

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
        share = self._samples.share(db, conversation_id, last)
        asked: list[tuple[str, str]] = []
        checked = [_like_pattern(t) for t in scanned]
        for term in indexed:
            pieces = _index_pieces(term, share) if len(terms) == 1 else None
            if pieces is None:
                asked.append(("ILIKE", _like_pattern(term)))
            else:
                asked += _index_patterns(pieces)
                checked.append(_like_pattern(term))
        where = [f"{_DOC} {operator} ?" for operator, _ in asked]
        where += [f"{_UNINDEXED_DOC} ILIKE ?" for _ in checked]
        if grams:
            where.append("grams @> ?")
        select = "SELECT id, role, seq, content, calls_text FROM messages WHERE conversation_id = ?"
        rest = f" AND seq >= ? AND seq <= ? AND {' AND '.join(where)} ORDER BY seq"
        windowed = self.sql(f"{select} AND {_WINDOW} && ?{rest} DESC LIMIT ?")
        # `seq + 0`: an order the primary key cannot give, or the planner, which cannot know a
        # term is rare, may walk the history backwards through it checking every row.
        everything = self.sql(f"{select}{rest} + 0 DESC LIMIT ?")
        conditions = (*(pattern for _, pattern in asked), *checked, *([grams] if grams else []))
        floor = scan_bound(terms, last) + 1  # the oldest seq a match may have
        out: list[Found] = []
        high, wanted = last, FIRST_WINDOWS * WINDOW_ROWS
        window: tuple[Any, ...]
        while high >= floor and len(out) < n:
            rate = (len(out) + 1) / max(1, last - high)
            if rate * (high - floor + 1) <= FEW_LEFT * (n - len(out)) and high < last:
                # Few matches are left to find: all the rest at once, the terms narrowing it.
                low, query, window = floor, everything, ()
            else:
                low, keys = _windows(conversation_id, high, max(floor, high - wanted + 1))
                low, query, window = max(low, floor), windowed, (keys,)
            params = (conversation_id, *window, low, high, *conditions, n - len(out))
            for row in db.execute(query, params).fetchall():
                hit = found(str(row[0]), str(row[1]), int(row[2]), _doc_text(row[3], row[4]))
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


def _like_pattern(term: str) -> str:
    """An ILIKE pattern matching `term` anywhere, with its own %, _ and \\ taken literally."""
    return f"%{_like_escaped(term)}%"


def _like_escaped(text: str) -> str:
    """`text` in an ILIKE pattern, its %, _ and \\ taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _term_trigrams(term: str) -> dict[str, tuple[int, int]]:
    """What pg_trgm asks its index for `ILIKE '%term%'`, each with the piece of the term
    (start, end) that asks for it alone: trigrams, and short words whole.

    pg_trgm takes each run of letters and digits, lower-cased; where the term bounds a run with
    another character, it is padded as in the text (two spaces before, one after), so `module`
    in `%module%` asks for its four inner trigrams, and `.py` for `  p` and ` py`. A word of one
    or two characters the term bounds on the left is one key, padded so (`  17 ` for `_17.`:
    its trigrams `  1`, ` 17`, `17 ` together); alone, each is in a great many messages.
    """
    out: dict[str, tuple[int, int]] = {}
    for match in _TRGM_WORD.finditer(term):
        start, end = match.span()
        word = match.group()
        lower = word.lower()
        left = 2 if start > 0 else 0
        padded = " " * left + (lower if len(lower) == len(word) else word)
        padded += " " if end < len(term) else ""
        if left and len(word) < TRIGRAM_CHARS and len(padded) > TRIGRAM_CHARS:
            out.setdefault(padded, (start - 1, min(len(term), end + 1)))
            continue
        for i in range(len(padded) - 2):
            first = start - left + i  # where in the term the trigram's first character is
            out.setdefault(padded[i : i + 3], (max(first, start - 1), first + 3))
    return out


def _index_pieces(term: str, share: Callable[[str], float]) -> list[str] | None:
    """Pieces of a term, in its order, to ask the index for instead of the whole term; None for
    a term of MOST_TRIGRAMS trigrams or fewer, or a common one.

    Reading the index costs what the lists of the trigrams asked hold, all of them together, so
    a long term is asked by its rare ones (`share`: of recent messages holding the trigram): the
    rarest, then others rarer than RARE_SHARE, each adding two characters of the term the others
    do not cover (one, at the edge of a word), two at least, rare or not; at most MOST_TRIGRAMS.
    Their pieces are the parts of the term that ask for them (`src/billing/module_17.py` is
    asked as `billi` and `_17.`: `bil`, `lli`, and ` 17`, `17 ` with `  1`), so every row the
    term is in holds them; the rows they let through are checked for the term.
    """
    grams = _term_trigrams(term)
    if len(grams) <= MOST_TRIGRAMS:
        return None
    # ` bi` cannot be asked without `  b` (its piece `/bi` asks both): it costs what that does.
    shares = {gram: share(gram) for gram in grams}
    for gram in grams:
        if len(gram) == TRIGRAM_CHARS and gram[0] == " " and gram[1] != " ":
            shares[gram] = max(shares[gram], share(f"  {gram[1]}"))
    # On a tie, a trigram inside a word first: one at its edge brings the like of `  b` along.
    ranked = sorted(grams, key=lambda gram: (shares[gram], gram.count(" "), grams[gram]))
    if shares[ranked[0]] >= RARE_SHARE:
        return None  # a common term: the newest windows hold its matches, at little cost
    picked: list[tuple[int, int]] = []
    covered: set[int] = set()
    for gram in ranked:
        low, high = grams[gram]
        new = set(range(low, high)) - covered
        rare_enough = shares[gram] < RARE_SHARE or len(picked) < 2
        # A trigram at a word's edge tells where the word ends: one more character is enough.
        enough = len(new) >= (1 if " " in gram else 2)
        if len(picked) < MOST_TRIGRAMS and (not picked or (rare_enough and enough)):
            picked.append((low, high))
            covered |= new
    pieces: list[list[int]] = []
    for low, high in sorted(picked):
        if pieces and low <= pieces[-1][1]:  # overlapping or adjacent: one piece
            pieces[-1][1] = max(pieces[-1][1], high)
        else:
            pieces.append([low, high])
    if pieces == [[0, len(term)]]:
        return None
    return [term[low:high] for low, high in pieces]


def _index_patterns(pieces: Sequence[str]) -> list[tuple[str, str]]:
    """The conditions that ask the index for the pieces of a term, each (operator, pattern):
    those without letters through LIKE, first, which need not fold the text's case to check a
    row (no character folds to an ASCII digit or punctuation); the others through ILIKE."""
    caseless = [piece for piece in pieces if _CASELESS.fullmatch(piece)]
    cased = [piece for piece in pieces if not _CASELESS.fullmatch(piece)]
    return [
        (operator, "%" + "%".join(_like_escaped(piece) for piece in group) + "%")
        for operator, group in (("LIKE", caseless), ("ILIKE", cased))
        if group
    ]


# A sample: the last seq when it was read, how many messages it holds, how many of them hold
# each trigram and each word.
_Sample = tuple[int, int, dict[str, int], Counter[str]]


class _Samples:
    """For each conversation, how many of its newest SAMPLE messages hold each trigram and word;
    read again once SAMPLE more messages have been appended, kept for SAMPLED_CONVERSATIONS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, _Sample] = {}

    def share(self, db: Handle, conversation_id: str, last: int) -> Callable[[str], float]:
        """The share of the sample holding a key of `_term_trigrams`: a trigram; a short word
        padded on both sides (that word) or on the left (a word starting so). The sample is
        read when first needed."""
        entry: _Sample | None = None

        def share(key: str) -> float:
            nonlocal entry
            if entry is None:
                entry = self._sample(db, conversation_id, last)
            _, size, grams, words = entry
            if not size:
                return 0.0
            if len(key) == TRIGRAM_CHARS:
                return grams.get(key, 0) / size
            word = key.strip()
            if key.endswith(" "):
                return words[word] / size
            return sum(n for held, n in words.items() if held.startswith(word)) / size

        return share

    def _sample(self, db: Handle, conversation_id: str, last: int) -> _Sample:
        with self._lock:
            entry = self._counts.get(conversation_id)
        if entry is not None and entry[0] <= last < entry[0] + SAMPLE:
            return entry
        rows = db.execute(
            _pyformat(
                "SELECT content, calls_text FROM messages WHERE conversation_id = ? "
                "ORDER BY seq DESC LIMIT ?"
            ),
            (conversation_id, SAMPLE),
        ).fetchall()
        # Messages holding each word, then each trigram of those: a message holding a trigram
        # in two words counts twice, which ranks trigrams all the same and costs a tenth.
        words: Counter[str] = Counter()
        for row in rows:
            text = _doc_text(row[0], row[1]).lower().translate(_ASCII_NON_WORD)
            words.update(set(text.split()))
        counts: dict[str, int] = {}
        for word, held in words.items():
            padded = f"  {word} "
            for i in range(len(padded) - 2):
                gram = padded[i : i + 3]
                counts[gram] = counts.get(gram, 0) + held
        entry = (last, len(rows), counts, words)
        with self._lock:
            self._counts.pop(conversation_id, None)
            while len(self._counts) >= SAMPLED_CONVERSATIONS:
                self._counts.pop(next(iter(self._counts)))
            self._counts[conversation_id] = entry
        return entry


def _doc_text(content: str, calls_text: str) -> str:
    """base.search_text rebuilt from the stored columns, for snippets."""
    if not calls_text:
        return content
    return f"{content}\n{calls_text}" if content else calls_text


# The context read, and the migration steps schema_version counts, as PostgreSQL runs them.
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


class PostgresStore(SQLStore):
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
        """Point a new pooled connection at this store's schema, and have every statement
        planned for its own parameters: psycopg prepares a statement run five times, and a
        generic plan cannot know how rare a recall term or how wide a window is."""
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        conn.execute("SET plan_cache_mode = force_custom_plan")

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
        except (psycopg.Error, ValueError) as exc:
            raise StoreError(f"cannot open {self._where}: {exc}") from exc

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Handle]:
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

    def close(self) -> None:
        """Close the pool; later calls raise StoreError."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
