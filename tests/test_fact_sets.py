"""The hand-made fact sets of tests/data/facts/ keep the format their README defines.

These files are the independent judge of what a summary must still carry, so this test reads
them with the standard library only: nothing of precis is imported, and a fact set cannot lean
on precis's own extractor to pass. Besides the shape (kinds, statuses, unique ids, probes that
name existing facts), it checks each point against its conversation: the point does not split a
tool call from its result, the budget follows the README's rule, and every match group has a
variant the conversation itself said before the point — no fact asks for what was never said.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
FACTS = DATA / "facts"
TRAJECTORIES = DATA / "trajectories"
REFERENCES = TRAJECTORIES / "reference_summaries"

KINDS = {"task", "state", "constraint", "decision", "file", "identifier", "error", "open_item"}
STATUSES = {"done", "in_progress", "next", "blocked"}

FACT_FILES = sorted(FACTS.glob("*.json"))


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
        return [s for k, v in value.items() for s in [str(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [str(value)] if value is not None else []


def conversation_text(messages: list[dict[str, Any]]) -> str:
    """What the messages said: their content and their tool calls (name and arguments)."""
    parts: list[str] = []
    for message in messages:
        parts.append(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            parts.append(str(call.get("name", "")))
            arguments = call.get("arguments", "")
            try:
                parts.extend(_strings(json.loads(arguments)))
            except (TypeError, ValueError):
                parts.append(str(arguments))
    return normalise("\n".join(parts))


def load_messages(conversation: str) -> list[dict[str, Any]]:
    path = TRAJECTORIES / f"{conversation}.jsonl"
    assert path.is_file(), f"no trajectory {path.name} for this fact set"
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def reference_lengths(conversation: str) -> dict[int, int]:
    """message_index → length of Claude Code's summary there, for conversations that have one."""
    path = REFERENCES / f"{conversation}.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {c["message_index"]: len(c["summary"]) for c in data["compactions"]}


def expected_budget(messages: list[dict[str, Any]], index: int) -> int:
    total = sum(len(str(m.get("content") or "")) for m in messages[:index])
    return min(12_000, max(2_000, total // 10))


def test_there_are_fact_sets() -> None:
    assert FACT_FILES, f"no fact sets in {FACTS}"


@pytest.mark.parametrize("path", FACT_FILES, ids=[p.stem for p in FACT_FILES])
def test_fact_set_format(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert set(data) == {"conversation", "points"}, f"{path.name}: top-level keys {sorted(data)}"
    assert data["conversation"] == path.stem, f"{path.name}: names {data['conversation']!r}"
    points = data["points"]
    assert isinstance(points, list) and points, f"{path.name}: no points"
    indexes = [p["message_index"] for p in points]
    assert len(set(indexes)) == len(indexes), f"{path.name}: two points at one message_index"

    for point in points:
        where = f"{path.name} @{point.get('message_index')}"
        assert set(point) == {"message_index", "budget_chars", "facts", "probes"}, where
        assert isinstance(point["message_index"], int), f"{where}: message_index not an int"
        assert isinstance(point["budget_chars"], int), f"{where}: budget_chars not an int"

        ids: set[str] = set()
        for fact in point["facts"]:
            fid = fact.get("id")
            assert isinstance(fid, str) and fid, f"{where}: a fact without an id"
            assert fid not in ids, f"{where}: fact id {fid} twice"
            ids.add(fid)
            assert fact.get("kind") in KINDS, f"{where} {fid}: kind {fact.get('kind')!r}"
            if fact["kind"] == "state":
                assert fact.get("status") in STATUSES, f"{where} {fid}: status"
                allowed = {"id", "kind", "status", "note", "match"}
            else:
                assert "status" not in fact, f"{where} {fid}: status on a {fact['kind']} fact"
                allowed = {"id", "kind", "note", "match"}
            assert set(fact) == allowed, f"{where} {fid}: keys {sorted(fact)}"
            note = fact["note"]
            assert isinstance(note, str) and note.strip(), f"{where} {fid}: no note"
            groups = fact["match"]
            assert isinstance(groups, list) and groups, f"{where} {fid}: no match groups"
            for group in groups:
                assert isinstance(group, list) and group, f"{where} {fid}: an empty group"
                for variant in group:
                    assert isinstance(variant, str), f"{where} {fid}: variant {variant!r}"
                    assert normalise(variant).strip(), f"{where} {fid}: a blank variant"

        probes = point["probes"]
        assert isinstance(probes, list), f"{where}: probes not a list"
        for probe in probes:
            assert set(probe) == {"question", "answer", "facts"}, f"{where}: probe keys"
            assert isinstance(probe["question"], str) and probe["question"].strip(), where
            answers = probe["answer"]
            assert isinstance(answers, list) and answers, f"{where}: probe without answers"
            assert all(isinstance(a, str) and normalise(a).strip() for a in answers), where
            assert probe["facts"], f"{where}: probe {probe['question']!r} names no fact"
            missing = [f for f in probe["facts"] if f not in ids]
            assert not missing, f"{where}: probe {probe['question']!r} names {missing}"


@pytest.mark.parametrize("path", FACT_FILES, ids=[p.stem for p in FACT_FILES])
def test_fact_set_fits_its_conversation(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    messages = load_messages(data["conversation"])
    references = reference_lengths(data["conversation"])

    for point in data["points"]:
        index = point["message_index"]
        where = f"{path.name} @{index}"
        assert 0 < index <= len(messages), f"{where}: outside 1..{len(messages)}"

        called = {c["id"] for m in messages[:index] for c in m.get("tool_calls") or []}
        answered_later = {m.get("tool_call_id") for m in messages[index:]}
        split = sorted(called & answered_later)
        assert not split, f"{where}: splits tool calls {split} from their results"

        if index in references:
            budget = references[index]
            assert point["budget_chars"] == budget, f"{where}: budget is not the reference's"
        else:
            budget = expected_budget(messages, index)
            assert abs(point["budget_chars"] - budget) <= 1, f"{where}: budget should be {budget}"

        said = conversation_text(messages[:index])
        for fact in point["facts"]:
            for group in fact["match"]:
                assert any(normalise(v) in said for v in group), (
                    f"{where} {fact['id']}: no variant of {group} occurs in messages [0:{index}]"
                )
