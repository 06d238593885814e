"""How PostgreSQL recall asks its index for a term: pg_trgm's keys of the term, the rare pieces
a long term is asked by, and a sample of a conversation's newest messages that tells which keys
are rare and how many rows a phase's terms are likely to match together.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence

from precis.stores.dialect import Handle
from precis.stores.recall import MOST_TRIGRAMS, RARE_SHARE, TRIGRAM_CHARS

__all__ = [
    "Samples",
    "caseless",
    "doc_text",
    "index_patterns",
    "index_pieces",
    "like_escaped",
    "like_pattern",
    "rarest_piece",
    "term_trigrams",
]

# A long term is asked of the index by its rare trigrams only (`index_pieces`); which are rare
# is counted in this many of the conversation's newest messages, read again once as many more
# have been appended, and kept for this many conversations (some 400 KB each).
SAMPLE = 128
SAMPLED_CONVERSATIONS = 32
# What pg_trgm makes trigrams of: runs of letters and digits; and, to count them in a sample
# quickly, ASCII punctuation to spaces (other punctuation stays in words: an estimate only).
_TRGM_WORD = re.compile(r"[^\W_]+")
_ASCII_NON_WORD = {c: " " for c in range(128) if not chr(c).isalnum()}
# A piece of a term without letters: ASCII digits and punctuation.
_CASELESS = re.compile(r"[!-@\[-`{-~]+")


def caseless(text: str) -> bool:
    """Whether a text has no letters (ASCII digits and punctuation only): LIKE finds it as ILIKE
    does, without folding the case of the text it looks in."""
    return _CASELESS.fullmatch(text) is not None


def like_pattern(term: str) -> str:
    """An ILIKE pattern matching `term` anywhere, with its own %, _ and \\ taken literally."""
    return f"%{like_escaped(term)}%"


def like_escaped(text: str) -> str:
    """`text` in an ILIKE pattern, its %, _ and \\ taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def term_trigrams(term: str) -> dict[str, tuple[int, int]]:
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


def index_pieces(term: str, share: Callable[[str], float]) -> list[str] | None:
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
    grams = term_trigrams(term)
    if len(grams) <= MOST_TRIGRAMS:
        return None
    shares, ranked = _ranked(grams, share)
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


def rarest_piece(term: str, share: Callable[[str], float]) -> str:
    """The piece of a term that asks the index for its rarest key alone (the whole term when
    that is all it has), for a term of a phase of several: the others narrow the rows as much,
    and every key asked costs its list of rows, which for a common trigram is most of the
    history (`migration` with `迁移` over 1,000,000 rows: 34 ms by its seven trigrams, 3 ms by
    `mig` alone). The rows it lets through are checked for the whole term."""
    grams = term_trigrams(term)
    if not grams:
        return term
    _, ranked = _ranked(grams, share)
    low, high = grams[ranked[0]]
    return term[low:high]


def _ranked(
    grams: dict[str, tuple[int, int]], share: Callable[[str], float]
) -> tuple[dict[str, float], list[str]]:
    """Each key's share of the sample, and the keys rarest first."""
    # ` bi` cannot be asked without `  b` (its piece `/bi` asks both): it costs what that does.
    shares = {gram: share(gram) for gram in grams}
    for gram in grams:
        if len(gram) == TRIGRAM_CHARS and gram[0] == " " and gram[1] != " ":
            shares[gram] = max(shares[gram], share(f"  {gram[1]}"))
    # On a tie, a trigram inside a word first: one at its edge brings the like of `  b` along.
    return shares, sorted(grams, key=lambda gram: (shares[gram], gram.count(" "), grams[gram]))


def index_patterns(pieces: Sequence[str]) -> list[tuple[str, str]]:
    """The conditions that ask the index for the pieces of a term, each (operator, pattern):
    those without letters through LIKE, first, which need not fold the text's case to check a
    row (no character folds to an ASCII digit or punctuation); the others through ILIKE."""
    bare = [piece for piece in pieces if caseless(piece)]
    cased = [piece for piece in pieces if not caseless(piece)]
    return [
        (operator, "%" + "%".join(like_escaped(piece) for piece in group) + "%")
        for operator, group in (("LIKE", bare), ("ILIKE", cased))
        if group
    ]


# A sample: the last seq when it was read, how many messages it holds, how many of them hold
# each trigram and each word, and their search texts, case-folded.
_Sample = tuple[int, int, dict[str, int], Counter[str], tuple[str, ...]]


class Samples:
    """For each conversation, its newest SAMPLE messages: how many hold each trigram and word,
    and their texts; read again once SAMPLE more messages have been appended, kept for
    SAMPLED_CONVERSATIONS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, _Sample] = {}

    def share(
        self, db: Handle, conversation_id: str, last: int
    ) -> tuple[Callable[[str], float], Callable[[Sequence[str]], float]]:
        """The share of the sample holding a key of `term_trigrams` (a trigram; a short word
        padded on both sides, or on the left: a word starting so), and the share holding all
        of some terms (as `recall.holds_all` has it). The sample is read when first needed."""
        entry: _Sample | None = None

        def sample() -> _Sample:
            nonlocal entry
            if entry is None:
                entry = self._sample(db, conversation_id, last)
            return entry

        def share(key: str) -> float:
            _, size, grams, words, _ = sample()
            if not size:
                return 0.0
            if len(key) == TRIGRAM_CHARS:
                return grams.get(key, 0) / size
            word = key.strip()
            if key.endswith(" "):
                return words[word] / size
            return sum(n for held, n in words.items() if held.startswith(word)) / size

        def held(terms: Sequence[str]) -> float:
            _, size, _, _, texts = sample()
            folded = [term.casefold() for term in terms]
            holding = sum(all(term in text for term in folded) for text in texts)
            return holding / size if size else 0.0

        return share, held

    def _sample(self, db: Handle, conversation_id: str, last: int) -> _Sample:
        with self._lock:
            entry = self._counts.get(conversation_id)
        if entry is not None and entry[0] <= last < entry[0] + SAMPLE:
            return entry
        rows = db.execute(
            "SELECT content, calls_text FROM messages WHERE conversation_id = %s "
            "ORDER BY seq DESC LIMIT %s",
            (conversation_id, SAMPLE),
        ).fetchall()
        docs = [doc_text(row[0], row[1]) for row in rows]
        # Messages holding each word, then each trigram of those: a message holding a trigram
        # in two words counts twice, which ranks trigrams all the same and costs a tenth.
        words: Counter[str] = Counter()
        for doc in docs:
            words.update(set(doc.lower().translate(_ASCII_NON_WORD).split()))
        counts: dict[str, int] = {}
        for word, held in words.items():
            padded = f"  {word} "
            for i in range(len(padded) - 2):
                gram = padded[i : i + 3]
                counts[gram] = counts.get(gram, 0) + held
        entry = (last, len(rows), counts, words, tuple(doc.casefold() for doc in docs))
        with self._lock:
            self._counts.pop(conversation_id, None)
            while len(self._counts) >= SAMPLED_CONVERSATIONS:
                self._counts.pop(next(iter(self._counts)))
            self._counts[conversation_id] = entry
        return entry


def doc_text(content: str, calls_text: str) -> str:
    """base.search_text rebuilt from the stored columns, for snippets."""
    if not calls_text:
        return content
    return f"{content}\n{calls_text}" if content else calls_text


# The context read, and the migration steps schema_version counts, as PostgreSQL runs them.
