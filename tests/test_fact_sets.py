"""The hand-made fact sets of tests/data/facts/ keep their format (see its README).

Standard library and pytest only: the judge must not lean on the code it judges.
"""

from __future__ import annotations

import contextlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
FACTS_DIR = DATA / "facts"
TRAJECTORIES = DATA / "trajectories"
REFERENCES = TRAJECTORIES / "reference_summaries"

KINDS = {"task", "state", "constraint", "decision", "file", "identifier", "error", "open_item"}
STATUSES = {"done", "in_progress", "next", "blocked"}
FACTS_PER_POINT = (15, 35)
PROBES_PER_POINT = (3, 6)
MAX_VARIANT_WORDS = 6

FACT_FILES = sorted(FACTS_DIR.glob("*.json"))


def normalise(text: str) -> str:
    """The README's normalisation: NFKC, casefold, no backticks or asterisks, one space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"\s+", " ", text)


def _strings(value: Any) -> list[str]:
    """Every string inside a decoded JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [str(value)] if value is not None else []


def message_text(message: dict[str, Any]) -> str:
    """What a reader sees of one message: its content, and its tool calls' names and arguments."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        parts.append(call.get("name") or "")
        arguments = call.get("arguments") or ""
        parts.append(arguments)
        with contextlib.suppress(TypeError, ValueError):
            parts.extend(_strings(json.loads(arguments)))
    return "\n".join(parts)


def load_conversation(name: str) -> list[dict[str, Any]]:
    path = TRAJECTORIES / f"{name}.jsonl"
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def reference_lengths(name: str) -> dict[int, int]:
    """message_index -> length of Claude Code's summary there, for conversations it compacted."""
    path = REFERENCES / f"{name}.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    compactions = data.get("compactions") or [data]
    return {c["message_index"]: len(c["summary"]) for c in compactions if "summary" in c}


def expected_budget(messages: list[dict[str, Any]], index: int, references: dict[int, int]) -> int:
    if index in references:
        return references[index]
    chars = sum(len(m.get("content") or "") for m in messages[:index])
    return min(12_000, max(2_000, chars // 10))


def splits_a_tool_call(messages: list[dict[str, Any]], index: int) -> bool:
    """True when a call in messages[:index] has its result at or after index."""
    answered_later = {m.get("tool_call_id") for m in messages[index:] if m.get("role") == "tool"}
    issued = {
        call.get("id")
        for m in messages[:index]
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    }
    return bool(issued & answered_later)


def test_there_are_fact_sets() -> None:
    assert FACT_FILES, f"no fact sets in {FACTS_DIR}"


@pytest.mark.parametrize("path", FACT_FILES, ids=lambda p: p.stem)
def test_fact_set_format(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    name = data.get("conversation")
    assert name == path.stem, f"{path.name}: conversation {name!r} is not the file's name"
    assert (TRAJECTORIES / f"{name}.jsonl").exists(), f"{path.name}: no conversation {name}"
    messages = load_conversation(name)
    references = reference_lengths(name)
    points = data.get("points")
    assert isinstance(points, list) and points, f"{path.name}: no points"
    indexes = [p.get("message_index") for p in points]
    assert len(set(indexes)) == len(indexes), f"{path.name}: two points at one message_index"
    for point in points:
        check_point(path.name, messages, references, point)


def check_point(
    file: str,
    messages: list[dict[str, Any]],
    references: dict[int, int],
    point: dict[str, Any],
) -> None:
    index = point.get("message_index")
    where = f"{file} @{index}"
    assert isinstance(index, int) and 0 < index <= len(messages), f"{where}: index out of range"
    assert not splits_a_tool_call(messages, index), f"{where}: splits a tool call from its result"
    budget = point.get("budget_chars")
    assert budget == expected_budget(messages, index, references), f"{where}: budget_chars"

    text = normalise("\n".join(message_text(m) for m in messages[:index]))
    facts = point.get("facts")
    assert isinstance(facts, list), f"{where}: facts is not a list"
    low, high = FACTS_PER_POINT
    assert low <= len(facts) <= high, f"{where}: {len(facts)} facts, want {low}-{high}"
    ids = [f.get("id") for f in facts]
    assert len(set(ids)) == len(ids), f"{where}: fact ids repeat"
    for fact in facts:
        check_fact(f"{where} {fact.get('id')}", fact, text)

    probes = point.get("probes")
    assert isinstance(probes, list), f"{where}: probes is not a list"
    low, high = PROBES_PER_POINT
    assert low <= len(probes) <= high, f"{where}: {len(probes)} probes, want {low}-{high}"
    for number, probe in enumerate(probes):
        at = f"{where} probe {number}"
        assert isinstance(probe.get("question"), str) and probe["question"].strip(), at
        answers = probe.get("answer")
        assert isinstance(answers, list) and answers, f"{at}: no answer"
        assert all(isinstance(a, str) and a.strip() for a in answers), f"{at}: empty answer"
        assert any(normalise(a) in text for a in answers), f"{at}: no answer occurs in the text"
        cited = probe.get("facts")
        assert isinstance(cited, list) and cited, f"{at}: cites no fact"
        missing = set(cited) - set(ids)
        assert not missing, f"{at}: cites unknown facts {sorted(missing)}"


def check_fact(where: str, fact: dict[str, Any], text: str) -> None:
    assert isinstance(fact.get("id"), str) and fact["id"], f"{where}: no id"
    kind = fact.get("kind")
    assert kind in KINDS, f"{where}: kind {kind!r}"
    if kind == "state":
        assert fact.get("status") in STATUSES, f"{where}: status {fact.get('status')!r}"
    else:
        assert "status" not in fact, f"{where}: status on a {kind} fact"
    note = fact.get("note")
    assert isinstance(note, str) and note.strip(), f"{where}: no note"
    groups = fact.get("match")
    assert isinstance(groups, list) and groups, f"{where}: no match groups"
    for group in groups:
        assert isinstance(group, list) and group, f"{where}: empty match group"
        for variant in group:
            assert isinstance(variant, str) and normalise(variant).strip(), f"{where}: {variant!r}"
            words = len(normalise(variant).split())
            assert words <= MAX_VARIANT_WORDS, f"{where}: variant {variant!r} is {words} words"
        found = [v for v in group if normalise(v) in text]
        assert found, f"{where}: no variant of {group} occurs in the conversation"
