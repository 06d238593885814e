"""Fact retention: the share of the evicted span's facts the new context still holds, per kind.

Facts and the presence test are `precis.facts`'s, the same the guard uses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from precis.core.memo import Memo
from precis.core.messages import Message
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
class Retention:
    """Facts found and facts kept, per kind: counts, so runs and sessions pool exactly."""

    total: Mapping[str, int] = field(default_factory=dict)
    retained: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Retention) -> Retention:
        total = Counter(self.total)
        total.update(other.total)
        retained = Counter(self.retained)
        retained.update(other.retained)
        return Retention(dict(total), dict(retained))

    @property
    def facts(self) -> int:
        return sum(self.total.values())

    @property
    def kept(self) -> int:
        return sum(self.retained.values())

    def share(self, kind: str) -> float | None:
        """Share of that kind's facts kept; None when the span had none."""
        n = self.total.get(kind, 0)
        return self.retained.get(kind, 0) / n if n else None

    @property
    def overall(self) -> float | None:
        """Pooled share over every fact; None when there were none."""
        return self.kept / self.facts if self.facts else None

    def as_dict(self) -> dict[str, Any]:
        kinds = ordered_kinds(self.total)
        return {
            "overall": self.overall,
            "facts": self.facts,
            "retained": self.kept,
            "by_kind": {
                k: {
                    "facts": self.total[k],
                    "retained": self.retained.get(k, 0),
                    "share": self.share(k),
                }
                for k in kinds
            },
        }


def ordered_kinds(kinds: Iterable[str]) -> list[str]:
    """Known kinds in the guard's priority order, then any new ones alphabetically."""
    present = set(kinds)
    known = [k for k in KIND_LABELS if k in present]
    return known + sorted(present - set(KIND_LABELS))


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
