"""The guard: a ledger of facts a summary must keep, checked and topped up within the clip.

Facts are found by rule in the evicted span (red lines, the task, pinned items, files, identifiers,
errors, requests). Whatever the summary dropped is appended verbatim in a "Retained facts" section,
by priority, and the ledger rides along in the summary's metadata so later compactions keep it.
Pure: no I/O, no clock; the same span gives the same facts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from precis.core.jscompat import utf16_len
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, KIND_TASK, Message
from precis.summarize.extractive import (
    _W_OUTPUT,
    _W_SPOKEN,
    _Collector,
    _constraint_sentences,
    _Facts,
    _head,
    _is_chinese,
    _is_trivial,
    _one_line,
    _project_root,
    _Tally,
)
from precis.summarize.transcript import raw_summary_text

CONSTRAINT: Final = "constraint"
TASK: Final = "task"
PINNED: Final = "pinned"
FILE_MODIFIED: Final = "file_modified"
IDENTIFIER: Final = "identifier"
ERROR: Final = "error"
FILE_READ: Final = "file_read"
REQUEST: Final = "request"

# Most vital first: a short clip keeps the head of this list.
KINDS: Final = (
    CONSTRAINT,
    TASK,
    PINNED,
    FILE_MODIFIED,
    IDENTIFIER,
    ERROR,
    FILE_READ,
    REQUEST,
)
PRIORITY: Final[Mapping[str, int]] = MappingProxyType({kind: i for i, kind in enumerate(KINDS)})

DEFAULT_HEADING: Final = "Retained facts"
DEFAULT_HEADING_ZH: Final = "保留的事实"
_LABELS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "en": MappingProxyType(
            {
                CONSTRAINT: "Constraints:",
                TASK: "Task:",
                PINNED: "Pinned:",
                FILE_MODIFIED: "Files modified:",
                IDENTIFIER: "Identifiers:",
                ERROR: "Errors:",
                FILE_READ: "Files read:",
                REQUEST: "Requests:",
            }
        ),
        "zh": MappingProxyType(
            {
                CONSTRAINT: "约束：",
                TASK: "任务：",
                PINNED: "置顶：",
                FILE_MODIFIED: "已修改文件：",
                IDENTIFIER: "标识符：",
                ERROR: "错误：",
                FILE_READ: "已读文件：",
                REQUEST: "请求：",
            }
        ),
    }
)

# The summary body is cut before facts are dropped, but never below this share of the clip.
BODY_FLOOR_SHARE: Final = 0.35
_CUT_MARK: Final = "…"
_SECTION_GAP: Final = "\n\n"
_BULLET: Final = "- "
_FIX_ARROW: Final = " → "

# Compact sizes (UTF-16 units) of one fact's text, and how many facts of a kind one span gives.
_TASK_UNITS: Final = 200
_CONSTRAINT_UNITS: Final = 300
_PINNED_UNITS: Final = 200
_REQUEST_UNITS: Final = 120
_ERROR_UNITS: Final = 160
_FIX_UNITS: Final = 120
_MAX_MODIFIED: Final = 60
_MAX_READ: Final = 30
_MAX_IDENTIFIERS: Final = 40
_MAX_ERRORS: Final = 10
_MAX_REQUESTS: Final = 20
# Identifier kinds worth keeping even when only a tool's output named them.
_OUTPUT_ID_KINDS: Final = frozenset({"commit", "port", "pr", "email"})
_FILE_EXT_RE: Final = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_TICKET_FACT_RE: Final = re.compile(r"#(\d+)")
_WORDY_RE: Final = re.compile(r"[A-Za-z\u3400-\u9fff]")


@dataclass(frozen=True, slots=True)
class Fact:
    """One thing a summary must keep; `text` is the compact verbatim string that proves it."""

    kind: str
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
                fact = _fact_from_json(item)
                if fact is not None:
                    facts.append(fact)
        return cls(_dedupe(facts))

    def merge(self, other: Ledger | Iterable[Fact]) -> Ledger:
        """This ledger's facts, then the other's new ones; the first copy of a fact wins."""
        more = other.facts if isinstance(other, Ledger) else tuple(other)
        return Ledger(_dedupe((*self.facts, *more)))


@dataclass(frozen=True, slots=True)
class GuardResult:
    """The guarded summary, which facts were appended, and which did not fit the clip."""

    text: str
    appended: tuple[Fact, ...]
    dropped: tuple[Fact, ...]


def carry(previous: Ledger | None, new: Sequence[Fact]) -> Ledger:
    """The ledger for the next summary: everything carried so far, then this span's facts."""
    return (previous or Ledger()).merge(new)


