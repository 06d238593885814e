"""The guard: a ledger of facts a summary must keep, checked and topped up within the clip.

The facts come from `precis.facts` (red lines, the task, pinned items, files, identifiers, errors,
requests). Whatever the summary dropped is appended verbatim in a "Retained facts" section, by
priority, and the ledger rides along in the summary's metadata so later compactions keep it.
Pure: no I/O, no clock; the same span gives the same facts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from types import MappingProxyType
from typing import Final

from precis.core.jscompat import utf16_len
from precis.core.memo import Bounded, Memo, Table
from precis.facts import (
    KINDS,
    PRIORITY,
    Fact,
    Ledger,
    carry,
    context_text,
    extract_facts,
    fact_present,
    folded_text,
    head,
    is_chinese,
    missing_facts,
    presence_test,
    retention,
)

__all__ = [
    "BODY_FLOOR_SHARE",
    "DEFAULT_HEADING",
    "DEFAULT_HEADING_ZH",
    "KINDS",
    "LABELS",
    "PRIORITY",
    "Fact",
    "GuardResult",
    "Ledger",
    "apply_guard",
    "carry",
    "context_text",
    "extract_facts",
    "fact_present",
    "missing_facts",
    "retention",
]

DEFAULT_HEADING: Final = "Retained facts"
DEFAULT_HEADING_ZH: Final = "保留的事实"
LABELS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "en": MappingProxyType(
            {
                "constraint": "Constraints:",
                "task": "Task:",
                "pinned": "Pinned:",
                "state": "State:",
                "file_modified": "Files modified:",
                "identifier": "Identifiers:",
                "error": "Errors:",
                "file_read": "Files read:",
                "request": "Requests:",
            }
        ),
        "zh": MappingProxyType(
            {
                "constraint": "约束：",
                "task": "任务：",
                "pinned": "置顶：",
                "state": "状态：",
                "file_modified": "已修改文件：",
                "identifier": "标识符：",
                "error": "错误：",
                "file_read": "已读文件：",
                "request": "请求：",
            }
        ),
    }
)

_LABELS = LABELS  # the name the tests know

# The summary body is cut before facts are dropped, but never below this share of the clip.
BODY_FLOOR_SHARE: Final = 0.35
_CUT_MARK: Final = "…"
_SECTION_GAP: Final = "\n\n"
_BULLET: Final = "- "
_FIX_ARROW: Final = " → "
_WORDY_RE: Final = re.compile(r"[A-Za-z\u3400-\u9fff]")


@dataclass(frozen=True, slots=True)
class GuardResult:
    """The guarded summary, which facts were appended, and which did not fit the clip."""

    text: str
    appended: tuple[Fact, ...]
    dropped: tuple[Fact, ...]


# --- the guard --------------------------------------------------------------------------------


def apply_guard(
    summary: str,
    ledger: Ledger,
    *,
    clip_chars: int,
    heading: str = DEFAULT_HEADING,
    memo: Memo | None = None,
) -> GuardResult:
    """Append what the summary lost, by priority, so the whole stays within `clip_chars`.

    Room comes first from the summary's tail (its head is kept, the cut marked with "…"), but the
    body never shrinks below about 35 % of the clip; past that the least vital facts are dropped.
    `memo`, the session's, keeps what the guard reads of each fact (most are the last ledger's).
    """
    clip = max(0, clip_chars)
    memo = memo if memo is not None else Memo()
    sized = memo[_SIZED]
    guarded = [_guarded(fact, memo) for fact in in_guard_order(ledger.facts)]
    facts = [g[0] for g in guarded]
    language = _language(summary, facts)
    if heading == DEFAULT_HEADING and language == "zh":
        heading = DEFAULT_HEADING_ZH
    labels = LABELS[language]
    # By body: a body cut the same way loses the same facts.
    lost: dict[str, list[_Guarded]] = {}

    def lost_from(body: str) -> list[_Guarded]:
        found = lost.get(body)
        if found is None:
            folded = folded_text(body)
            found = lost[body] = [g for g in guarded if not (g[2] in folded and g[3](folded))]
        return found

    def missing_from(body: str) -> list[Fact]:
        return [g[0] for g in lost_from(body)]

    body = _cut(summary, clip)
    lost_body = lost_from(body)
    missing = [g[0] for g in lost_body]
    if not missing:
        return GuardResult(body, (), ())
    # Most often every missing fact fits in its fullest line beside the body as it is: the
    # section is rendered at once, and its length is what `_section_units` would add up.
    section = _render_fullest(lost_body, heading, labels)
    need, size = utf16_len(section), utf16_len(body)
    gap = utf16_len(_SECTION_GAP) if summary else 0
    if size <= clip - need - utf16_len(_SECTION_GAP) and need <= clip - size - gap:
        cut = _cut(summary, clip - gap - need)
        text = f"{cut}{_SECTION_GAP}{section}" if cut else section
        if cut == body:  # it lacks what the body lacked, and all of that is appended
            return GuardResult(text, tuple(missing), ())
        picked = {id(fact) for fact in missing}
        dropped = tuple(fact for fact in missing_from(cut) if id(fact) not in picked)
        return GuardResult(text, tuple(missing), dropped)
    whole, lost_whole = body, {id(f) for f in missing}
    floor = min(utf16_len(body), math.ceil(clip * BODY_FLOOR_SHARE))
    measured = missing  # the facts whose section is `need` long
    # Cutting the body may cut facts out of it: shrink until what is missing fits, or the floor.
    while True:
        if missing is not measured:
            need = _section_units(missing, heading, labels, sized)
        room = clip - need - utf16_len(_SECTION_GAP)
        if utf16_len(body) <= room or utf16_len(body) <= floor:
            break
        body = _cut(summary, max(room, floor))
        missing = missing_from(body)
    gap = utf16_len(_SECTION_GAP) if summary else 0
    room = clip - utf16_len(body) - gap
    if need <= room:  # each fact fits in its fullest line: all that `_choose` would pick
        chosen = [(fact, _sized(fact, sized)[0][0]) for fact in missing]
    else:
        chosen = _choose(missing, heading, labels, room, sized)
    if not chosen:
        body = _cut(summary, clip)
        return GuardResult(body, (), tuple(missing_from(body)))
    if not any(id(fact) in lost_whole for fact, _ in chosen):
        # Cutting the body only made room to put back what the cut took: keep it whole.
        return GuardResult(whole, (), tuple(missing_from(whole)))
    section = _render(chosen, heading, labels)
    # Room the dropped facts left is given back to the summary's own text (a section of every
    # fact in its fullest line is `need` long, see `_section_units`).
    body = _cut(summary, clip - gap - (need if need <= room else utf16_len(section)))
    text = f"{body}{_SECTION_GAP}{section}" if body else section
    picked = {id(fact) for fact, _ in chosen}
    return GuardResult(
        text,
        tuple(fact for fact, _ in chosen),
        tuple(fact for fact in missing_from(body) if id(fact) not in picked),
    )


# The kinds a conversation adds to as it goes: their newest entries are the live ones.
NEWEST_FIRST: Final = frozenset(
    {"state", "file_modified", "identifier", "error", "file_read", "request"}
)


def in_guard_order(facts: Sequence[Fact]) -> list[Fact]:
    """Facts in the order the guard keeps them when room is short: by kind (`PRIORITY`), and
    within a kind the conversation adds to as it goes the newest first, as an old error is
    most often one already fixed and the newest files and names are those at work."""
    order = sorted(
        range(len(facts)),
        key=lambda n: (PRIORITY[facts[n].kind], -n if facts[n].kind in NEWEST_FIRST else n),
    )
    return [facts[n] for n in order]


def _language(summary: str, facts: Sequence[Fact]) -> str:
    """The summary's language; the facts' own when the summary has too few words to tell."""
    if next(islice(_WORDY_RE.finditer(summary), 19, None), None) is not None:  # 20 or more
        return "zh" if is_chinese([summary]) else "en"
    return "zh" if is_chinese([summary, *(f.text for f in facts)]) else "en"


def _cut(text: str, units: int) -> str:
    """The head of `text` within `units`, with "…" where it was cut."""
    if utf16_len(text) <= units:
        return text
    if units <= utf16_len(_CUT_MARK):
        return head(text, units)
    return head(text, units - utf16_len(_CUT_MARK)).rstrip() + _CUT_MARK


def _lines(fact: Fact) -> tuple[str, ...]:
    """The line for a fact, fullest first: an error with its fix, then without."""
    if fact.note:
        return (f"{fact.text}{_FIX_ARROW}{fact.note}", fact.text)
    return (fact.text,)


# A fact's lines (`_lines`) with their UTF-16 lengths, by the fact's identity (the entry holds
# the fact, so its id is not reused while remembered).
_Sized = tuple[tuple[str, int], ...]
_SIZED: Final = Table[int, tuple[Fact, _Sized]]("sized facts", 8192)


def _sized(fact: Fact, table: Bounded[int, tuple[Fact, _Sized]]) -> _Sized:
    """`_lines(fact)`, each with its UTF-16 length; remembered per fact in `table`, as most
    facts are the ledger's of the last compaction again."""
    hit = table.get(id(fact))
    if hit is not None and hit[0] is fact:
        return hit[1]
    return table.put(id(fact), (fact, tuple((line, utf16_len(line)) for line in _lines(fact))))[1]


