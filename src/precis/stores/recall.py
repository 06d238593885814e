"""What recall means, written once for every store: which messages a query finds, and their order.

A query is whitespace-separated terms; a message matches a term when its search text
(`base.search_text`) holds the term, case-folded. Recall does not score every match of a common
word: it takes the newest `CANDIDATES` messages matching each term and, for a query of several
terms, the newest `CANDIDATES` matching all of them; it ranks those by `base.term_score` (distinct
terms present, then how often), newer first on a tie, and returns the best `limit`. So the cost of
a query is bounded at any history length, and the newest relevant messages come first.

How a store finds the newest matches of a term depends on the term (`term_kind`): three or more
characters through a trigram index (FTS5 on SQLite, pg_trgm on PostgreSQL); one or two characters
of a script written without spaces (kana, CJK ideographs, Hangul: `端口`, `端`) through an index of
each such run's characters and adjacent pairs (`text_grams`), which no trigram index can answer;
anything else shorter (`--`, `C#`) by scanning the newest messages until enough match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from precis.stores.base import RecallHit, snippet, term_score

__all__ = [
    "CANDIDATES",
    "IDEOGRAPHIC_RANGES",
    "TRIGRAM_CHARS",
    "Found",
    "TermKind",
    "holds_all",
    "phases",
    "rank",
    "term_kind",
    "text_grams",
    "trigrams",
]

# How many of the newest matches of each term, and of all terms together, recall ranks.
CANDIDATES = 200
# Terms of at least this many characters are found through a trigram index.
TRIGRAM_CHARS = 3

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

TermKind = Literal["trigram", "gram", "scan"]

# One message found by a store: id, role, seq and its search text.
Found = tuple[str, str, int, str]


def term_kind(term: str) -> TermKind:
    """Which index finds a term: the trigram one, the gram one, or none (a scan)."""
    if len(term) >= TRIGRAM_CHARS:
        return "trigram"
    if _ALL_IDEOGRAPHIC.fullmatch(term):
        return "gram"
    return "scan"


def text_grams(text: str) -> list[str]:
    """What the gram index holds of a text: each character of a run of kana, CJK ideographs or
    Hangul, and each adjacent pair in such a run; distinct, sorted. Empty for most English."""
    grams: set[str] = set()
    for match in _RUN.finditer(text):
        run = match.group()
        grams.update(run)
        grams.update(run[i : i + 2] for i in range(len(run) - 1))
    return sorted(grams)


def trigrams(term: str) -> list[str]:
    """Trigrams of a term that every text holding it also holds: one every three characters and
    the last, so a long identifier needs few index lookups (the candidates are checked after)."""
    last = len(term) - TRIGRAM_CHARS
    starts = {*range(0, last, TRIGRAM_CHARS), last}
    return sorted({term[i : i + TRIGRAM_CHARS] for i in starts})


def phases(terms: Sequence[str]) -> list[list[str]]:
    """The term sets whose newest matches recall ranks: all the terms together, then each."""
    each = [[term] for term in terms]
    return [list(terms), *each] if len(terms) > 1 else each


def holds_all(text: str, terms: Sequence[str]) -> bool:
    """Whether the text holds every term, case-folded (what an index lookup is checked with)."""
    folded = text.casefold()
    return all(term.casefold() in folded for term in terms)


def rank(found: Iterable[Found], terms: Sequence[str], limit: int) -> list[RecallHit]:
    """The best `limit` of the messages found: by term_score, then the newest first."""
    scored: list[tuple[float, Found]] = []
    seen: set[int] = set()
    for hit in found:
        if hit[2] in seen:
            continue
        seen.add(hit[2])
        score = term_score(hit[3], terms)
        if score > 0:
            scored.append((score, hit))
    scored.sort(key=lambda pair: (-pair[0], -pair[1][2]))
    return [
        RecallHit(id=message_id, role=role, seq=seq, snippet=snippet(text, terms), score=score)
        for score, (message_id, role, seq, text) in scored[:limit]
    ]