# --- extraction -------------------------------------------------------------------------------


def extract_facts(messages: Sequence[Message], *, task: str | None = None) -> list[Fact]:
    """Every fact of the span a summary must keep, deterministic and in priority order.

    Ledgers stored on earlier summaries inside the span come first, so they are never lost.
    """
    carried: list[Fact] = []
    for message in messages:
        if message.kind in {KIND_SUMMARY, KIND_MARKER}:
            carried.extend(Ledger.from_json(message.metadata.get("ledger")).facts)
    if not (task and task.strip()):
        task = next(
            (m.content for m in messages if m.kind == KIND_TASK and m.content.strip()), None
        )
    collector = _Collector(task)
    sources = _Sources(task is not None)
    for index, message in enumerate(messages):
        if message.kind in {KIND_SUMMARY, KIND_MARKER, KIND_TASK}:
            continue
        collector.feed([message])
        sources.note(collector.facts, message.id or f"@{index}")
    facts = collector.facts
    found: list[Fact] = []
    found += _constraint_facts(facts, sources)
    if facts.task:
        found.append(Fact(TASK, _compact(facts.task, _TASK_UNITS), sources.task or "task"))
    found += _pinned_facts(messages)
    modified, read = _file_facts(facts, sources)
    found += modified
    found += _identifier_facts(facts.identifiers, sources)
    found += _error_facts(facts, sources)
    found += read
    found += _request_facts(facts, sources)
    ordered = sorted(_dedupe(found), key=lambda f: PRIORITY[f.kind])
    return list(_dedupe((*carried, *ordered)))


class _Sources:
    """Which message first gave each fact, found by watching the collector grow."""

    def __init__(self, task_given: bool) -> None:
        self.task: str | None = "task" if task_given else None
        self.ids: dict[tuple[str, str], str] = {}
        self._requests = 0

    def note(self, facts: _Facts, source: str) -> None:
        if self.task is None and facts.task:
            self.task = source
        for name, keys in (
            (CONSTRAINT, facts.constraints),
            (FILE_MODIFIED, facts.modified.terms),
            (FILE_READ, facts.read.terms),
            (IDENTIFIER, facts.identifiers.terms),
            (ERROR, facts.errors),
        ):
            for key in keys:
                self.ids.setdefault((name, key), source)
        for _, text, _ in facts.requests[self._requests :]:
            self.ids.setdefault((REQUEST, text), source)
        self._requests = len(facts.requests)

    def of(self, kind: str, key: str) -> str:
        return self.ids.get((kind, key), "task")


def _constraint_facts(facts: _Facts, sources: _Sources) -> list[Fact]:
    """The user's red lines (and the task's), verbatim; a question sets no rule."""
    return [
        Fact(CONSTRAINT, _compact(sentence, _CONSTRAINT_UNITS), sources.of(CONSTRAINT, key))
        for key, sentence in facts.constraints.items()
        if not sentence.rstrip().endswith(("?", "？"))
    ]


def _pinned_facts(messages: Sequence[Message]) -> list[Fact]:
    """Pinned messages: short ones whole, long ones by their first line."""
    out: list[Fact] = []
    for index, message in enumerate(messages):
        text = message.content.strip()
        if not message.pinned or not text:
            continue
        whole = _one_line(text)
        if utf16_len(whole) > _PINNED_UNITS:
            whole = _compact(
                next(line for line in text.splitlines() if line.strip()), _PINNED_UNITS
            )
        out.append(Fact(PINNED, whole, message.id or f"@{index}"))
    return out


