"""The records an agent's lookups returned (a reservation, a ticket, an account) are in the brief
by their id, newest version winning, by their codes and amounts alone when room is short."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from conformance import trajectory

from precis.core.messages import Message, ToolCall
from precis.eval.replay import load_conversation
from precis.facts import read_record
from precis.summarize.base import SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer


def _call(call_id: str, name: str, **arguments: Any) -> Message:
    return Message(
        role="assistant", content="", tool_calls=(ToolCall(call_id, name, json.dumps(arguments)),)
    )


def _result(call_id: str, data: Any) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=json.dumps(data))


def _brief(messages: Sequence[Message], **kw: Any) -> str:
    return ExtractiveSummarizer().summarize(SummaryRequest(tuple(messages), **kw))


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


def _order(key: str, status: str, paid: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "order_id": key,
        "user_id": "ann_42",
        "status": status,
        "created_at": "2024-05-01T10:00:00",
        "items": [{"sku": "KB-104", "price": 80}, {"sku": "MS-220", "price": 25}],
        "payments": paid,
    }


def test_a_record_is_its_id_and_values_and_a_lean_line_of_codes_and_amounts() -> None:
    paid = [{"payment_id": "card_7781", "amount": 105}]
    record = read_record(json.dumps(_order("Q7X2", "shipped", paid)))
    assert record is not None and record.key == "Q7X2"
    assert "shipped" in record.text and "KB-104 80" in record.text
    assert "ann_42" not in record.text  # a reference to another record, not this one's value
    assert "2024-05-01T10:00:00" not in record.text  # its own bookkeeping time
    assert record.lean == "shipped KB-104 80, MS-220 25; card_7781 105"
    # The id the call asked for names a record that has none of its own; other JSON is none.
    profile = read_record('{"name": "Ann", "tier": "gold"}', fallback="ann_42")
    assert profile is not None and profile.key == "ann_42"
    assert read_record('[{"order_id": "Q7X2"}]') is None
    assert read_record('{"note": "no id here"}') is None


def test_the_brief_shows_the_newest_version_of_each_record_the_work_looked_up() -> None:
    paid = [{"payment_id": "card_7781", "amount": 105}]
    refunded = [*paid, {"payment_id": "card_7781", "amount": -105}]
    messages = (
        Message(role="user", content="Please cancel my order Q7X2 and refund it to my card."),
        _call("c1", "get_order_details", order_id="Q7X2"),
        _result("c1", _order("Q7X2", "shipped", paid)),
        _call("c2", "get_order_details", order_id="P3K9"),
        _result("c2", _order("P3K9", "delivered", [{"payment_id": "gift_5", "amount": 9}])),
        _call("c3", "cancel_order", order_id="Q7X2"),
        _result("c3", _order("Q7X2", "cancelled", refunded)),
    )
    text = _brief(messages)
    records = _section(text, "Records looked up")
    lines = [line for line in records.splitlines() if line.startswith("- Q7X2:")]
    assert len(lines) == 1 and "cancelled" in lines[0] and "-105" in lines[0]
    assert "shipped" not in lines[0]
    assert "- P3K9: delivered" in records and "gift_5 9" in records
    # The action's line names the record by its codes; the records show it whole.
    assert "done: cancel_order(order_id=Q7X2) → Q7X2: cancelled" in _section(text, "Work state")


def test_a_small_brief_of_a_booking_conversation_keeps_each_reservation_s_flights_and_payer() -> (
    None
):
    path = trajectory("tau-bench__gpt-4o-airline.top5_longest__task2_trial1.jsonl")
    items = load_conversation(path)[:54]
    span = [Message.from_openai(d, id=f"m{i}") for i, d in enumerate(items)]
    records = _section(_brief(span, mode="all", clip_chars=1900), "Records looked up")
    line = next(line for line in records.splitlines() if line.startswith("- EQ1G6C:"))
    assert "HAT084" in line and "HAT175" in line and "gift_card_6847880" in line
    line = next(line for line in records.splitlines() if line.startswith("- BOH180:"))
    assert "credit_card_9525117" in line


def test_rules_a_hook_s_output_lists_in_the_user_s_turn_are_kept_but_are_no_request() -> None:
    dim, plain = "\x1b[2m", "\x1b[22m"
    injected = "\n".join(
        f"{dim}{line}{plain}"
        for line in (
            "Compacted (ctrl+o to see full summary)",
            "PreCompact [bd prime] completed successfully: # Workflow Context",
            "## Core Rules",
            "- **Prohibited**: Do NOT use TodoWrite or markdown files for task tracking",
            "- Git workflow: run `bd sync --from-main` at session end",
            "## Essential Commands",
            "- `bd ready` - Show issues ready to work",
        )
    )
    messages = (
        Message(role="user", content="Add the CSV export to the reports page, please."),
        Message(role="assistant", content="Reading the reports page first."),
        Message(role="user", content=f"<local-command-stdout>{injected}</local-command-stdout>"),
        Message(role="assistant", content="Continuing with the export."),
    )
    text = _brief(messages)
    rules = _section(text, "Constraints")
    assert "- Prohibited: Do NOT use TodoWrite or markdown files for task tracking" in rules
    assert "- Git workflow: run `bd sync --from-main` at session end" in rules
    assert "bd ready" not in rules and "\x1b" not in text  # a command list is no rule
    assert "Compacted" not in _section(text, "Requests")
