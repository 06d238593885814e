"""What recall means, written once for every store: which messages a query finds, and their order.

A query is whitespace-separated terms; a message matches a term when its search text
(`base.search_text`) holds the term, case-folded. Recall does not score every match of a common
word: it takes the newest `CANDIDATES` messages matching all the terms and, when fewer than the
limit match them all, the newest `CANDIDATES` matching each term; it ranks those by
`base.term_score` (distinct terms present, then how often), newer first on a tie, and returns the
best `limit`. So the cost of a query is bounded at any history length, and the newest relevant
messages come first.

How a store finds the newest matches of a term depends on the term (`term_kind`): one with three
alphanumeric characters in a row through a trigram index (FTS5 on SQLite, pg_trgm on
PostgreSQL); one or two characters of a script written without spaces (kana, CJK ideographs,
Hangul: `端口`, `端`), which no trigram index can answer, through an index of each such run's
characters and adjacent pairs (a column of `text_grams` on PostgreSQL; on SQLite the trigram
index itself, given `spaced_runs`); anything else (`--`, `C#`, `db-7`) by reading the newest
messages, at most SCAN_MESSAGES of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, NamedTuple

from precis.stores.base import RecallHit, folded_term_score, snippet

__all__ = [
    "CANDIDATES",
    "IDEOGRAPHIC_RANGES",
    "MOST_TRIGRAMS",
    "RARE_SHARE",
    "SCAN_MESSAGES",
    "TRIGRAM_CHARS",
    "Found",
    "TermKind",
    "found",
    "holds_all",
    "rank",
    "recall",
    "scan_bound",
    "spaced_gram",
    "spaced_runs",
    "term_kind",
    "text_grams",
    "trigrams",
]

# How many of the newest matches of each term, and of all terms together, recall ranks.
CANDIDATES = 100
# Terms with this many alphanumeric characters in a row are found through a trigram index.
TRIGRAM_CHARS = 3
# A term no index answers (`--`, `C#`, `db-7`) is looked for among this many of a conversation's
# newest messages only: reading every message for it would cost seconds at a million.
SCAN_MESSAGES = 10_000
# A longer term is looked up by at most this many of its trigrams (one per term of a query of
# several), those held by fewer than this share of recent messages (see `trigrams`).
MOST_TRIGRAMS = 4
RARE_SHARE = 0.25

# Scripts written without spaces between words, as (first, last) code points: kana, CJK
# ideographs with extension A, the unified ones, Hangul syllables, compatibility ideographs, and
# the ideographs of the supplementary planes.
IDEOGRAPHIC_RANGES = (
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x3134F),
)
_CLASS = "".join(f"{chr(first)}-{chr(last)}" for first, last in IDEOGRAPHIC_RANGES)
_RUN = re.compile(f"[{_CLASS}]+")
_ALL_IDEOGRAPHIC = re.compile(f"[{_CLASS}]{{1,2}}")
# What a trigram index can look a term up by (pg_trgm keeps only the alphanumeric runs).
_ALNUM_RUN = re.compile(rf"[^\W_]{{{TRIGRAM_CHARS}}}")

TermKind = Literal["trigram", "gram", "scan"]


class Found(NamedTuple):
    """One message a store found: what a hit shows, and its search text (also case-folded)."""

    id: str
    role: str
    seq: int
    text: str
    folded: str


def found(message_id: str, role: str, seq: int, text: str) -> Found:
    """A `Found` of a message's search text."""
    return Found(message_id, role, seq, text, text.casefold())


def term_kind(term: str) -> TermKind:
    """Which index finds a term: the trigram one (three alphanumeric characters in a row), the
    gram one (one or two ideographic characters), or none (a scan of the newest messages)."""
    if _ALNUM_RUN.search(term):
        return "trigram"
    if _ALL_IDEOGRAPHIC.fullmatch(term):
        return "gram"
    return "scan"


def scan_bound(terms: Sequence[str], last_seq: int) -> int:
    """The seq a phase's matches must be above: 0, or for a phase with a term no index answers,
    all but the newest SCAN_MESSAGES."""
    if any(term_kind(term) == "scan" for term in terms):
        return max(0, last_seq - SCAN_MESSAGES)
    return 0


