"""Named schema migrations for the SQL stores, in the manner of simonw/llm's migrations.py.

Each migration is a function `mNNN_what(db, dialect)`, registered in order with `@migration`,
applied once and recorded by its name in the `migrations` table. Each is written once: where
SQLite and PostgreSQL differ, the dialect supplies the difference (a column type, the FTS5 index
or the tsvector and trigram ones). Append new migrations at the end; never rename one.

precis before named migrations recorded only a count, in `schema_version`, and the two backends
counted different steps; `Dialect.legacy_steps` says which names each counted step stood for.
`schema_version` is still kept (see `counted_steps`), so that an older precis, which reads only
the count, opens a database this one migrated and refuses one that a later migration changed.
"""

from __future__ import annotations

from collections.abc import Callable

from precis.core.errors import StoreError
from precis.stores.base import utc_now
from precis.stores.dialect import Dialect, Handle
from precis.stores.rows import SAMPLE_COLUMNS

__all__ = ["MIGRATIONS", "bind", "counted_steps", "migrate", "migration", "pending_migrations"]

Migration = Callable[[Handle, Dialect], None]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register `fn` as the next migration; its name is what a database records."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_core(db: Handle, d: Dialect) -> None:
    """Conversations, the immutable message log, the positions table and the event log."""
    db.execute(
        f"""CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        version {d.int_type} NOT NULL DEFAULT 0,
        next_seq {d.int_type} NOT NULL DEFAULT 1,
        next_position {d.int_type} NOT NULL DEFAULT 0,
        system_prompt TEXT NOT NULL DEFAULT '',
        prompt_stale {d.bool_type} NOT NULL DEFAULT {d.false},
        created_at TEXT NOT NULL
    ){d.clustered}"""
    )
    db.execute(
        f"""CREATE TABLE messages ({d.message_row_key}
        conversation_id TEXT NOT NULL{d.conversation_ref},
        seq {d.int_type} NOT NULL,
        id TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_calls TEXT NOT NULL DEFAULT '[]',{d.message_search_columns}
        tool_call_id TEXT,
        kind TEXT NOT NULL,
        pinned {d.bool_type} NOT NULL DEFAULT {d.false},
        metadata TEXT NOT NULL DEFAULT '{{}}',
        created_at TEXT NOT NULL,
        reasoning TEXT NOT NULL DEFAULT '',
        images INTEGER NOT NULL DEFAULT 0,
        openai_extra TEXT NOT NULL DEFAULT '{{}}',
        {d.seq_key} (conversation_id, seq),
        UNIQUE (conversation_id, id)
    )"""
    )
    for statement in d.immutable_messages:
        db.execute(statement)
    db.execute(
        f"""CREATE TABLE in_context (
        conversation_id TEXT NOT NULL,
        position {d.int_type} NOT NULL,
        message_id TEXT NOT NULL,
        PRIMARY KEY (conversation_id, position)
    ){d.clustered}"""
    )
    db.execute(
        f"""CREATE TABLE events (
        row_id {d.identity},
        conversation_id TEXT NOT NULL,
        trigger TEXT NOT NULL,
        mode TEXT NOT NULL,
        stats TEXT NOT NULL,
        summary_id TEXT NOT NULL,
        at TEXT NOT NULL
    )"""
    )
    db.execute("CREATE INDEX events_by_conversation ON events (conversation_id, row_id)")


@migration
def m002_recall(db: Handle, d: Dialect) -> None:
    """The recall index: FTS5 on SQLite, a tsvector column and a trigram index on PostgreSQL."""
    d.create_recall_index(db)


@migration
def m003_pins(db: Handle, d: Dialect) -> None:
    """Pin flags set after append, an overlay because message rows never change."""
    db.execute(
        f"""CREATE TABLE pins (
        conversation_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        pinned {d.bool_type} NOT NULL,
        PRIMARY KEY (conversation_id, message_id)
    ){d.clustered}"""
    )


@migration
def m004_bounded_recall(db: Handle, d: Dialect) -> None:
    """Costs that do not grow with the history: the recall index `Dialect.newest` walks newest
    first (stores/recall.py), and the indexes that let an append read only the context's last
    turn and its pinned messages (`SQLStore.tail`)."""
    d.create_bounded_recall(db)
    db.execute("CREATE INDEX messages_pinned ON messages (conversation_id, seq) WHERE pinned")
    db.execute("CREATE INDEX in_context_by_message ON in_context (conversation_id, message_id)")


