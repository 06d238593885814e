"""The independent judge: whether a text keeps a hand-made fact, by the fact set's own rule.

The rule is `tests/data/facts/README.md`'s and nothing of precis's: text and variants are
NFKC-normalised, casefolded, stripped of backticks and asterisks and their whitespace runs made
one space; a fact is kept when every group of its `match` has a variant in the text and one
occurrence of each fits inside a stretch of `STRETCH_CHARS` characters. This module imports no
part of `precis.facts`, so the extractor that builds the guard's ledger is never its own judge.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Self

# The longest stretch of (normalised) text all of a fact's groups must fall inside.
STRETCH_CHARS = 400

# The kinds a fact set uses, in the order tables show them, with their short headers.
KINDS: tuple[str, ...] = (
    "task",
    "state",
    "constraint",
    "decision",
    "file",
    "identifier",
    "error",
    "open_item",
)
KIND_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "task": "task",
        "state": "state",
        "constraint": "con",
        "decision": "dec",
        "file": "file",
        "identifier": "id",
        "error": "err",
        "open_item": "open",
    }
)
_DROPPED = str.maketrans("", "", "`*")
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """NFKC, casefolded, without backticks and asterisks, whitespace runs as one space."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_DROPPED)
    return _SPACES.sub(" ", folded)


def _occurrences(text: str, variants: Iterable[str]) -> list[tuple[int, int]]:
    """(start, end) of every occurrence of every (normalised) variant, overlaps included."""
    found: list[tuple[int, int]] = []
    for variant in variants:
        if not variant:
            continue
        start = text.find(variant)
        while start >= 0:
            found.append((start, start + len(variant)))
            start = text.find(variant, start + 1)
    found.sort()
    return found


@dataclass(frozen=True, slots=True)
class _Group:
    """One group's occurrences by start, and the least end among those starting at or after."""

    starts: list[int]
    least_end_from: list[int]

    @classmethod
    def of(cls, spans: Sequence[tuple[int, int]]) -> _Group:
        least: list[int] = [0] * len(spans)
        best = 1 << 62
        for i in range(len(spans) - 1, -1, -1):
            best = min(best, spans[i][1])
            least[i] = best
        return cls([s for s, _ in spans], least)

    def end_from(self, start: int) -> int | None:
        """The least end of an occurrence starting at `start` or later; None when none does."""
        i = bisect_left(self.starts, start)
        return self.least_end_from[i] if i < len(self.starts) else None


def keeps(normalised_text: str, match: Sequence[Sequence[str]]) -> bool:
    """Whether a text (already `normalise`d) keeps a fact whose `match` groups are normalised.

    For each occurrence taken as the leftmost, every group's nearest-ending occurrence at or
    after it must end within `STRETCH_CHARS` of it.
    """
    if not match:
        return False
    groups = [_occurrences(normalised_text, variants) for variants in match]
    if not all(groups):
        return False
    indexed = [_Group.of(spans) for spans in groups]
    for start in sorted({s for spans in groups for s, _ in spans}):
        ends = [g.end_from(start) for g in indexed]
        if None in ends:
            break  # a group has no occurrence this far on: no later start can do better
        if max(e for e in ends if e is not None) - start <= STRETCH_CHARS:
            return True
    return False


def answered(reply: str, answers: Sequence[str]) -> bool:
    """Whether a model's reply holds one of the acceptable answers, normalised alike."""
    text = normalise(reply)
    return any(a and a in text for a in (normalise(x) for x in answers))


def as_data(obj: object, names: str) -> dict[str, Any]:
    """`obj`'s attributes `names` (space-separated; "key=attribute" names one otherwise) as plain
    data: a value with an `as_dict` by it, a tuple as a list (of theirs, or of the values)."""
    out: dict[str, Any] = {}
    for name in names.split():
        key, _, attribute = name.partition("=")
        value = getattr(obj, attribute or key)
        if isinstance(value, tuple):
            value = [v.as_dict() if hasattr(v, "as_dict") else v for v in value]
        elif hasattr(value, "as_dict"):
            value = value.as_dict()
        out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class Tally:
    """Facts counted and facts kept, per kind: counts, so points, runs and sessions pool exactly."""

    total: Mapping[str, int] = field(default_factory=dict)
    kept: Mapping[str, int] = field(default_factory=dict)
    # The kinds in the order tables show them, and the word `as_dict` gives the kept count.
    ORDER: ClassVar[Sequence[str]] = KINDS
    KEPT: ClassVar[str] = "kept"

    def __add__(self, other: Self) -> Self:
        total = Counter(self.total)
        total.update(other.total)
        kept = Counter(self.kept)
        kept.update(other.kept)
        return type(self)(dict(total), dict(kept))

    @property
    def facts(self) -> int:
        return sum(self.total.values())

    @property
    def kept_count(self) -> int:
        return sum(self.kept.values())

    @property
    def overall(self) -> float | None:
        """Share of all facts kept; None when there were none."""
        return self.kept_count / self.facts if self.facts else None

    def share(self, kind: str) -> float | None:
        """Share of that kind's facts kept; None when there were none."""
        n = self.total.get(kind, 0)
        return self.kept.get(kind, 0) / n if n else None

    def as_dict(self) -> dict[str, Any]:
        by_kind = {
            k: {"facts": self.total[k], self.KEPT: self.kept.get(k, 0), "share": self.share(k)}
            for k in ordered_kinds([self])
        }
        return {
            "overall": self.overall,
            "facts": self.facts,
            self.KEPT: self.kept_count,
            "by_kind": by_kind,
        }


def ordered_kinds(tallies: Iterable[Tally]) -> list[str]:
    """Every kind any of the tallies has facts of, in their `ORDER`, then others alphabetically."""
    order: Sequence[str] = ()
    present: set[str] = set()
    for tally in tallies:
        order = tally.ORDER
        present.update(k for k, n in tally.total.items() if n)
    return [k for k in order if k in present] + sorted(present - set(order))