def _section_units(
    facts: Sequence[Fact],
    heading: str,
    labels: Mapping[str, str],
    sized: Bounded[int, tuple[Fact, _Sized]],
) -> int:
    """What the section holding every one of `facts` costs, in their fullest lines: the length
    of `_render` of them, added up piece by piece (UTF-16 lengths add) without rendering."""
    bullet = utf16_len(_BULLET) + 1  # each line's newline and bullet
    units = utf16_len(f"## {heading}")
    kinds: set[str] = set()
    for fact in facts:
        if fact.kind not in kinds:
            kinds.add(fact.kind)
            units += 1 + utf16_len(labels[fact.kind])
        units += bullet + _sized(fact, sized)[0][1]
    return units


def _choose(
    facts: Sequence[Fact],
    heading: str,
    labels: Mapping[str, str],
    room: int,
    sized: Bounded[int, tuple[Fact, _Sized]],
) -> list[tuple[Fact, str]]:
    """Facts by priority, each in the fullest line that still fits; the rest are dropped."""
    chosen: list[tuple[Fact, str]] = []
    opened: set[str] = set()
    used = 0
    head_cost = utf16_len(f"## {heading}")
    bullet = 1 + utf16_len(_BULLET)  # a line's newline and bullet: the least a fact costs
    for fact in facts:
        if used + bullet > room:
            break  # not even an empty line fits any more
        opening = 0 if chosen else head_cost
        if fact.kind not in opened:
            opening += 1 + utf16_len(labels[fact.kind])
        for line, units in _sized(fact, sized):
            cost = opening + bullet + units
            if used + cost <= room:
                chosen.append((fact, line))
                opened.add(fact.kind)
                used += cost
                break
    return chosen


