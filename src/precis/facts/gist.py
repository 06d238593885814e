"""What a turn said and what a call returned, in a line: the values, not the wrapping (its gist).

A progress note keeps the agent's sentences that carry something (a number, a name in code,
a quoted string, a path), not its "Let's now …" preamble; a tool's output is kept by its
values (a JSON record's fields without their keys and quotes, a short output whole, else its
first line that says something). Pure functions, the scan calls them once per message; and
`Note`, the line a turn leaves in the brief's progress notes, which the collector fills.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from precis.core.jscompat import utf16_len
from precis.core.memo import CALL_ENTRIES, Bounded
from precis.core.messages import parse_json
from precis.facts.patterns import HARNESS_LINE_RE, REASON_RE, SENTENCE_SPLIT_RE
from precis.facts.terms import terms_in
from precis.facts.text import compact, one_line, shorten

# A token that carries a value: digits, code in backticks, quotes, snake_case, dotted.names,
# CamelCase, a call or a path.
_VALUE_RE: Final = re.compile(
    r"`[^`\n]+`|\"[^\"\n]{1,60}\"|'[^'\n]{1,60}'|\b\w*\d\w*\b|\b[A-Za-z]+(?:_\w+)+\b"
    r"|\b\w+(?:\.\w+)+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b|\b\w+\(|/\w+"
)
# Words that announce the next step rather than say what was found.
_PREAMBLE_RE: Final = re.compile(
    r"(?i)^(?:(?:great|perfect|good|ok(?:ay)?|now|so|next|first|then|alright)[,!.]?\s+)*"
    r"(?:let['’]s|let me|i['’]ll|i will|we will|we['’]ll|we can now|i need to|we need to|"
    r"i am going to|i'm going to|we are going to)\b"
)
# A download's progress meter (curl, wget): no part of what came back.
_METER_RE: Final = re.compile(
    r"^\s*(?:% Total|Dload\s+Upload|\d+\s+\d+\s+\d+\s+\d+.*(?:--:--:--|\d:\d\d:\d\d))"
)
# A file shown line by line: "12→…", "12\t…", "12:…" (not "12:30").
_LISTING_RE: Final = re.compile(r"^\s*\d+(?:→|\t|:(?!\d)|\s\|)")
# A sentence that says why: a reason's words (`REASON_RE`), or one that opens "Since …".
_WHY_RE: Final = re.compile(rf"(?i)^since\b|{REASON_RE.pattern.removeprefix('(?i)')}")
# A line that only heads what follows ("INSTRUCTIONS:", "IMPORTANT TIPS:"): no sentence.
_HEADING_RE: Final = re.compile(r"^(?:#+\s*)?[\w ]{1,30}:$")
_NOTE_UNITS: Final = 220
_MIN_CUT: Final = 60
_GIST_UNITS: Final = 160
_SHORT_OUTPUT: Final = 120
_HELD_LINES: Final = 2
_MAX_VALUE: Final = 40
# How much of a sentence its weight reads (a few hundred words: far past what a note keeps).
_WEIGHED_CHARS: Final = 4000


@dataclass(slots=True)
class Note:
    """One turn of the agent's: what it said, and what its calls came back with."""

    text: str
    calls: list[str] = field(default_factory=list)
    # How many values its calls returned did a later turn use (in what it said or called with).
    used: int = 0
    # How many values what it said states.
    values: int = 0
    # Whether one of its calls changed a file (an edit, a write): the change the work made.
    wrote: bool = False


def note_text(text: str, units: int = _NOTE_UNITS) -> str:
    """A turn's prose in at most `units`: whole when short, else the sentences that carry the
    most values (a preamble counts least), in the order they were said."""
    line = one_line(text)
    if utf16_len(line) <= units:
        return line
    pieces = [one_line(p) for p in SENTENCE_SPLIT_RE.split(text)]
    sentences = [p for p in pieces if p and len(p) > 2]
    if not sentences:
        return shorten(line, units)
    weighed: Bounded[str, float] = Bounded(CALL_ENTRIES)  # a sentence said again: read once
    weights: list[float] = []
    for sentence in sentences:
        weight = weighed.get(sentence)
        weights.append(weighed.put(sentence, _weight(sentence)) if weight is None else weight)
    weights[0] += 0.5  # the opening sentence says what the turn is about
    scored = sorted(range(len(sentences)), key=lambda i: (-weights[i], i))
    picked: list[int] = []
    used = 0
    for i in scored:
        cost = utf16_len(sentences[i]) + 1
        if used + cost > units and units - used >= _MIN_CUT and weights[i] > 1:
            # A sentence that says much but runs long is kept cut rather than skipped.
            sentences[i] = shorten(sentences[i], units - used - 1)
            cost = utf16_len(sentences[i]) + 1
        if used + cost <= units:
            picked.append(i)
            used += cost
    if not picked:
        return shorten(sentences[scored[0]], units)
    return " ".join(sentences[i] for i in sorted(picked))


