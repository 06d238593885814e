"""The fact model: one thing a summary must keep, and the ledger carried between compactions.

The ledger's JSON form (`metadata["ledger"]` of a summary) is written and read here only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, cast

from precis.core.types import FACT_KINDS, FactKind

# Most vital first: a short clip keeps the head of this list.
KINDS: Final[tuple[FactKind, ...]] = FACT_KINDS
PRIORITY: Final[Mapping[str, int]] = MappingProxyType({kind: i for i, kind in enumerate(KINDS)})


@dataclass(frozen=True, slots=True)
class Fact:
    """One thing a summary must keep; `text` is the compact verbatim string that proves it."""

    kind: FactKind
    text: str
    source_id: str
    # Shown after the text when there is room (an error's fix); never needed for presence.
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in PRIORITY:
            raise ValueError(f"unknown fact kind {self.kind!r}")

    def to_json(self) -> dict[str, str]:
        """A plain dict, so the fact can live in message metadata."""
        out = {"kind": self.kind, "text": self.text, "source_id": self.source_id}
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, item: Any) -> Fact | None:
        """A stored fact back, or None when the entry is not a well-formed fact."""
        if not isinstance(item, Mapping):
            return None
        kind, text = item.get("kind"), item.get("text")
        if kind not in PRIORITY or not isinstance(text, str) or not text.strip():
            return None
        source = item.get("source_id")
        note = item.get("note")
        return cls(
            cast(FactKind, kind),
            text,
            source if isinstance(source, str) else "",
            note if isinstance(note, str) else "",
        )


@dataclass(frozen=True, slots=True)
class Ledger:
    """The facts carried from compaction to compaction, oldest first, each (kind, text) once."""

    facts: tuple[Fact, ...] = ()

    def to_json(self) -> list[dict[str, str]]:
        """The ledger as JSON data for `metadata["ledger"]`."""
        return [fact.to_json() for fact in self.facts]

    @classmethod
    def from_json(cls, data: Any) -> Ledger:
        """Read a stored ledger back, skipping entries that are not well-formed facts."""
        facts: list[Fact] = []
        if isinstance(data, Sequence) and not isinstance(data, str | bytes):
            for item in data:
                fact = Fact.from_json(item)
                if fact is not None:
                    facts.append(fact)
        return cls(dedupe(facts))

    def merge(self, other: Ledger | Iterable[Fact]) -> Ledger:
        """This ledger's facts, then the other's new ones; the first copy of a fact wins."""
        more = other.facts if isinstance(other, Ledger) else tuple(other)
        return Ledger(dedupe((*self.facts, *more)))

    def of_kind(self, kind: FactKind) -> tuple[Fact, ...]:
        """The facts of one kind, in ledger order."""
        return tuple(fact for fact in self.facts if fact.kind == kind)


def carry(previous: Ledger | None, new: Sequence[Fact]) -> Ledger:
    """The ledger for the next summary: everything carried so far, then this span's facts; an
    item's state from the span replaces the state carried for it (the newest state holds)."""
    if previous is None:
        return Ledger(dedupe(new))
    return Ledger(dedupe((*newest_states(previous.facts, new), *new)))


def state_subject(text: str) -> str:
    """What a state fact is about: the text before its first ": "."""
    return text.partition(": ")[0].strip().casefold()


def newest_states(carried: Iterable[Fact], new: Iterable[Fact]) -> tuple[Fact, ...]:
    """The carried facts without the states that a newer fact of the same item replaces."""
    fresh = {state_subject(f.text) for f in new if f.kind == "state"}
    if not fresh:
        return tuple(carried)
    return tuple(f for f in carried if f.kind != "state" or state_subject(f.text) not in fresh)


def dedupe(facts: Iterable[Fact]) -> tuple[Fact, ...]:
    """Each (kind, text) once, the first copy winning, in the order given."""
    seen: dict[tuple[str, str], Fact] = {}
    for fact in facts:
        seen.setdefault((fact.kind, fact.text), fact)
    return tuple(seen.values())