def _file_facts(facts: _Facts, sources: _Sources) -> tuple[list[Fact], list[Fact]]:
    """Files written, then files read on purpose, relative to the project root when one shows."""
    modified_terms = _keyed(facts.modified)
    read_terms = [(k, t) for k, t in _keyed(facts.read) if t.weight >= _W_SPOKEN]
    root = _project_root([t.label for _, t in modified_terms]) or _project_root(
        [t.label for _, t in modified_terms] + [t.label for _, t in read_terms[:200]]
    )

    def short(path: str) -> str:
        shown = path[len(root) :] if root and path.startswith(root) else path
        return shown.removeprefix("./")

    modified: dict[str, Fact] = {}
    for key, term in modified_terms:
        path = short(term.label)
        if path and len(modified) < _MAX_MODIFIED:
            modified.setdefault(path, Fact(FILE_MODIFIED, path, sources.of(FILE_MODIFIED, key)))
    names = {p.rsplit("/", 1)[-1] for p in modified if "/" in p}
    names |= {short(t.label).rsplit("/", 1)[-1] for _, t in read_terms if "/" in t.label}
    read: dict[str, Fact] = {}
    for key, term in read_terms:
        path = short(term.label)
        if not path or path in modified or path in read or len(read) >= _MAX_READ:
            continue
        if _FILE_EXT_RE.search(path) is None or ("/" not in path and path in names):
            continue  # a directory, or a bare name a full path already covers
        read[path] = Fact(FILE_READ, path, sources.of(FILE_READ, key))
    return list(modified.values()), list(read.values())


def _keyed(tally: _Tally) -> list[tuple[str, Any]]:
    """A tally's ranked terms with the key each is filed under."""
    keys = {id(term): key for key, term in tally.terms.items()}
    return [(keys[id(term)], term) for term in tally.ranked()]


def _identifier_facts(tally: _Tally, sources: _Sources) -> list[Fact]:
    """URLs, tickets, hashes, ports, versions, codes: those a person or a call named, mostly."""
    out: list[Fact] = []
    for key, term in _keyed(tally):
        if len(out) >= _MAX_IDENTIFIERS:
            break
        if term.weight <= _W_OUTPUT and term.kind not in _OUTPUT_ID_KINDS:
            continue
        text = key.removeprefix("port ") if term.kind == "port" else key
        out.append(Fact(IDENTIFIER, text, sources.of(IDENTIFIER, key)))
    return out


def _error_facts(facts: _Facts, sources: _Sources) -> list[Fact]:
    """Error signatures on one line, newest first, each with the fix that followed if any."""
    errors = sorted(facts.errors.items(), key=lambda kv: (-kv[1].last, kv[1].first))
    return [
        Fact(
            ERROR,
            _compact(error.signature, _ERROR_UNITS),
            sources.of(ERROR, key),
            _compact(error.fix, _FIX_UNITS) if error.fix else "",
        )
        for key, error in errors[:_MAX_ERRORS]
    ]


def _request_facts(facts: _Facts, sources: _Sources) -> list[Fact]:
    """The user's later requests, by their first line, acknowledgements aside."""
    out: list[Fact] = []
    for _, text, _ in facts.requests:
        if _is_trivial(text):
            continue
        first = next((line for line in text.splitlines() if line.strip()), text)
        out.append(Fact(REQUEST, _compact(first, _REQUEST_UNITS), sources.of(REQUEST, text)))
    return out[-_MAX_REQUESTS:]