# A value a result gives and a later turn may use: a token with a digit (an id, an amount, a
# flight, a hash, a port), three characters or more. A token starts where a run of its
# characters starts (or at a digit), so a long run without one is read once, not once a
# character (the scan stays linear); the tokens found are those of the unanchored pattern.
_TOKEN_RE: Final = re.compile(
    r"(?:(?<![A-Za-z0-9_@:.-])|(?=\d))[A-Za-z0-9_@:.-]*\d[A-Za-z0-9_@:.-]*"
)
_MAX_TOKENS: Final = 120


def value_tokens(text: str) -> frozenset[str]:
    """The values in a text that a later step could reuse (the first few hundred)."""
    found: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        token = match.group(0).strip(".:-")
        if len(token) >= 3:
            found.append(token)
            if len(found) >= _MAX_TOKENS:
                break
    return frozenset(found)


def value_count(text: str) -> int:
    """How many values a line carries (numbers, code, quoted strings, names)."""
    return len(_VALUE_RE.findall(text))


def _weight(sentence: str) -> float:
    # A sentence is weighed by its opening: a megabyte without a stop costs no more than a page.
    sentence = sentence[:_WEIGHED_CHARS]
    values = len(_VALUE_RE.findall(sentence))
    preamble = _PREAMBLE_RE.match(sentence) is not None
    # Per character, so one long sentence does not crowd out two that say as much.
    density = values / max(1.0, utf16_len(sentence) / 60)
    # A sentence that says why (a cause, a limit: "Since only … is eligible, …") is what the
    # turn concluded: worth a value or two, however few it names.
    why = 1.0 if _WHY_RE.search(sentence) else 0.0
    return density - (2.0 if preamble else 0.0) + why


def output_gist(text: str, units: int = _GIST_UNITS) -> str:
    """A tool's output in a line: a JSON value by its values, a short output whole, else the
    first line that says something."""
    stripped = text.strip()
    if stripped[:1] in {"{", "["}:
        gist = json_gist(stripped, units)
        if gist is not None:
            return gist
    lines = [
        ln
        for ln in stripped.splitlines()
        if ln.strip() and not HARNESS_LINE_RE.match(ln) and not _METER_RE.match(ln)
    ]
    if lines and _LISTING_RE.match(lines[0]):
        return ""  # a file shown back, line by line: what it holds is the file's
    whole = one_line(" ".join(lines[:40]))
    if utf16_len(whole) <= _SHORT_OUTPUT:
        return whole
    # Its opening, as far as a line goes: a short first line ("Decompilation Found!") says
    # little by itself.
    return compact(whole, min(units, 120)) + " …"


def file_held(text: str) -> str:
    """What a file shown back line by line holds when it is a line or two (`print('Hi')`):
    its lines whole; "" for a longer file, whose reading is what its outline says."""
    numbered = [ln for ln in text.splitlines() if _LISTING_RE.match(ln)]
    held = [_LISTING_RE.sub("", ln, count=1).strip() for ln in numbered]
    held = [ln for ln in held if ln]
    if not held or len(numbered) > _HELD_LINES + 1 or len(held) > _HELD_LINES:
        return ""
    line = one_line(" ".join(held))
    return line if utf16_len(line) <= _SHORT_OUTPUT else ""


