"""The hand-made fact sets of tests/data/facts follow the format their README defines.

Standard library only: the judge must not lean on the code it judges.
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
FACTS = DATA / "facts"
TRAJECTORIES = DATA / "trajectories"
REFERENCES = TRAJECTORIES / "reference_summaries"

KINDS = {"task", "state", "constraint", "decision", "file", "identifier", "error", "open_item"}
STATUSES = {"done", "in_progress", "next", "blocked"}
FACT_FILES = sorted(FACTS.glob("*.json"))


def normalise(text: str) -> str:
    """The README's matching form: NFKC, casefold, no backticks or asterisks, one space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"\s+", " ", text)


def load_messages(conversation: str) -> list[dict[str, Any]]:
    path = TRAJECTORIES / f"{conversation}.jsonl"
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def message_text(message: dict[str, Any]) -> str:
    """What a message said: its content, and its tool calls' names and arguments."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        parts.append(call.get("name", ""))
        arguments = call.get("arguments", "")
        parts.append(arguments)
        with contextlib.suppress(TypeError, ValueError):
            parts.extend(_strings(json.loads(arguments)))
    return "\n".join(parts)


def splits_a_tool_call(messages: list[dict[str, Any]], index: int) -> bool:
    """True when cutting before messages[index] parts a tool call from its result."""
    if index < len(messages) and messages[index].get("role") == "tool":
        return True
    before = messages[index - 1]
    ids = {call.get("id") for call in before.get("tool_calls") or []}
    return any(m.get("tool_call_id") in ids for m in messages[index:])


def reference_point(conversation: str) -> tuple[int, int] | None:
    path = REFERENCES / f"{conversation}.json"
    if not path.exists():
        return None
    reference = json.loads(path.read_text(encoding="utf-8"))
    return int(reference["message_index"]), len(reference["summary"])


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_there_are_fact_sets() -> None:
    assert FACT_FILES, f"no fact sets in {FACTS}"


def _check_budget(where: str, point: dict[str, Any], messages: list[Any], ref: Any) -> None:
    index, budget = point["message_index"], point.get("budget_chars")
    if ref is not None and ref[0] == index:
        assert budget == ref[1], f"{where}: budget_chars {budget}, the reference's is {ref[1]}"
        return
    chars = sum(len(m.get("content") or "") for m in messages[:index])
    expected = min(max(chars / 10, 2000), 12000)
    assert isinstance(budget, int) and abs(budget - expected) <= 1, (
        f"{where}: budget_chars {budget}, the rule gives {expected:.0f}"
    )


def _check_fact(where: str, fact: dict[str, Any]) -> None:
    at = f"{where} {fact.get('id')}"
    assert isinstance(fact.get("id"), str) and fact["id"], f"{at}: no id"
    assert fact.get("kind") in KINDS, f"{at}: kind {fact.get('kind')!r} unknown"
    status = fact.get("status")
    if fact["kind"] == "state" or status is not None:
        assert status in STATUSES, f"{at}: status {status!r} is not one of {sorted(STATUSES)}"
    assert isinstance(fact.get("note"), str) and fact["note"].strip(), f"{at}: no note"
    groups = fact.get("match")
    assert isinstance(groups, list) and groups, f"{at}: no match groups"
    for group in groups:
        assert isinstance(group, list) and group, f"{at}: an empty match group"
        assert all(isinstance(v, str) and v.strip() for v in group), f"{at}: a blank variant"


def _check_probe(where: str, probe: dict[str, Any], ids: set[str]) -> None:
    question = probe.get("question")
    assert isinstance(question, str) and question.strip(), f"{where}: a probe without a question"
    at = f"{where} probe {question!r}"
    answers = probe.get("answer")
    assert isinstance(answers, list) and answers, f"{at}: no answer"
    assert all(isinstance(a, str) and a.strip() for a in answers), f"{at}: a blank answer"
    linked = probe.get("facts")
    assert isinstance(linked, list) and linked, f"{at}: names no facts"
    assert not set(linked) - ids, f"{at}: names unknown facts {sorted(set(linked) - ids)}"


@pytest.mark.parametrize("path", FACT_FILES, ids=lambda p: p.stem)
def test_fact_set_format(path: Path) -> None:
    data = _load(path)
    conversation = data.get("conversation")
    assert conversation == path.stem, f"{path.name}: conversation {conversation!r} is not its name"
    assert (TRAJECTORIES / f"{conversation}.jsonl").exists(), f"{path.name}: no such conversation"
    messages = load_messages(conversation)
    points = data.get("points")
    assert isinstance(points, list) and points, f"{path.name}: no points"
    reference = reference_point(conversation)
    previous = 0
    for point in points:
        index = point.get("message_index")
        where = f"{path.name} @ {index}"
        assert isinstance(index, int) and previous < index <= len(messages), (
            f"{where}: message_index not in ({previous}, {len(messages)}]"
        )
        previous = index
        assert not splits_a_tool_call(messages, index), f"{where}: parts a tool call and its result"
        _check_budget(where, point, messages, reference)
        facts = point.get("facts")
        assert isinstance(facts, list) and facts, f"{where}: no facts"
        ids = [fact.get("id") for fact in facts]
        assert len(ids) == len(set(ids)), f"{where}: fact ids repeat"
        for fact in facts:
            _check_fact(where, fact)
        probes = point.get("probes")
        assert isinstance(probes, list) and probes, f"{where}: no probes"
        for probe in probes:
            _check_probe(where, probe, set(ids))


@pytest.mark.parametrize("path", FACT_FILES, ids=lambda p: p.stem)
def test_facts_ask_only_for_what_the_conversation_said(path: Path) -> None:
    data = _load(path)
    messages = load_messages(data["conversation"])
    for point in data["points"]:
        index = point["message_index"]
        said = normalise("\n".join(message_text(m) for m in messages[:index]))
        for fact in point["facts"]:
            for group in fact["match"]:
                assert any(normalise(v) in said for v in group), (
                    f"{path.name} @ {index} {fact['id']}: none of {group} is in [0:{index}]"
                )
        for probe in point["probes"]:
            assert any(normalise(a) in said for a in probe["answer"]), (
                f"{path.name} @ {index}: no answer to {probe['question']!r} is in [0:{index}]"
            )


def test_normalise_follows_the_readme() -> None:
    assert normalise("**Done**:\t`abc1234`\n\n ＡＢ") == "done: abc1234 ab"


def test_a_cut_between_call_and_result_is_seen() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "name": "bash", "arguments": "{}"}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        {"role": "assistant", "content": "done"},
    ]
    assert splits_a_tool_call(messages, 2)
    assert not splits_a_tool_call(messages, 3)
    assert not splits_a_tool_call(messages, 1)
