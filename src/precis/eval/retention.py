"""Fact retention: the share of the evicted span's facts the new context still holds, per kind.

Facts and the presence test are `precis.facts`'s, the same the guard uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from precis.core.memo import Memo
from precis.core.messages import Message
from precis.eval.judge import Tally
from precis.facts import Fact, extract_facts, retention

# Fact kinds in the guard's priority order; the table abbreviates them to these headers.
KIND_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "constraint": "con",
        "task": "task",
        "pinned": "pin",
        "state": "state",
        "file_modified": "mod",
        "identifier": "id",
        "error": "err",
        "file_read": "read",
        "request": "req",
    }
)


@dataclass(frozen=True, slots=True)
class Retention(Tally):
    """A `Tally` of the guard's own facts (`precis.facts`), its kinds in the guard's order."""

    ORDER: ClassVar[Sequence[str]] = tuple(KIND_LABELS)
    KEPT: ClassVar[str] = "retained"


def measure(facts: Sequence[Fact], text: str, memo: Memo | None = None) -> Retention:
    """Count, per kind, the facts `precis.facts.retention` finds in the text (`memo`: the
    replaying session's, where each fact's test may already be)."""
    by_kind: dict[str, list[Fact]] = {}
    for fact in facts:
        by_kind.setdefault(fact.kind, []).append(fact)
    total: dict[str, int] = {}
    kept: dict[str, int] = {}
    for kind, group in by_kind.items():
        shares = retention(group, text, memo)
        share = shares.get(kind, shares.get("overall", 0.0))
        total[kind] = len(group)
        kept[kind] = round(share * len(group))
    return Retention(total, kept)


def facts_of(
    messages: Sequence[Message], task: str | None = None, memo: Memo | None = None
) -> list[Fact]:
    """The facts of a span, as the guard finds them (`memo`: the replaying session's, where
    each message's scan may already be)."""
    return extract_facts(messages, task=task, memo=memo)
