"""A tally of the terms a span names (paths, identifiers, error names): where each was seen,
how often a person or the agent named it, and how lately; ranked best first."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from precis.facts.patterns import TELLING_KINDS

# Where a term was seen, as a weight.
W_CARRIED, W_USER, W_ARGS, W_SPOKEN, W_OUTPUT = 5, 4, 3, 2, 1
# A use counts half as much every this many messages (about fifteen turns): what the latest
# steps used outranks what was used as often long before.
HEAT_HALF_LIFE = 30


@dataclass(slots=True)
class TermEntry:
    label: str
    weight: int
    count: int
    first: int
    kind: str
    # When it was last seen (the collector's message clock), and how often a person or the
    # agent itself named it (user words, call arguments, the agent's text): tool output aside.
    last: int = 0
    uses: int = 0
    # Uses weighed by how recent they are (halved every HEAT_HALF_LIFE messages), as of `warm`.
    heat: float = 0.0
    warm: int = 0


@dataclass(slots=True)
class Tally:
    """Distinct terms with where they were seen: what the user named first, then what the work
    used most, most recently; a term only a tool printed comes last, if at all."""

    terms: dict[str, TermEntry] = field(default_factory=dict)
    _ranked: list[TermEntry] | None = None

    def add(self, key: str, label: str, weight: int, kind: str = "path", at: int = 0) -> None:
        self._ranked = None
        term = self.terms.get(key)
        if term is None:
            used = 1 if weight >= W_SPOKEN else 0
            self.terms[key] = TermEntry(
                label, weight, 1, len(self.terms), kind, at, used, float(used), at
            )
            return
        term.count += 1
        if weight >= W_SPOKEN:
            term.uses += 1
            term.heat = term.heat * 0.5 ** (max(0, at - term.warm) / HEAT_HALF_LIFE) + 1
            term.warm = max(term.warm, at)
        if at > term.last:
            term.last = at
        if weight > term.weight:
            term.weight = weight
        if "=" in label and "=" not in term.label:
            term.label = label
        elif kind == "port" and ":" in label and ":" not in term.label:
            term.label = label  # the port with its host says more than "port 4242"
        if kind in TELLING_KINDS or kind == "error":  # a telling sighting tells
            term.kind = kind

    def ranked(self) -> list[TermEntry]:
        """Best first; a term only a tool's output named is left out unless it is telling.
        Sorted once until the next term is added (a fresh list each call)."""
        if self._ranked is None:
            self._ranked = sorted((t for t in self.terms.values() if _shown(t)), key=_rank)
        return list(self._ranked)

    def keyed(self, min_weight: int = 0) -> list[tuple[str, TermEntry]]:
        """The ranked terms with the key each is filed under; with `min_weight`, only those
        weighing that much (the same order: the sort is stable, the filter keeps order)."""
        return sorted(
            ((k, t) for k, t in self.terms.items() if t.weight >= min_weight and _shown(t)),
            key=_rank_keyed,
        )


def _shown(t: TermEntry) -> bool:
    """Named by someone, or a kind worth keeping even when only a tool printed it (a commit
    hash, a URL, a PR): no test-run ports, no UUIDs of log lines, no versions of a lock file."""
    return t.weight > W_OUTPUT or t.kind in TELLING_KINDS


def _rank(t: TermEntry) -> tuple[bool, float, int, int, int]:
    """The terms the user named first; then what the work used most, lately: a term used twice
    in the latest steps before one used often long ago (`heat_now`). A term an earlier summary
    carried counts as used before the span began, so what the span used comes first and the
    newest files and identifiers are never crowded out by lists a summary keeps carrying."""
    return (t.weight != W_USER, -heat_now(t), -t.weight, -t.last, t.first)


def heat_now(t: TermEntry) -> float:
    """How much and how lately the work used the term, on one scale for every term: the log of
    its uses halved for every `HEAT_HALF_LIFE` messages since each, read at one moment (any:
    the order of terms is the same at every moment, so the moment is the clock's zero)."""
    return math.log2(t.heat) + t.warm / HEAT_HALF_LIFE if t.heat > 0 else -math.inf


def _rank_keyed(item: tuple[str, TermEntry]) -> tuple[bool, float, int, int, int]:
    return _rank(item[1])
