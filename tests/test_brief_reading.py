"""What the brief reads and how it packs it: a long output read whole (not as the view showed
it), tracker rules filed with their own item, errors with one fix said once, and the functions
the code read calls as lookup hints."""

from __future__ import annotations

import json
from typing import Any

from precis.core.messages import Message, ToolCall
from precis.core.tokens import TextEstimator
from precis.engine.views import fit_message
from precis.engine.work import Work
from precis.facts import Collector
from precis.summarize.base import SummaryRequest
from precis.summarize.brief.read import read_brief
from precis.summarize.extractive import ExtractiveSummarizer


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def bash(call_id: str, command: str, said: str = "") -> Message:
    return Message(
        role="assistant", content=said, tool_calls=(call(call_id, "Bash", command=command),)
    )


def result(call_id: str, text: str, message_id: str = "") -> Message:
    return Message(role="tool", tool_call_id=call_id, content=text, id=message_id)


def _source(middle: str, size: int = 1000) -> str:
    lines = [f"  # filler line {i} of a long module" for i in range(size)]
    lines[size // 2] = middle
    return "\n".join(["defmodule Big do", *lines, "end"])


def test_work_gives_the_stored_messages_where_the_view_cut_one() -> None:
    stored = [
        Message(role="user", content="read big.ex", id="u"),
        Message(role="assistant", content="", id="a", tool_calls=(call("r", "Read"),)),
        result("r", _source("  def hidden_function(x), do: x"), "t"),
    ]
    shown = [fit_message(m, max_chars=2000, head_lines=10, tail_lines=5) for m in stored]
    assert shown[2] is not stored[2] and "hidden_function" not in shown[2].content
    work = Work(shown, [1, 1, 1], TextEstimator(), None, stored)
    assert work.originals(shown) == tuple(stored)
    assert Work(stored, [1, 1, 1], TextEstimator(), None, stored).originals(stored) == ()


def test_the_brief_reads_a_long_output_whole_when_the_request_has_it() -> None:
    read = call("r", "Read", file_path="lib/big.ex")
    stored = (
        Message(role="user", content="Explain lib/big.ex", id="u"),
        Message(role="assistant", content="Reading it.", id="a", tool_calls=(read,)),
        result("r", _source("  def hidden_function(x), do: x"), "t"),
    )
    shown = tuple(fit_message(m, max_chars=20000, head_lines=300, tail_lines=200) for m in stored)
    summarizer = ExtractiveSummarizer()
    assert "hidden_function" not in summarizer.summarize(SummaryRequest(shown, clip_chars=6000))
    whole = SummaryRequest(shown, clip_chars=6000, originals=stored)
    assert "hidden_function" in summarizer.summarize(whole)


def test_a_tracker_rule_is_filed_with_the_item_whose_section_states_it() -> None:
    shown = (
        "○ proj-1.5 · Review page\n\nDESCRIPTION\nBuild it.\n\nBLOCKS\n"
        "  ← ○ proj-1.6: Close review\n  ← ○ proj-1.7: Launch review\n"
        "===\n"
        "○ proj-1.6 · Close review\n\nConstraints:\n- Close only the open annotations.\n"
        "===\n"
        "○ proj-1.7 · Launch review\n\nConstraints:\n- The token must be single-use.\n"
    )
    collector = Collector(None, reader=read_brief)
    facts = collector.feed(
        [
            Message(role="user", content="Work on proj-1"),
            bash("c", "bd show proj-1.5; echo ===; bd show proj-1.6; echo ===; bd show proj-1.7"),
            result("c", shown),
        ]
    )
    sources = {facts.spec_constraints[k]: v for k, v in facts.spec_sources.items()}
    assert sources["Close only the open annotations."] == "proj-1.6"
    assert sources["The token must be single-use."] == "proj-1.7"


def test_errors_one_output_printed_with_one_fix_are_one_line() -> None:
    messages = [
        Message(role="user", content="Run the tests and fix them"),
        bash("t", "mix test"),
        result(
            "t",
            "error: undefined function get/2\n"
            "** (CompileError) test/a_test.exs: cannot compile module ATest",
        ),
        Message(role="assistant", content="The helper needs Phoenix.ConnTest imported."),
    ]
    text = ExtractiveSummarizer().summarize(SummaryRequest(tuple(messages), clip_chars=3000))
    lines = [ln for ln in text.splitlines() if "CompileError" in ln]
    assert len(lines) == 1 and lines[0].startswith("- error: undefined function get/2; ")
    assert lines[0].count("Phoenix.ConnTest imported") == 1


def test_the_functions_the_code_read_calls_most_are_lookup_hints_when_room_is_left() -> None:
    code = "\n".join(
        [
            "defmodule Web.PaneList do",
            "  def mount(socket), do: socket |> mount_computers()",
            "  def load(socket), do: update_computer_inputs(socket, :a, %{})",
            "  def more(socket), do: update_computer_inputs(socket, :b, %{})",
            "  defp local_helper(x), do: local_helper(x)",
            *(f"  # filler line {i} of a long module" for i in range(400)),
            "end",
        ]
    )
    read = call("r", "Read", file_path="lib/web/pane_list.ex")
    messages = (
        Message(role="user", content="Explore how lib/web/pane_list.ex works"),
        Message(role="assistant", content="Reading it.", tool_calls=(read,)),
        result("r", code),
    )
    text = ExtractiveSummarizer().summarize(SummaryRequest(messages, clip_chars=6000))
    assert "update_computer_inputs" in text
    hints = next((ln for ln in text.splitlines()[1:] if "update_computer_inputs" in ln), "")
    assert "local_helper" not in hints and "mount_computers" not in hints
