"""Whether a text keeps a fact: the one containment check the guard, the engine and eval share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Final

from precis.core.messages import Message
from precis.facts.language import raw_summary_text
from precis.facts.model import KINDS, Fact

_TICKET_FACT_RE: Final = re.compile(r"#(\d+)")


def fold(text: str) -> str:
    """Whitespace collapsed and case folded, the form every containment check uses."""
    return " ".join(text.split()).casefold()


@lru_cache(maxsize=8192)
def _matcher(kind: str, text: str) -> Callable[[str], bool]:
    """The presence test for one fact, built once: its folded needle and the pattern, if any."""
    needle = fold(text)
    if kind in {"file_modified", "file_read"}:
        needle = needle.removeprefix("./")
        if not needle:
            return lambda folded: False
        path = re.compile(rf"(?<![\w.\-]){re.escape(needle)}(?![\w\-]|\.\w)")
        # The cheap test first; the pattern only confirms token edges.
        return lambda folded: needle in folded and path.search(folded) is not None
    if kind == "identifier":
        ticket = _TICKET_FACT_RE.fullmatch(needle)
        if ticket is not None:
            number = ticket.group(1)
            cited = re.compile(rf"(?:#|\b(?:pr|issue|ticket)\s*#?\s*){number}(?!\d)")
            return lambda folded: cited.search(folded) is not None
        token = re.compile(rf"(?<![A-Za-z0-9]){re.escape(needle)}(?![A-Za-z0-9])")
        return lambda folded: needle in folded and token.search(folded) is not None
    return lambda folded: bool(needle) and needle in folded


def present(fact: Fact, folded: str) -> bool:
    """Whether the folded text holds the fact; identifiers and paths must stand as whole tokens."""
    return _matcher(fact.kind, fact.text)(folded)


def context_text(messages: Sequence[Message]) -> str:
    """Everything a model reads of these messages, the text facts are looked for in: contents,
    tool calls, and the raw text of summaries and markers."""
    parts: list[str] = []
    for m in messages:
        parts.append(m.content)
        raw = raw_summary_text(m)
        if raw is not None and raw != m.content:
            parts.append(raw)
        parts.extend(f"{call.name} {call.arguments}" for call in m.tool_calls)
    return "\n".join(parts)


def fact_present(fact: Fact, text: str) -> bool:
    """Whether `text` keeps the fact: its compact text, ignoring case, spacing and a leading ./."""
    return present(fact, fold(text))


def missing_facts(facts: Iterable[Fact], summary_text: str) -> list[Fact]:
    """The facts the summary lost, in the order given."""
    folded = fold(summary_text)
    return [fact for fact in facts if not present(fact, folded)]


def retention(facts: Iterable[Fact], context_text: str) -> dict[str, float]:
    """Share of facts the context keeps, per kind and "overall": the measure `precis eval` uses."""
    folded = fold(context_text)
    kept: dict[str, list[int]] = {}
    for fact in facts:
        tally = kept.setdefault(fact.kind, [0, 0])
        tally[0] += present(fact, folded)
        tally[1] += 1
    out: dict[str, float] = {k: kept[k][0] / kept[k][1] for k in KINDS if k in kept}
    total = sum(t[1] for t in kept.values())
    out["overall"] = sum(t[0] for t in kept.values()) / total if total else 1.0
    return out
