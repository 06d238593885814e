"""The brief's decisions say why: the agent's sentences that state a cause, a limit or a choice
against another, with the plan that follows, not every turn's words."""

from __future__ import annotations

import json
import re

from precis.core.messages import Message, ToolCall
from precis.summarize.base import SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer


def _decisions(messages: tuple[Message, ...]) -> str:
    text = ExtractiveSummarizer().summarize(SummaryRequest(messages))
    match = re.search(r"^## Decisions\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


def test_a_reason_the_agent_states_is_a_decision_with_the_plan_it_led_to() -> None:
    messages = (
        Message(role="user", content="Add the source column to annotations, please."),
        Message(
            role="assistant",
            content=(
                "The generated migration uses `ALTER TABLE ... modify` which SQLite doesn't "
                "support for nullability changes. I need to rewrite it with a table rewrite "
                "pattern.\n```elixir\ncreate table(:annotations_new)\n```"
            ),
        ),
        Message(role="assistant", content="Now let me run the whole test suite once more."),
        Message(
            role="assistant",
            content="The tests failed because the sandbox is not shared with the LiveView.",
        ),
    )
    decisions = _decisions(messages)
    assert (
        "- The generated migration uses `ALTER TABLE ... modify` which SQLite doesn't support "
        "for nullability changes. I need to rewrite it with a table rewrite pattern." in decisions
    )
    assert "the sandbox is not shared with the LiveView" in decisions
    assert "run the whole test suite" not in decisions  # a step, no reason
    assert "create table" not in decisions  # the code it wrote is no sentence of its


def test_a_decision_names_the_file_its_turn_writes() -> None:
    path = "priv/repo/migrations/20260211205820_add_state_to_annotations.exs"
    messages = (
        Message(role="user", content="Add a state column to annotations."),
        Message(
            role="assistant",
            content=(
                "The generated migration adds the column without a default, which will fail "
                "on SQLite if rows exist. Let me rewrite it with a default."
            ),
            tool_calls=(ToolCall("w1", "Write", json.dumps({"file_path": path, "content": "x"})),),
        ),
        Message(role="tool", tool_call_id="w1", content="File written."),
        Message(role="assistant", content="Done, the migration runs."),
    )
    decisions = _decisions(messages)
    assert "Let me rewrite it with a default. (20260211205820_add_state_to_annotations.exs)" in (
        decisions
    )


def test_a_choice_of_that_thing_without_its_name_is_no_decision() -> None:
    messages = (
        Message(role="user", content="Tidy up the imports of the session view."),
        Message(role="assistant", content="Expected — I'll use that alias in the next edits."),
        Message(role="assistant", content="We decided to use `Repo.transaction` for the batch."),
        Message(role="assistant", content="We'll use one worker per core for the import."),
    )
    decisions = _decisions(messages)
    assert "that alias" not in decisions
    assert "We decided to use `Repo.transaction` for the batch." in decisions
    assert "We'll use one worker per core for the import." in decisions  # a number, no pointer


def test_decisions_have_their_share_before_the_notes_and_no_more() -> None:
    messages = [Message(role="user", content="Make the suite pass on SQLite, step by step.")]
    for i in range(60):
        messages.append(
            Message(
                role="assistant",
                content=(
                    f"The test_{i} case fails because the fixture_{i} table is never created in "
                    f"the shared schema. Let me add the fixture_{i} setup to conftest.py so that "
                    "every module gets it."
                ),
            )
        )
    clip = 6000
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(messages), clip_chars=clip))
    decisions = _decisions(tuple(messages))
    assert decisions
    assert len(_section(text, "Decisions")) <= clip // 10 + 300  # its share, and one line more
    assert len(_section(text, "Progress notes")) > clip // 5  # the notes have the rest


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {heading}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""