def _render_fullest(guarded: Sequence[_Guarded], heading: str, labels: Mapping[str, str]) -> str:
    """`_render` of every one of the facts in its fullest line, for facts in priority order (so
    each kind's facts stand together, in the order `KINDS` gives the kinds)."""
    out = [f"## {heading}"]
    kind = ""
    for fact, _, _, _, bullet in guarded:
        if fact.kind != kind:
            kind = fact.kind
            out.append(labels[kind])
        out.append(bullet)
    return "\n".join(out)


# What the guard reads of a fact: the fact, its priority, its presence test's anchor and test
# (`presence_test`), and its fullest line as a bullet.
_Guarded = tuple[Fact, int, str, Callable[[str], bool], str]


def _guarded(fact: Fact, memo: Memo) -> _Guarded:
    """What the guard reads of a fact, remembered per fact (most are the last ledger's again)."""
    table = memo[_GUARDED]
    hit = table.get(id(fact))
    if hit is not None and hit[0] is fact:
        return hit
    test, anchor = presence_test(fact, memo)
    line = _sized(fact, memo[_SIZED])[0][0]
    return table.put(id(fact), (fact, PRIORITY[fact.kind], anchor, test, _BULLET + line))


# `_guarded` by the fact's identity.
_GUARDED: Final = Table[int, _Guarded]("guarded facts", 8192)


def _render(chosen: Sequence[tuple[Fact, str]], heading: str, labels: Mapping[str, str]) -> str:
    """The "Retained facts" section: a heading, then each kind's facts, one bullet each."""
    by_kind: dict[str, list[str]] = {}
    for fact, line in chosen:
        by_kind.setdefault(fact.kind, []).append(line)
    out = [f"## {heading}"]
    for kind in KINDS:
        lines = by_kind.get(kind)
        if lines:
            out.append(labels[kind])
            out.extend(f"{_BULLET}{line}" for line in lines)
    return "\n".join(out)
