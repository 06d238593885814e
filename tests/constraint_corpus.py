"""The hand-written constraint corpus, scored: which rules the detector finds, and what else.

Run as a script to print a half's figures: `python tests/constraint_corpus.py heldout`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "data" / "constraints"
_MARKS_RE = re.compile(r"^(?:[-*•>#☐]|\d{1,3}[.)]|\[[ xX]\])+\s*")
_END_RE = re.compile(r"[\s.。!！;；,，:：]+$")


@dataclass(frozen=True)
class Item:
    """One corpus entry: a text, whether it states rules, and the rules (`spans`) it states."""

    text: str
    label: str
    language: str
    form: str
    spans: tuple[str, ...]


@dataclass
class Score:
    """Sentences found that are rules, found that are not, and rules not found, with where."""

    hits: int = 0
    false: list[tuple[Item, str]] = field(default_factory=list)
    missed: list[tuple[Item, str]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.hits / max(1, self.hits + len(self.false))

    @property
    def recall(self) -> float:
        return self.hits / max(1, self.hits + len(self.missed))

    def line(self, name: str) -> str:
        return (
            f"{name}: precision {self.precision:.3f} ({self.hits}/{self.hits + len(self.false)}),"
            f" recall {self.recall:.3f} ({self.hits}/{self.hits + len(self.missed)})"
        )


def load(half: str) -> list[Item]:
    """The items of one half ("dev" or "heldout")."""
    items: list[Item] = []
    for line in (CORPUS / f"{half}.jsonl").read_text(encoding="utf-8").splitlines():
        data: dict[str, Any] = json.loads(line)
        spans = tuple(data.get("spans", ()))
        items.append(Item(data["text"], data["label"], data["language"], data["form"], spans))
    return items


def _norm(text: str) -> str:
    text = " ".join(text.split())
    return _END_RE.sub("", _MARKS_RE.sub("", text)).lower()


def _matches(found: str, span: str) -> bool:
    a, b = _norm(found), _norm(span)
    return bool(a) and bool(b) and (b in a or a in b)


def score(items: Sequence[Item], detect: Callable[[str], Sequence[str]]) -> Score:
    """Each sentence `detect` finds is a hit when it is (or holds, or is held by) a rule the
    item states, else a false alarm; each rule no found sentence matches is a miss."""
    result = Score()
    for item in items:
        found = list(detect(item.text))
        for sentence in found:
            if any(_matches(sentence, span) for span in item.spans):
                result.hits += 1
            else:
                result.false.append((item, sentence))
        for span in item.spans:
            if not any(_matches(sentence, span) for sentence in found):
                result.missed.append((item, span))
    return result


def _report(half: str) -> Iterator[str]:
    from precis.facts import constraint_sentences

    result = score(load(half), constraint_sentences)
    yield result.line(half)
    for item, sentence in result.false:
        yield f"  false ({item.language} {item.form}): {sentence!r}"
    for item, span in result.missed:
        yield f"  missed ({item.language} {item.form}): {span!r}"


if __name__ == "__main__":
    for half in sys.argv[1:] or ["dev"]:
        print("\n".join(_report(half)))