def _compact(text: str, units: int) -> str:
    """One line, cut at a word boundary within `units`: a prefix, so the full text contains it."""
    line = _one_line(text)
    if utf16_len(line) <= units:
        return line
    head = _head(line, units)
    space = head.rfind(" ")
    return (head[:space] if space >= len(head) // 2 else head).rstrip(" ,;:")


def _dedupe(facts: Iterable[Fact]) -> tuple[Fact, ...]:
    seen: dict[tuple[str, str], Fact] = {}
    for fact in facts:
        seen.setdefault((fact.kind, fact.text), fact)
    return tuple(seen.values())


def _fact_from_json(item: Any) -> Fact | None:
    if not isinstance(item, Mapping):
        return None
    kind, text = item.get("kind"), item.get("text")
    if kind not in PRIORITY or not isinstance(text, str) or not text.strip():
        return None
    source = item.get("source_id")
    note = item.get("note")
    return Fact(
        str(kind),
        text,
        source if isinstance(source, str) else "",
        note if isinstance(note, str) else "",
    )


# --- verification -----------------------------------------------------------------------------


def _fold(text: str) -> str:
    """Whitespace collapsed and case folded, the form every containment check uses."""
    return " ".join(text.split()).casefold()


def _present(fact: Fact, folded: str) -> bool:
    """Whether the folded text holds the fact; identifiers and paths must stand as whole tokens."""
    needle = _fold(fact.text)
    if fact.kind in {FILE_MODIFIED, FILE_READ}:
        needle = needle.removeprefix("./")
        if not needle or needle not in folded:
            return False  # the cheap test first; the pattern only confirms token edges
        pattern = rf"(?<![\w.\-]){re.escape(needle)}(?![\w\-]|\.\w)"
        return bool(needle) and re.search(pattern, folded) is not None
    if fact.kind == IDENTIFIER:
        ticket = _TICKET_FACT_RE.fullmatch(needle)
        if ticket is not None:
            number = ticket.group(1)
            pattern = rf"(?:#|\b(?:pr|issue|ticket)\s*#?\s*){number}(?!\d)"
            return re.search(pattern, folded) is not None
        if needle not in folded:
            return False
        pattern = rf"(?<![A-Za-z0-9]){re.escape(needle)}(?![A-Za-z0-9])"
        return re.search(pattern, folded) is not None
    return bool(needle) and needle in folded


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
    return _present(fact, _fold(text))


def missing_facts(facts: Iterable[Fact], summary_text: str) -> list[Fact]:
    """The facts the summary lost, in the order given."""
    folded = _fold(summary_text)
    return [fact for fact in facts if not _present(fact, folded)]


def retention(facts: Iterable[Fact], context_text: str) -> dict[str, float]:
    """Share of facts the context keeps, per kind and "overall": the measure `precis eval` uses."""
    folded = _fold(context_text)
    kept: dict[str, list[int]] = {}
    for fact in facts:
        tally = kept.setdefault(fact.kind, [0, 0])
        tally[0] += _present(fact, folded)
        tally[1] += 1
    out: dict[str, float] = {k: kept[k][0] / kept[k][1] for k in KINDS if k in kept}
    total = sum(t[1] for t in kept.values())
    out["overall"] = sum(t[0] for t in kept.values()) / total if total else 1.0
    return out


# --- the guard --------------------------------------------------------------------------------


def apply_guard(
    summary: str,
    ledger: Ledger,
    *,
    clip_chars: int,
    heading: str = DEFAULT_HEADING,
) -> GuardResult:
    """Append what the summary lost, by priority, so the whole stays within `clip_chars`.

    Room comes first from the summary's tail (its head is kept, the cut marked with "…"), but the
    body never shrinks below about 35 % of the clip; past that the least vital facts are dropped.
    """
    clip = max(0, clip_chars)
    facts = sorted(ledger.facts, key=lambda f: PRIORITY[f.kind])
    language = _language(summary, facts)
    if heading == DEFAULT_HEADING and language == "zh":
        heading = DEFAULT_HEADING_ZH
    labels = _LABELS[language]
    body = _cut(summary, clip)
    missing = missing_facts(facts, body)
    if not missing:
        return GuardResult(body, (), ())
    floor = min(utf16_len(body), math.ceil(clip * BODY_FLOOR_SHARE))
    # Cutting the body may cut facts out of it: shrink until what is missing fits, or the floor.
    while True:
        need = _section_units(missing, heading, labels)
        room = clip - need - utf16_len(_SECTION_GAP)
        if utf16_len(body) <= room or utf16_len(body) <= floor:
            break
        body = _cut(summary, max(room, floor))
        missing = missing_facts(facts, body)
    gap = utf16_len(_SECTION_GAP) if summary else 0
    chosen = _choose(missing, heading, labels, clip - utf16_len(body) - gap)
    if not chosen:
        body = _cut(summary, clip)
        return GuardResult(body, (), tuple(missing_facts(facts, body)))
    section = _render(chosen, heading, labels)
    # Room the dropped facts left is given back to the summary's own text.
    body = _cut(summary, clip - gap - utf16_len(section))
    text = f"{body}{_SECTION_GAP}{section}" if body else section
    picked = {id(fact) for fact, _ in chosen}
    return GuardResult(
        text,
        tuple(fact for fact, _ in chosen),
        tuple(fact for fact in missing_facts(facts, body) if id(fact) not in picked),
    )


def _language(summary: str, facts: Sequence[Fact]) -> str:
    """The summary's language; the facts' own when the summary has too few words to tell."""
    if len(_WORDY_RE.findall(summary)) >= 20:
        return "zh" if _is_chinese([summary]) else "en"
    return "zh" if _is_chinese([summary, *(f.text for f in facts)]) else "en"


def _cut(text: str, units: int) -> str:
    """The head of `text` within `units`, with "…" where it was cut."""
    if utf16_len(text) <= units:
        return text
    if units <= utf16_len(_CUT_MARK):
        return _head(text, units)
    return _head(text, units - utf16_len(_CUT_MARK)).rstrip() + _CUT_MARK


def _lines(fact: Fact) -> tuple[str, ...]:
    """The line for a fact, fullest first: an error with its fix, then without."""
    if fact.note:
        return (f"{fact.text}{_FIX_ARROW}{fact.note}", fact.text)
    return (fact.text,)


def _section_units(facts: Sequence[Fact], heading: str, labels: Mapping[str, str]) -> int:
    """What the section holding every one of `facts` costs, in their fullest lines."""
    return utf16_len(_render([(f, _lines(f)[0]) for f in facts], heading, labels))


def _choose(
    facts: Sequence[Fact], heading: str, labels: Mapping[str, str], room: int
) -> list[tuple[Fact, str]]:
    """Facts by priority, each in the fullest line that still fits; the rest are dropped."""
    chosen: list[tuple[Fact, str]] = []
    opened: set[str] = set()
    used = 0
    head_cost = utf16_len(f"## {heading}")
    for fact in facts:
        opening = 0 if chosen else head_cost
        if fact.kind not in opened:
            opening += 1 + utf16_len(labels[fact.kind])
        for line in _lines(fact):
            cost = opening + 1 + utf16_len(_BULLET) + utf16_len(line)
            if used + cost <= room:
                chosen.append((fact, line))
                opened.add(fact.kind)
                used += cost
                break
    return chosen


def _render(chosen: Sequence[tuple[Fact, str]], heading: str, labels: Mapping[str, str]) -> str:
    """The "Retained facts" section: a heading, then each kind's facts, one bullet each."""
    out = [f"## {heading}"]
    for kind in KINDS:
        lines = [line for fact, line in chosen if fact.kind == kind]
        if lines:
            out.append(labels[kind])
            out.extend(f"{_BULLET}{line}" for line in lines)
    return "\n".join(out)


# --- public wrappers over the extractive summarizer's rules -----------------------------------


def constraint_sentences(text: str) -> list[str]:
    """The sentences of `text` that state a rule, verbatim, as the ledger finds them."""
    return _constraint_sentences(text)


def is_chinese(texts: Iterable[str]) -> bool:
    """Whether Chinese dominates these texts, as the guard decides its heading's language."""
    return _is_chinese(texts)