def json_gist(text: str, units: int = _GIST_UNITS) -> str | None:
    """A JSON value's leaves without keys, quotes or braces: a record's fields in order, a list's
    items apart ("(…), (…)"); an empty list is "[]". None when the text is not JSON."""
    try:
        data = parse_json(text)
    except ValueError:
        return None
    if isinstance(data, list) and not data:
        return "[]"
    if isinstance(data, list):
        shown = ", ".join(f"({' '.join(json_leaves(item))})" for item in data)
        out = f"{len(data)}: {shown}" if len(data) > 1 else shown
    else:
        out = _record(data)
    return shorten(out, units) if out else None


def _record(data: Any) -> str:
    """A record's fields: scalars as they are, a list of records as "key: (…), (…)"."""
    if not isinstance(data, Mapping):
        return " ".join(json_leaves(data))
    parts: list[str] = []
    for key, value in data.items():
        if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
            items = ", ".join(" ".join(json_leaves(v)) for v in value)
            parts.append(f"{key}: {items};")
        else:
            parts.extend(json_leaves(value))
    return " ".join(parts).rstrip(";")


def json_leaves(value: Any) -> Iterator[str]:
    """Each short scalar inside `value`, in order (booleans and nulls aside)."""
    if isinstance(value, str):
        text = one_line(value)
        if text and utf16_len(text) <= _MAX_VALUE:
            yield text
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from json_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from json_leaves(v)


def _task_weight(sentence: str) -> float:
    """What a task's sentence names: a term (host, port, path, URL …) most, then its values."""
    named = 2.0 if next(terms_in(sentence), None) is not None else 0.0
    return named + min(1.0, _weight(sentence))


def task_gist(text: str, units: int, rules: frozenset[str] = frozenset()) -> str:
    """A long task in at most `units`: its opening sentences, then the sentences that name
    something (a host, a port, a path, a URL, a ticket) or carry the most values, shown in the
    order given; the sentences in `rules` (lowercased, listed with the rules) are left out."""
    line = one_line(text)
    if utf16_len(line) <= units:
        return line
    sentences = [s for s in (one_line(p) for p in SENTENCE_SPLIT_RE.split(text)) if len(s) > 7]
    sentences = [
        s
        for s in sentences
        if not _ruled(s, rules) and not HARNESS_LINE_RE.match(s) and not _HEADING_RE.match(s)
    ]
    picked: list[int] = []
    used = 0
    opening = units * 2 // 5
    for i, sentence in enumerate(sentences[:2]):
        cost = utf16_len(sentence) + 1
        if used + cost > opening:
            break
        picked.append(i)
        used += cost
    if not picked and sentences:
        # The opening leads: whole when it takes at most half the room (a cut one says little),
        # else its head.
        if utf16_len(sentences[0]) > units // 2:
            sentences[0] = shorten(sentences[0], opening)
        picked.append(0)
        used += utf16_len(sentences[0]) + 1
    rest = sorted(
        (i for i in range(len(sentences)) if i not in picked),
        key=lambda i: (-_task_weight(sentences[i]), i),
    )
    chosen = fit_sentences(sentences, rest, units, picked, used)
    return " ".join(sentences[i] for i in chosen) if chosen else shorten(line, units)


def _ruled(sentence: str, rules: frozenset[str]) -> bool:
    """Whether a task's sentence is listed with the rules, whole or as a piece of one (a rule
    runs on past "e.g." or a line break where the task's sentences are cut)."""
    low = sentence.lower()
    return low in rules or any(low in rule for rule in rules)


def fit_sentences(
    sentences: Sequence[str],
    order: Iterable[int],
    units: int,
    picked: Sequence[int] = (),
    used: int = 0,
) -> list[int]:
    """The sentences taken in `order` while each fits beside those `picked` (taking `used`)
    within `units`, as indices in the order they were written."""
    chosen = list(picked)
    for i in order:
        cost = utf16_len(sentences[i]) + 1
        if used + cost <= units:
            chosen.append(i)
            used += cost
    return sorted(chosen)


_COURTESY: Final = frozenset(
    [
        "thanks",
        "thank",
        "you",
        "great",
        "perfect",
        "ok",
        "okay",
        "sure",
        "hello",
        "hi",
        "hey",
        "i",
        "understand",
        "see",
        "got",
        "it",
        "sounds",
        "good",
        "so",
        "much",
        "very",
        "awesome",
        "cool",
        "alright",
        "right",
        "appreciate",
        "that",
        "for",
    ]
)
_WORD_RE: Final = re.compile(r"[a-z']+")