@migration
def m005_samples(db: Handle, d: Dialect) -> None:
    """One row per turn: the window's composition by kind, for the inspector's chart."""
    tokens = ",\n        ".join(f"{column} {d.int_type} NOT NULL" for column in SAMPLE_COLUMNS)
    db.execute(
        f"""CREATE TABLE samples (
        conversation_id TEXT NOT NULL,
        turn {d.int_type} NOT NULL,
        kind TEXT NOT NULL,
        at TEXT NOT NULL,
        version {d.int_type} NOT NULL,
        in_context {d.int_type} NOT NULL,
        context_window {d.int_type},
        {tokens},
        PRIMARY KEY (conversation_id, turn)
    ){d.clustered}"""
    )


@migration
def m006_compaction_count(db: Handle, d: Dialect) -> None:
    """Pins move the context version too (a compaction planned before a pin must not commit),
    so what compactions alone have done is counted apart: the context is the in_context list
    once there was one, and a sample records how many came before it."""
    db.execute(f"ALTER TABLE conversations ADD COLUMN compactions {d.int_type} NOT NULL DEFAULT 0")
    db.execute("UPDATE conversations SET compactions = version")


@migration
def m007_idempotency_keys(db: Handle, d: Dialect) -> None:
    """Each append's idempotency key, per conversation: what it stored, so a retry of it is
    answered with those messages instead of storing them twice."""
    db.execute(
        f"""CREATE TABLE idempotency_keys (
        conversation_id TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        message_ids TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (conversation_id, key)
    ){d.clustered}"""
    )


def counted_steps(dialect: Dialect) -> list[tuple[str, ...]]:
    """What each `schema_version` row stands for on this dialect, in order.

    The steps the count-based precis counted (`Dialect.legacy_steps`), then one per migration
    added since. So a database this precis migrated keeps the count an older precis expects, and
    that precis goes on opening it until a new migration really changes the schema.
    """
    legacy = {name for step in dialect.legacy_steps for name in step}
    later = [(fn.__name__,) for fn in MIGRATIONS if fn.__name__ not in legacy]
    return [*dialect.legacy_steps, *later]


def bind(dialect: Dialect) -> tuple[Callable[[Handle], None], ...]:
    """The counted steps as one-argument functions over this dialect (for tools and tests)."""
    by_name = {fn.__name__: fn for fn in MIGRATIONS}

    def step(names: tuple[str, ...]) -> Callable[[Handle], None]:
        def apply(db: Handle) -> None:
            for name in names:
                by_name[name](db, dialect)

        apply.__name__ = apply.__qualname__ = "+".join(names)
        return apply

    return tuple(step(names) for names in counted_steps(dialect))


def pending_migrations(db: Handle, dialect: Dialect, tables: set[str]) -> list[str]:
    """The migrations a database with these tables lacks, found without writing (read-only)."""
    names = [fn.__name__ for fn in MIGRATIONS]
    if "migrations" in tables:
        applied = {str(row[0]) for row in db.execute("SELECT name FROM migrations").fetchall()}
    elif "schema_version" in tables:
        newest = db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
        applied = {n for step in counted_steps(dialect)[: int(newest)] for n in step}
    else:
        applied = set()
    return [name for name in names if name not in applied]


def migrate(db: Handle, dialect: Dialect, where: str) -> list[str]:
    """Apply the migrations this database lacks, in order, inside the caller's transaction.

    Returns the names applied now. A database that records a migration this precis does not
    know, or a count beyond it, was written by a newer precis: StoreError, and nothing changes.
    """
    q = dialect.sql
    names = [fn.__name__ for fn in MIGRATIONS]
    steps = counted_steps(dialect)
    db.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    counted = {
        int(row[0]): str(row[1])
        for row in db.execute("SELECT version, applied_at FROM schema_version").fetchall()
    }
    applied = {str(row[0]) for row in db.execute("SELECT name FROM migrations").fetchall()}
    newest = max(counted, default=0)
    unknown = sorted(applied - set(names))
    if newest > len(steps) or unknown:
        found = f"migration {unknown[0]!r}" if unknown else f"schema version {newest}"
        raise StoreError(
            f"{where}: {found} is newer than this precis knows ({len(steps)} steps, "
            f"migrations up to {names[-1]}); upgrade precis"
        )
    record = q("INSERT INTO migrations (name, applied_at) VALUES (?, ?)")
    if not applied:
        # Recorded by count only (or new): name what each counted step applied, keeping its time.
        for number, step_names in enumerate(steps[:newest], start=1):
            for name in step_names:
                db.execute(record, (name, counted.get(number, utc_now())))
                applied.add(name)
    done: list[str] = []
    for fn in MIGRATIONS:
        if fn.__name__ not in applied:
            fn(db, dialect)
            db.execute(record, (fn.__name__, utc_now()))
            applied.add(fn.__name__)
            done.append(fn.__name__)
    # Every step is complete now: count the ones the database has not counted yet.
    for number in range(1, len(steps) + 1):
        if number not in counted:
            db.execute(
                q("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)"),
                (number, utc_now()),
            )
    return done
