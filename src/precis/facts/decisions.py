"""What the agent decided and why: choices stated outright and the sentences that give a reason.

Read from one assistant turn by the scan (`precis.facts.scan`); the brief lists them under its
decisions. A choice that only points elsewhere ("I'll use that alias") or names how the next
step is taken ("I'll use curl to fetch it") is none; a choice made on the way to an edit names
the file the turn wrote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from precis.facts.gist import value_count
from precis.facts.patterns import DECISION_RE, PLAN_AFTER_RE, REASON_RE, SENTENCE_SPLIT_RE
from precis.facts.terms import basename
from precis.facts.text import one_line, shorten

_PLAN_RE: Final = re.compile(r"(?i)\buse\b[^.;:]{0,60}?\bto (?!the\b|a\b|an\b)[a-z]+")
_POINTER_RE: Final = re.compile(r"(?i)\s+(?:that|this|these|those|it|them)\b")


def decisions(text: str) -> tuple[tuple[str, str], ...]:
    """Choices stated outright ("let's go with …", 决定 …), as (folded key, shown text)."""
    out: list[tuple[str, str]] = []
    for piece in SENTENCE_SPLIT_RE.split(text):
        sentence = one_line(piece.strip().lstrip("-*•>#").strip())
        found = DECISION_RE.search(sentence) if len(sentence) >= 6 else None
        if found is None:
            continue
        if found.group(0).lower().endswith("use") and _PLAN_RE.search(sentence):
            continue  # "I'll use curl to fetch it": how the next step is taken, not a choice
        if _POINTER_RE.match(sentence, found.end()) and not value_count(sentence):
            continue  # "I'll use that alias": what it points at is not in the sentence
        out.append((sentence.lower(), shorten(sentence, 240)))
    return tuple(out)


_MAX_REASONS = 2
_REASON_UNITS = 280


def reasons(prose: str) -> tuple[tuple[str, str], ...]:
    """The agent's sentences that say why (`REASON_RE`), each with the plan that follows it
    ("… which SQLite doesn't support. I need to rewrite it …"), at most two a turn."""
    sentences: list[str] = []
    for part in SENTENCE_SPLIT_RE.split(prose):
        piece = one_line(part.strip().lstrip("-*•>#").strip())
        if sentences and (sentences[-1].endswith("...") or sentences[-1].count("`") % 2):
            sentences[-1] = f"{sentences[-1]} {piece}"  # an ellipsis or code, not an end
        elif piece:
            sentences.append(piece)
    out: list[tuple[str, str]] = []
    for i, sentence in enumerate(sentences):
        if len(sentence) < 20 or REASON_RE.search(sentence) is None:
            continue
        after = sentences[i + 1] if i + 1 < len(sentences) else ""
        if after and PLAN_AFTER_RE.search(after):
            sentence = f"{sentence} {after}"
        out.append((sentence.lower(), shorten(sentence, _REASON_UNITS)))
        if len(out) >= _MAX_REASONS:
            break
    return tuple(out)


def about_files(
    decisions: tuple[tuple[str, str], ...], paths: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """The turn's decisions, each naming the files its calls write: a choice made on the way to
    an edit is about that file ("… rewrite it with proper SQLite handling (…_add_state.exs)")."""
    names = ", ".join(dict.fromkeys(basename(p) for p in paths))
    return tuple((key, f"{shown} ({names})") for key, shown in decisions) if names else decisions