def request_gist(text: str) -> str:
    """A request without its courtesies ("Thank you!", "Great, thanks.", "I understand."), on
    one line; the request itself is left as written."""
    kept: list[str] = []
    seen: Bounded[str, str] = Bounded(CALL_ENTRIES)  # a sentence met again: its line, "" if polite
    for part in SENTENCE_SPLIT_RE.split(text):
        line = seen.get(part)
        if line is None:
            line = one_line(part)
            line = seen.put(part, "" if _is_courtesy(line) else line)
        if line:
            kept.append(line)
    return " ".join(kept) if kept else one_line(text)


def _is_courtesy(sentence: str) -> bool:
    words = _WORD_RE.findall(sentence.lower())
    return 0 < len(words) <= 5 and all(w in _COURTESY for w in words)


# What a source file defines, line by line: a definition keyword and its name (def, class,
# function, fn, func, struct …), an Elixir-style DSL entry ("computer :name do"), an event a
# view handles or pushes, a client hook, a JS import.
_DEFINITION_RE: Final = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?"
    r"(?:defmodule|defp?|defmacrop?|class|interface|function\*?|fn|func|struct|enum|trait|"
    r"module|type)\s+([A-Za-z_][\w.!?]*)(\([^)]*\)?)?"
    r"|^\s*([a-z_]\w*)\s+:([a-z_]\w*)(?:,|\s+do\b)"
    r"|^\s*Hooks\.(\w+)\s*="
)
_EVENT_RE: Final = re.compile(
    r"\b(?:handle_event|push_event|handleEvent|pushEvent)\(\s*(?:\w+,\s*)?[\"']([\w:.-]+)[\"']"
    r"|phx-hook=[\"'](\w+)[\"']"
)
_IMPORT_RE: Final = re.compile(r"^\s*import\s.*?from\s+[\"']([^\"']+)[\"']")
_OUTLINE_UNITS: Final = 1500


# A call of a snake_case function: `update_computer_inputs(`, `load_panes(`.
_CALL_RE: Final = re.compile(r"(?<![\w.:])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\(")
_DEFINED_RE: Final = re.compile(
    r"\b(?:def|defp|defmacro|fn|fun|func|function|let|const)\s+([a-z]\w*)"
)


def calls_made(text: str) -> dict[str, int]:
    """The snake_case functions a source file calls that it does not define, with how often:
    what the code is built on (`update_computer_inputs`), for lookup hints."""
    defined = set(_DEFINED_RE.findall(text))
    counts: dict[str, int] = {}
    for name in _CALL_RE.findall(text):
        if name not in defined:
            counts[name] = counts.get(name, 0) + 1
    return counts


def code_outline(text: str, units: int = _OUTLINE_UNITS) -> str:
    """What a source file the agent read defines, in a line: its modules, classes and
    functions (with their arity), the events it handles or pushes, its hooks and imports."""
    names: list[str] = []
    events: list[str] = []
    imports: list[str] = []
    for line in text.splitlines():
        if len(line) > 300:
            continue
        found = _DEFINITION_RE.match(line)
        if found is not None:
            name, args, dsl, atom, hook = found.groups()
            if name:
                names.append(f"{name}/{_arity(args)}" if args and args.endswith(")") else name)
            elif dsl and atom:
                names.append(f"{dsl} :{atom}")
            elif hook:
                names.append(f"hook {hook}")
        for event in _EVENT_RE.finditer(line):
            events.append(event.group(1) or f"hook {event.group(2)}")
        imported = _IMPORT_RE.match(line)
        if imported is not None:
            imports.append(imported.group(1))
    bases: dict[str, str] = {}
    for name in names:  # each function once: its first form (with its arity when shown)
        bases.setdefault(name.split("/", 1)[0], name)
    parts = [", ".join(bases.values())]
    if events:
        parts.append("events " + ", ".join(dict.fromkeys(events)))
    if imports:
        parts.append("imports " + ", ".join(dict.fromkeys(imports)))
    outline = "; ".join(p for p in parts if p)
    return shorten(outline, units) if outline else ""


def _arity(args: str) -> int:
    inner = args.strip("()").strip()
    if not inner:
        return 0
    depth = 0
    count = 1
    for ch in inner:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            count += 1
    return count
