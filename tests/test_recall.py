"""What recall means (stores/recall.py), and that every store means the same by it.

The rules are checked as plain functions; then the same conversations go into a MemoryStore, a
SQLite file and a PostgreSQL schema, and every query must come back the same from all three,
including where the bounds bite: a common word's older matches, a term no index answers.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from precis.core.messages import Message, ToolCall
from precis.stores import ConversationStore, MemoryStore, SQLiteStore, recall
from precis.stores.base import RecallHit
from precis.stores.recall import (
    CANDIDATES,
    found,
    rank,
    term_kind,
    text_grams,
    trigrams,
)
from precis.stores.scoring import MAX_OCCURRENCE_BONUS, term_score

CID = "c"


@pytest.fixture
def store(any_store: ConversationStore) -> ConversationStore:
    return any_store


def user(text: str) -> Message:
    return Message(role="user", content=text)


def seqs(hits: list[RecallHit]) -> list[int]:
    return [h.seq for h in hits]


# --- the rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("term", "kind"),
    [
        ("error", "trigram"),
        ("5433", "trigram"),
        ("tenant_id", "trigram"),
        ("数据库", "trigram"),
        ("(loudly)", "trigram"),
        ("端口", "gram"),
        ("端", "gram"),
        ("ポート", "trigram"),
        ("ポ", "gram"),
        ("포트", "gram"),
        ("db", "scan"),
        ("--", "scan"),
        ("C#", "scan"),
        ("db-7", "scan"),
        ("a*b", "scan"),
        ("端x", "scan"),
    ],
)
def test_term_kinds(term: str, kind: str) -> None:
    assert term_kind(term) == kind


def test_text_grams_are_the_characters_and_pairs_of_each_run() -> None:
    assert text_grams("plain English, no grams") == []
    assert text_grams("端口是 5433，数据") == sorted(
        ["端", "口", "是", "端口", "口是", "数", "据", "数据"]
    )
    assert text_grams("ポート8080") == sorted(["ポ", "ー", "ト", "ポー", "ート"])


def test_a_long_term_is_looked_up_by_its_rare_trigrams() -> None:
    shares = {"/bi": 0.12, "lli": 0.12, "_17": 0.02, "e_1": 0.05, "17.": 0.02, "odu": 0.3}

    def share(gram: str) -> float:
        return shares.get(gram, 0.9)

    term = "src/billing/module_17.py"
    # The rare ones, each adding two characters the others do not cover.
    assert trigrams(term, share) == ["/bi", "_17", "lli"]
    assert trigrams(term, share, most=1) == ["_17"]  # one term of several: its rarest
    assert trigrams(term, lambda gram: 0.5) == ["c/b", "src"]  # none rare: two of them
    assert trigrams("error", share) == ["err", "ror", "rro"]  # a short term: all of them
    assert trigrams("lock", share, most=1) == ["loc"]
    assert trigrams("abc", share, most=1) == ["abc"]
    for most in (1, 2, 4):
        assert all(gram in term for gram in trigrams(term, share, most))


def test_more_distinct_terms_always_rank_first() -> None:
    flood = "port " * 30_000  # occurrences alone would pass one more term's worth
    assert term_score(flood, ["port", "5433"]) < term_score("port 5433", ["port", "5433"])
    assert term_score(flood, ["port"]) == 1 + MAX_OCCURRENCE_BONUS
    hits = [
        found("a", "user", 1, "port 5433"),
        found("b", "user", 2, "port 5433"),
        found("c", "user", 3, flood),
        found("b", "user", 2, "port 5433"),  # found twice (two phases): counted once
        found("d", "user", 4, "nothing"),
    ]
    assert seqs(rank(hits, ["port", "5433"], 10)) == [2, 1, 3]  # ties: the newer first


# --- the same on every store ------------------------------------------------------------------

WORDS = ["port", "error", "database", "connection", "cache", "deploy", "rollback", "worker"]
CJK = ["端口", "数据库", "错误", "连接", "缓存"]


def conversation(size: int, seed: int = 7) -> list[Message]:
    """Messages of a few words each (some Chinese, some with tool calls), old ones wordier."""
    rng = random.Random(seed)
    out: list[Message] = []
    for i in range(size):
        words = rng.choices(WORDS, k=rng.randint(1, 6 if i < size // 2 else 3))
        if rng.random() < 0.3:
            words.append(rng.choice(CJK) + rng.choice(CJK))
        if rng.random() < 0.1:
            words.append(rng.choice(["5433", "C#", "--", "db-7"]))
        text = " ".join(words)
        if rng.random() < 0.15:
            call = ToolCall(f"call_{i}", "grep_repository", f'{{"pattern": "{rng.choice(WORDS)}"}}')
            out.append(Message(role="assistant", content=text, tool_calls=(call,)))
        else:
            out.append(user(text))
    return out


QUERIES = [
    "error",
    "ERROR",
    "端口",
    "端",
    "数据库",
    "database connection",
    "port 5433",
    "端口 error",
    "grep_repository",
    "C#",
    "--",
    "db-7",
    "cache --",
    "rollback worker deploy",
    "nowhere",
]


def answers(store: ConversationStore, limit: int) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for query in QUERIES:
        hits = store.recall(CID, query, limit)
        out[query] = [(h.id, h.seq, h.snippet, round(h.score, 9)) for h in hits]
    return out


def test_every_store_recalls_alike(
    store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall, "SCAN_MESSAGES", 150)  # so the scan bound bites here too
    messages = conversation(3 * CANDIDATES + 300)
    store.append(CID, messages)
    reference = MemoryStore()
    reference.append(CID, store.history(CID))
    for limit in (10, 3):
        assert answers(store, limit) == answers(reference, limit)
    # The bounds did bite: some query had more matches than it ranked.
    assert sum("error" in m.content for m in messages) > CANDIDATES


def test_recall_ranks_the_newest_matches_of_a_common_word(store: ConversationStore) -> None:
    (old,) = store.append(CID, [user("error " * 20)])  # the most occurrences, but oldest
    store.append(CID, [user(f"error number {i}") for i in range(CANDIDATES)])
    (doubled,) = store.append(CID, [user("error and error again")])
    hits = store.recall(CID, "error", limit=5)
    assert hits[0].id == doubled.id
    assert old.id not in [h.id for h in hits]
    assert seqs(hits[1:]) == [101, 100, 99, 98]


def test_recall_finds_an_old_message_holding_every_term(store: ConversationStore) -> None:
    (both,) = store.append(CID, [user("the database connection dropped")])
    store.append(CID, [user(f"database {i}") for i in range(CANDIDATES)])
    store.append(CID, [user(f"connection {i}") for i in range(CANDIDATES)])
    hits = store.recall(CID, "database connection", limit=3)
    assert hits[0].id == both.id and hits[0].score > 2
    assert seqs(hits[1:]) == [2 * CANDIDATES + 1, 2 * CANDIDATES]


def test_a_term_no_index_answers_is_looked_for_among_the_newest(
    store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall, "SCAN_MESSAGES", 20)
    (old,) = store.append(CID, [user("a C# question")])
    store.append(CID, [user(f"filler {i}") for i in range(30)])
    (new,) = store.append(CID, [user("another C# question")])
    assert [h.id for h in store.recall(CID, "C#")] == [new.id]
    assert [h.id for h in store.recall(CID, "question")] == [new.id, old.id]


# --- what it costs ----------------------------------------------------------------------------


def _steps(db: sqlite3.Connection, action: Callable[[], object]) -> int:
    """VDBE instructions an action runs on this connection: a cost no machine load skews."""
    counter = [0]

    def tick() -> int:
        counter[0] += 1
        return 0

    db.set_progress_handler(tick, 1)
    try:
        action()
    finally:
        db.set_progress_handler(None, 1)
    return counter[0]


def test_sqlite_recall_costs_the_same_at_any_length(tmp_path: Path) -> None:
    """Recall reads the index newest first and stops: the rows it visits do not grow with the
    history (FTS5's own work is not counted here; bench/store.py times it)."""
    queries = ["error", "端口", "database connection", "grep_repository"]
    steps: dict[int, dict[str, int]] = {}
    for size in (2_000, 20_000):
        with SQLiteStore(tmp_path / f"h{size}.db") as s:
            s.append("noise", conversation(300, seed=1))
            for start in range(0, size, 2_000):
                s.append(CID, conversation(2_000, seed=start))
            db = s._connection()
            steps[size] = {q: _steps(db, lambda q=q, s=s: s.recall(CID, q)) for q in queries}
    for query in queries:
        assert steps[20_000][query] <= steps[2_000][query] * 1.25, (query, steps)


def test_postgres_reads_windows_then_spans_then_the_rest(postgres_url: str, pg_schema: str) -> None:
    """Past a span of history (16,384 messages) PostgreSQL asks for spans, and for all the rest
    at once when few matches are left: the answers stay those of a MemoryStore."""
    from precis.stores.postgres import SPAN_ROWS, PostgresStore

    rng = random.Random(3)
    messages = []
    for i in range(SPAN_ROWS + 6_000):
        words = [rng.choice(WORDS) for _ in range(2)]
        if i % 1_500 == 7:
            words.append("needle")  # rare: spans, then the rest at once
        if i % 60 == 0:
            words.append("thread")  # one message in sixty: windows, then spans
        if i in (5, 20_000):
            words.append("端口 unique-marker")
        messages.append(user(" ".join(words)))
    with PostgresStore(postgres_url, schema=pg_schema, max_size=2) as store:
        store.append(CID, messages)
        reference = MemoryStore()
        reference.append(CID, store.history(CID))
        for query in ("needle", "thread", "unique-marker", "端口", "needle thread", "cache"):
            got = [(h.id, h.score) for h in store.recall(CID, query, 10)]
            assert got == [(h.id, h.score) for h in reference.recall(CID, query, 10)], query
        assert len(store.recall(CID, "needle", 100)) == sum("needle" in m.content for m in messages)


def test_postgres_asks_the_index_for_the_rare_pieces_of_a_long_term() -> None:
    """pg_trgm's keys of a term, and the pieces of it a long term is asked by (no database)."""
    from precis.stores.pg_terms import index_patterns as _index_patterns
    from precis.stores.pg_terms import index_pieces as _index_pieces
    from precis.stores.pg_terms import rarest_piece as _rarest_piece
    from precis.stores.pg_terms import term_trigrams as _term_trigrams

    term = "src/billing/module_17.py"
    keys = _term_trigrams(term)
    # Inner trigrams by themselves; a word's edge with the character bounding it; `17` whole.
    assert keys["bil"] == (4, 7) and keys[" bi"] == (3, 6) and keys["le "] == (16, 19)
    assert keys["  17 "] == (18, 22) and " 17" not in keys
    assert keys["  py"] == (21, 24)  # a word starting so: the term ends there, the word need not
    rare = {"  17 ": 0.0, "bil": 0.05, "ill": 0.05, "lli": 0.05, "lin": 0.05, "  b": 0.9}

    def share(key: str) -> float:
        return rare.get(key, 0.6)

    pieces = _index_pieces(term, share)
    assert pieces == ["billi", "_17."]  # bil, lli (ill, lin add a character only), the word 17
    assert _index_patterns(pieces) == [("LIKE", "%\\_17.%"), ("ILIKE", "%billi%")]
    assert _index_pieces(term, lambda key: 0.5) is None  # nothing rare: the whole term
    assert _index_pieces("error", lambda key: 0.0) is None  # a short term: all of it
    assert _index_patterns(["100%", "a_b\\c"]) == [("LIKE", "%100\\%%"), ("ILIKE", "%a\\_b\\\\c%")]
    assert _rarest_piece(term, share) == "_17."  # the word 17 whole, the rarest key
    assert _rarest_piece(term, lambda key: 0.0 if key == "lli" else 0.5) == "lli"
    assert _rarest_piece("lock", lambda key: 0.5) == "loc"  # a tie: the first
    assert _rarest_piece("to", lambda key: 0.5) == "to"  # no key but the term whole
    for share_of in (share, lambda key: 0.0, lambda key: len(key) / 10):
        found = _index_pieces(term, share_of) or [term]
        assert 1 <= len(found) <= 4
        at = 0
        for piece in found:  # pieces of the term, in its order
            at = term.index(piece, at) + len(piece)


def test_postgres_recalls_a_long_term_by_its_pieces_alike(
    postgres_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows holding the pieces but not the term, the term in other cases, LIKE's own characters
    in it: PostgreSQL asking by pieces answers as a MemoryStore does."""
    from precis.stores import postgres
    from precis.stores.postgres import PostgresStore

    asked: list[list[str]] = []
    index_patterns = postgres.index_patterns

    def spy(pieces: list[str]) -> list[tuple[str, str]]:
        asked.append(list(pieces))
        return index_patterns(pieces)

    monkeypatch.setattr(postgres, "index_patterns", spy)
    rng = random.Random(5)
    decoys = [
        "src/billing/module_3.py beside src/auth/module_17.py",
        "billing 17 module src py",
        "src/billing/module_170.py",
        "src/billing/module_117.py and module_17.pyc",
        "a 100%_done\\x value",
    ]
    targets = [
        "see src/billing/module_17.py now",
        "SRC/Billing/Module_17.PY in capitals",
        "src/billing/module_17.pyc compiled, then a 100%_done\\xyz value",
    ]
    messages = []
    for i in range(1_500):
        words = rng.choices(["src", "module", "py", "the", "port", "cache"], k=4)
        if i % 37 == 5:
            words.append(rng.choice(targets))
        elif i % 11 == 3:
            words.append(rng.choice(decoys))
        messages.append(user(" ".join(words)))
    with PostgresStore(postgres_url, schema=pg_schema, max_size=2) as store:
        store.append(CID, messages)
        reference = MemoryStore()
        reference.append(CID, store.history(CID))
        queries = [
            "src/billing/module_17.py",
            "SRC/BILLING/MODULE_17.PY",
            "billing/module_17",
            "100%_done\\xyz",
            "src/billing/module_17.py module",
        ]
        for query in queries:
            for limit in (3, 10, 100):
                got = [(h.id, h.snippet, h.score) for h in store.recall(CID, query, limit)]
                want = [(h.id, h.snippet, h.score) for h in reference.recall(CID, query, limit)]
                assert got == want, (query, limit)
    # The long terms were asked by pieces: a part of `billing`, and the word 17 whole.
    assert any(len(p) == 2 and p[0] in "billing" and p[1] == "_17." for p in asked), asked


def _spied(
    store: Any, messages: list[Message], monkeypatch: pytest.MonkeyPatch
) -> tuple[MemoryStore, list[tuple[str, Any]]]:
    """The messages stored, a MemoryStore holding the same to compare answers with, and the
    statements (with their parameters) the PostgreSQL recall then reads a range of rows with."""
    from contextlib import contextmanager

    store.append(CID, messages)
    reference = MemoryStore()
    reference.append(CID, store.history(CID))
    reads: list[tuple[str, Any]] = []
    opened = store._transaction

    class Spy:
        def __init__(self, db: Any) -> None:
            self._db = db

        def execute(self, statement: str, params: Any = ()) -> Any:
            if "FROM messages WHERE" in statement and " >= " in statement:
                reads.append((statement, params))
            return self._db.execute(statement, params)

    @contextmanager
    def spied(*, write: bool) -> Any:
        with opened(write=write) as db:
            yield Spy(db)

    monkeypatch.setattr(store, "_transaction", spied)
    return reference, reads


def test_postgres_first_read_asks_the_index_only_for_terms_rare_together(
    postgres_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terms the newest messages never hold together are asked of the index from the first read
    (`seq + 0` keeps the primary key out); terms often together walk the first windows row by
    row, each row's text folded once for them all. Either way the answers are a MemoryStore's."""
    from precis.stores.postgres import PostgresStore

    messages = []
    for i in range(1_200):
        words = ["alpha" if i % 2 else "omega", "Beta GAMMA" if i % 5 == 0 else "beta gamma"]
        if i in (40, 41):
            words.append("alpha omega")  # the only messages holding both, long ago
        if i % 3 == 0:
            words.append(f"build-{i % 4}000")
        messages.append(user(" ".join(words)))
    with PostgresStore(postgres_url, schema=pg_schema, max_size=2) as store:
        reference, reads = _spied(store, messages, monkeypatch)
        for query, through_index in (
            ("alpha omega", True),
            ("beta gamma", False),
            ("Gamma", False),  # one term, in every message: walked whatever the planner says
            ("beta GAMMA 000", False),
        ):
            reads.clear()
            got = [(h.id, h.score) for h in store.recall(CID, query, 10)]
            assert got == [(h.id, h.score) for h in reference.recall(CID, query, 10)], query
            first = reads[0][0]
            assert ("seq + 0 >=" in first) is through_index, (query, first)
            # Row by row, each row's text is folded once for all the terms.
            assert ("LIKE ALL" in first) is not through_index, (query, first)
        # A term without letters is looked for as it is, its text not folded.
        assert "calls_text || '') LIKE %s" in reads[0][0], reads[0]


def test_postgres_asks_the_rest_of_the_history_by_each_terms_rarest_key(
    postgres_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terms of several read all the rest at once by each term's rarest key only, the whole
    term checked on each row (rows holding a key but not the term, the term in other cases):
    the answers are a MemoryStore's."""
    from precis.stores.postgres import PostgresStore

    rng = random.Random(11)
    messages = []
    for i in range(1_500):
        words = rng.choices(["migration", "lock", "unlock", "block", "the", "port"], k=3)
        if i in (30, 31, 400):
            words.append(rng.choice(["MIGRATION 迁移", "迁移 migration"]))
        elif i % 97 == 5:
            words.append("迁移 mig clock")  # the rarest keys, not the terms
        messages.append(user(" ".join(words)))
    with PostgresStore(postgres_url, schema=pg_schema, max_size=2) as store:
        reference, reads = _spied(store, messages, monkeypatch)
        for query in ("MIGRATION lock", "migration 迁移", "lock MIGRATION 迁移"):
            for limit in (2, 10):
                reads.clear()
                got = [(h.id, h.snippet, h.score) for h in store.recall(CID, query, limit)]
                want = [(h.id, h.snippet, h.score) for h in reference.recall(CID, query, limit)]
                assert got == want, (query, limit)
        # The last read of `lock MIGRATION 迁移`'s phase of all: the rest, by one key of each.
        rest = [(st, ps) for st, ps in reads if "&&" not in st and "%lock%" in ps]
        assert rest, reads
        statement, params = rest[0]
        asked = [p for p in params if isinstance(p, str) and p.startswith("%")]
        assert "%migration%" in [p.lower() for p in asked] and "%lock%" in asked
        assert any(len(p) == 5 for p in asked), asked  # a key of three characters
        assert "calls_text || '') ILIKE" in statement  # the whole terms, checked on each row