def text_grams(text: str) -> list[str]:
    """What the gram index holds of a text: each character of a run of kana, CJK ideographs or
    Hangul, and each adjacent pair in such a run; distinct, sorted. Empty for most English."""
    grams: set[str] = set()
    for match in _RUN.finditer(text):
        run = match.group()
        grams.update(run)
        grams.update(run[i : i + 2] for i in range(len(run) - 1))
    return sorted(grams)


def spaced_runs(text: str) -> str:
    """What a trigram index is given besides a text so that it answers gram terms too: each run of
    kana, CJK ideographs or Hangul again, its characters spaced, on a line of its own. Its
    trigrams are then exactly the run's characters (` 端 `) and adjacent pairs (`端 口`)."""
    runs = dict.fromkeys(match.group() for match in _RUN.finditer(text))
    return "".join(f"\n {' '.join(run)} " for run in runs)


def spaced_gram(term: str) -> str:
    """The trigram `spaced_runs` gives a gram term (one or two ideographic characters)."""
    return f" {term} " if len(term) == 1 else " ".join(term)


def trigrams(term: str, share: Callable[[str], float], most: int = MOST_TRIGRAMS) -> list[str]:
    """The trigrams to look a term up by (each row found is checked against the term after).

    Walking an index newest first costs what the lists of the trigrams asked hold, so a term is
    asked by its rare ones (`share`: of recent messages holding the trigram, case-folded), each
    adding at least two characters of the term the others do not cover, so that no part of it
    is left to the check alone: `src/auth/module_391.py` is asked by `_39`, `91.`, `c/a` and
    `aut`, not by `src`, `mod` and `.py`. All of a term of fewer than `most` trigrams; else at
    most `most`: the rarest, then others rarer than RARE_SHARE; two at least (unless `most` is
    one), rare or not.
    """
    starts: dict[str, int] = {}
    for i in range(len(term) - TRIGRAM_CHARS + 1):
        starts.setdefault(term[i : i + TRIGRAM_CHARS], i)
    if len(starts) < most:
        return sorted(starts)
    shares = {gram: share(gram.casefold()) for gram in starts}
    ranked = sorted(starts, key=lambda gram: (shares[gram], starts[gram]))
    picked: list[str] = []
    covered: set[int] = set()
    for gram in ranked:
        new = set(range(starts[gram], starts[gram] + TRIGRAM_CHARS)) - covered
        rare_enough = shares[gram] < RARE_SHARE or len(picked) < min(2, most)
        if len(picked) < most and (not picked or (rare_enough and len(new) >= 2)):
            picked.append(gram)
            covered |= new
    return sorted(picked)


def recall(
    newest: Callable[[list[list[str]]], list[Found]], terms: Sequence[str], limit: int
) -> list[RecallHit]:
    """Recall through a store's `newest(phases)` (each phase a list of terms; for each, the newest
    CANDIDATES messages holding all of them): the newest matches of all the terms together and,
    when fewer than `limit` hold them all, of each term too. Those could change nothing when
    `limit` messages hold every term: a message holding every term outranks one holding fewer."""
    found = newest([list(terms)])
    if len(terms) > 1 and len(found) < limit:
        found += newest([[term] for term in terms])
    return rank(found, terms, limit)


def holds_all(hit: Found, terms: Sequence[str]) -> bool:
    """Whether a message holds every term, case-folded (what an index lookup is checked with)."""
    return all(term.casefold() in hit.folded for term in terms)


def rank(found: Iterable[Found], terms: Sequence[str], limit: int) -> list[RecallHit]:
    """The best `limit` of the messages found: by term_score, then the newest first."""
    folded_terms = [term.casefold() for term in terms]
    scored: dict[int, tuple[float, Found]] = {}
    for hit in found:
        if hit.seq not in scored:
            scored[hit.seq] = (folded_term_score(hit.folded, folded_terms), hit)
    best = sorted(
        (pair for pair in scored.values() if pair[0] > 0), key=lambda p: (-p[0], -p[1].seq)
    )
    return [
        RecallHit(hit.id, hit.role, hit.seq, snippet(hit.text, terms), score)
        for score, hit in best[:limit]
    ]
