"""Records a tool looked up: a JSON object that names itself by an id, as one line.

An API-style agent (bookings, tickets, accounts) works from the records its lookups return: a
reservation's flights, who paid and how much, its status. Each is read into a line that leads
with its id, newest version winning, in two forms: its short values in order (nested records
by theirs, `flights: HAT028 2024-05-21 1859, …`), and a lean one of its codes and amounts alone
for a tight brief (`JG7FMM: business; HAT028, HAT277; credit_card_2929732 7136`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from precis.core.jscompat import utf16_len
from precis.core.messages import parse_json
from precis.facts.gist import json_leaves
from precis.facts.text import shorten

# A field that names the record (`id`, `reservation_id`, `orderId`).
_ID_FIELD_RE: Final = re.compile(r"^(?:id|[A-Za-z]\w*_id|[a-z]\w*Id)$")
# A value that is a code: letters with digits, or words joined by underscores.
_CODE_RE: Final = re.compile(
    r"^(?=[\w.@+-]*[A-Za-z])(?=[\w.@+-]*(?:\d|[A-Za-z]_[A-Za-z]))[\w.@+-]+$"
)
_MAX_VALUE: Final = 32


@dataclass(frozen=True, slots=True)
class Record:
    """One record: its id, its values in a line, and the lean line of its codes alone."""

    key: str
    text: str
    lean: str


# The most a record's line and its lean line take, and the longest id a record may have.
RECORD_UNITS: Final = 320
LEAN_UNITS: Final = 160
_MAX_ID: Final = 40
MAX_RECORDS: Final = 40


def read_record(text: str, fallback: str = "") -> Record | None:
    """The record a tool's output is, when it is a JSON object with an id field (or the id
    the call asked for, `fallback`); None for anything else."""
    stripped = text.strip()
    if not stripped.startswith("{") or not stripped.endswith("}"):
        return None
    try:
        data = parse_json(stripped)
    except ValueError:
        return None
    if not isinstance(data, dict) or not data:
        return None
    field = next((k for k, v in data.items() if _ID_FIELD_RE.match(k) and _named(v)), None)
    key = str(data[field]) if field is not None else fallback
    if not key or utf16_len(key) > _MAX_ID:
        return None
    full: list[str] = []
    lean: list[str] = []
    seen: set[str] = set()  # codes and dates the lean line shows once
    for name, value in data.items():
        if name == field or (_ID_FIELD_RE.match(name) and _named(value)):
            continue  # the record's own id, or a reference to another record
        if isinstance(value, Mapping | list):
            members = _members(value)
            if members is not None:
                full.append(f"{name}: " + ", ".join(" ".join(_short(m)) for m in members) + ";")
                codes = [" ".join(_codes(m, seen)) for m in members]
                lean.append(", ".join(c for c in codes if c) + ";")
                continue
            full.extend(_short(value))
            lean.extend(v for v in _short(value) if _CODE_RE.match(v))
            continue
        shown = list(_short(value))
        full.extend(shown)
        lean.extend(v for v in shown if _CODE_RE.match(v) or _is_status(v))
    body = _line(full)
    if not body:
        return None
    return Record(key, shorten(body, RECORD_UNITS), shorten(_line(lean), LEAN_UNITS))


def file_record(records: dict[str, Record], record: Record) -> Record:
    """File `record` by its id: a newer version replaces the older one and moves last; past
    `MAX_RECORDS` the one seen longest ago goes."""
    records.pop(record.key, None)
    records[record.key] = record
    if len(records) > MAX_RECORDS:
        del records[next(iter(records))]
    return record


def _named(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and str(value) != ""


def _members(value: Mapping[str, Any] | list[Any]) -> list[Mapping[str, Any]] | None:
    """The records a field holds (a list of them, or a mapping of them by id); None else."""
    items = list(value.values()) if isinstance(value, Mapping) else value
    if items and all(isinstance(v, Mapping) for v in items):
        return items
    return None


def _short(value: Any) -> Iterator[str]:
    """Each short scalar inside `value`, in order: one word or code, a number; a record's own
    bookkeeping time (`2024-05-11T08:28:51`) is rarely what the work turns on."""
    for leaf in json_leaves(value):
        if utf16_len(leaf) <= _MAX_VALUE and " " not in leaf and not _is_stamp(leaf):
            yield leaf


def _is_date(value: str) -> bool:
    return len(value) == 10 and value[4] == value[7] == "-" and value.replace("-", "").isdigit()


def _is_stamp(value: str) -> bool:
    return len(value) > 16 and _is_date(value[:10]) and value[10] in "T "


def _is_status(value: str) -> bool:
    """A short lowercase word a record states itself by (a status, a class, a kind)."""
    return 1 < len(value) <= 16 and value.replace("_", "").isalpha() and value.islower()


def _codes(member: Mapping[str, Any], seen: set[str]) -> Iterator[str]:
    """A nested record's codes, dates and amounts when it has a code (a flight, its day and
    price; a payment and its sum); a code or date already shown is not repeated."""
    values = list(_short(member))
    if not any(_CODE_RE.match(v) for v in values):
        return
    for v in values:
        if _CODE_RE.match(v) or _is_date(v):
            if v not in seen:
                seen.add(v)
                yield v
        elif v.lstrip("-").replace(".", "", 1).isdigit():
            yield v


def _line(values: list[str]) -> str:
    """Values in order, each once, a nested list's closing ";" kept only between parts."""
    seen: set[str] = set()
    out: list[str] = []
    for value in values:
        if value in seen and not value.endswith(";"):
            continue
        seen.add(value)
        if value == ";":
            continue
        out.append(value)
    return " ".join(out).strip().rstrip(";")
