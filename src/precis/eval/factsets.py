"""Hand-made fact sets (`tests/data/facts/README.md`): read, checked, and normalised once.

A fact set names a conversation and, per compaction point, the facts a person taking the work
over must still have and the probe questions that need them. Anything malformed is refused with
one line naming the file and the field (`facts.json: points[1].facts[3].kind: …`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precis.core.errors import InvalidInput
from precis.eval.judge import KINDS, normalise

STATUSES = ("done", "in_progress", "next", "blocked")


@dataclass(frozen=True, slots=True)
class JudgedFact:
    """One fact: its kind (and status, for state), the note for people, and its match groups
    (each a tuple of acceptable variants, normalised)."""

    id: str
    kind: str
    match: tuple[tuple[str, ...], ...]
    status: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Probe:
    """A question whose answer needs some facts, and its acceptable exact answers."""

    question: str
    answers: tuple[str, ...]
    facts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Point:
    """What a summary of messages [0:message_index] must keep, within `budget_chars`."""

    message_index: int
    budget_chars: int
    facts: tuple[JudgedFact, ...]
    probes: tuple[Probe, ...] = ()


@dataclass(frozen=True, slots=True)
class FactSet:
    """One conversation's fact set, and the file it came from."""

    conversation: str
    points: tuple[Point, ...]
    source: Path


def fact_set_files(path: Path) -> list[Path]:
    """The fact-set files a path names: the file itself, or a folder's `*.json` in name order."""
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise InvalidInput(f"{path}: no fact sets (*.json) in this folder")
        return files
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file or folder")
    return [path]


def load_fact_sets(path: Path) -> list[FactSet]:
    """Every fact set under `path` (a file or a folder), checked."""
    return [load_fact_set(p) for p in fact_set_files(path)]


def load_fact_set(path: Path) -> FactSet:
    """One fact-set file, checked field by field; the first problem is raised as one line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not UTF-8 text ({exc.reason})") from None
    where = _Where(str(path))
    if not isinstance(data, dict):
        where.fail("", "expected a JSON object with conversation and points")
    conversation = _string(data.get("conversation"), where, "conversation")
    raw_points = data.get("points")
    if not isinstance(raw_points, list) or not raw_points:
        where.fail("points", "expected a non-empty list of compaction points")
    points = tuple(_point(p, where, f"points[{i}]") for i, p in enumerate(raw_points))
    return FactSet(conversation, points, path)


class _Where:
    """The file being read, for messages that name the field at fault."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, field: str, problem: str) -> Any:
        place = f"{self.file}: {field}" if field else self.file
        raise InvalidInput(f"{place}: {problem}")


def _string(value: Any, where: _Where, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        where.fail(field, f"expected a non-empty string, got {value!r}")
    return str(value)


def _positive(value: Any, where: _Where, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        where.fail(field, f"expected a positive integer, got {value!r}")
    return int(value)


def _strings(value: Any, where: _Where, field: str) -> tuple[str, ...]:
    """A string or a non-empty list of strings, as a tuple."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        where.fail(field, f"expected a string or a non-empty list of strings, got {value!r}")
    for i, item in enumerate(items):
        _string(item, where, f"{field}[{i}]")
    return tuple(items)


def _point(raw: Any, where: _Where, field: str) -> Point:
    if not isinstance(raw, dict):
        where.fail(field, "expected an object")
    index = _positive(raw.get("message_index"), where, f"{field}.message_index")
    budget = _positive(raw.get("budget_chars"), where, f"{field}.budget_chars")
    raw_facts = raw.get("facts")
    if not isinstance(raw_facts, list) or not raw_facts:
        where.fail(f"{field}.facts", "expected a non-empty list of facts")
    facts = tuple(_fact(f, where, f"{field}.facts[{i}]") for i, f in enumerate(raw_facts))
    seen: set[str] = set()
    for i, fact in enumerate(facts):
        if fact.id in seen:
            where.fail(f"{field}.facts[{i}].id", f"{fact.id!r} is used twice in this point")
        seen.add(fact.id)
    raw_probes = raw.get("probes", [])
    if not isinstance(raw_probes, list):
        where.fail(f"{field}.probes", "expected a list of probes")
    probes = tuple(_probe(p, where, f"{field}.probes[{i}]", seen) for i, p in enumerate(raw_probes))
    return Point(index, budget, facts, probes)


def _fact(raw: Any, where: _Where, field: str) -> JudgedFact:
    if not isinstance(raw, dict):
        where.fail(field, "expected an object")
    fact_id = _string(raw.get("id"), where, f"{field}.id")
    kind = raw.get("kind")
    if kind not in KINDS:
        where.fail(f"{field}.kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    status = raw.get("status")
    if kind == "state" and status not in STATUSES:
        where.fail(f"{field}.status", f"a state fact needs one of {', '.join(STATUSES)}")
    if kind != "state" and status is not None:
        where.fail(f"{field}.status", f"only a state fact has a status (this one is {kind})")
    note = raw.get("note", "")
    if not isinstance(note, str):
        where.fail(f"{field}.note", f"expected a string, got {note!r}")
    return JudgedFact(
        fact_id, str(kind), _match(raw.get("match"), where, f"{field}.match"), status, note
    )


def _match(raw: Any, where: _Where, field: str) -> tuple[tuple[str, ...], ...]:
    """Groups of variants, normalised; a group may be a lone string."""
    if not isinstance(raw, list) or not raw:
        where.fail(field, "expected a non-empty list of groups (each a list of variants)")
    groups: list[tuple[str, ...]] = []
    for i, group in enumerate(raw):
        variants = _strings(group, where, f"{field}[{i}]")
        folded = tuple(dict.fromkeys(normalise(v) for v in variants))
        if not all(v.strip() for v in folded):
            where.fail(f"{field}[{i}]", "a variant is empty once normalised")
        groups.append(folded)
    return tuple(groups)


def _probe(raw: Any, where: _Where, field: str, ids: set[str]) -> Probe:
    if not isinstance(raw, dict):
        where.fail(field, "expected an object")
    question = _string(raw.get("question"), where, f"{field}.question")
    answers = _strings(raw.get("answer"), where, f"{field}.answer")
    facts = _strings(raw["facts"], where, f"{field}.facts") if "facts" in raw else ()
    unknown = [f for f in facts if f not in ids]
    if unknown:
        where.fail(f"{field}.facts", f"no fact with id {unknown[0]!r} in this point")
    return Probe(question, answers, facts)
