"""What the work found and the rules it runs under: notes that keep the sentences with values,
what lookups returned and what of it was used, a long task by its gist, requests without their
courtesies, rules from the task's documents, what the code read defines, a small brief's room."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from conformance import trajectory

from precis.core.jscompat import utf16_len
from precis.core.messages import Message, ToolCall
from precis.eval.replay import load_conversation
from precis.facts import Collector, Fact, extract_facts
from precis.facts.gist import (
    code_outline,
    file_held,
    json_gist,
    note_text,
    output_gist,
    request_gist,
    task_gist,
)
from precis.facts.rules import constraint_sentences
from precis.facts.terms import error_lines, short_arguments, terms_in
from precis.facts.text import heading_rules
from precis.summarize.base import SummaryRequest
from precis.summarize.brief.items import Item
from precis.summarize.brief.labels import TASK
from precis.summarize.brief.must import mark
from precis.summarize.brief.sections import _note_items
from precis.summarize.extractive import ExtractiveSummarizer


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def turn(call_id: str, name: str, said: str = "", **arguments: Any) -> Message:
    return Message(role="assistant", content=said, tool_calls=(call(call_id, name, **arguments),))


def result(call_id: str, text: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=text)


def brief(messages: Sequence[Message], **kw: Any) -> str:
    return ExtractiveSummarizer().summarize(SummaryRequest(tuple(messages), **kw))


def section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


# -- a turn's note, a result's gist ---------------------------------------------------------


def test_a_note_keeps_the_sentences_that_carry_values_not_the_preamble() -> None:
    prose = (
        "Great, let's now take a closer look at what the decompiler printed for us here. "
        "The function multiplies the seed by 0x5deece66d, adds 0xb and keeps 48 bits. "
        "We will continue with the next function once we have looked at this one carefully. "
        "Let me now think about what the best way forward would be for this challenge."
    )
    note = note_text(prose, 120)
    assert "0x5deece66d" in note and "48 bits" in note
    assert "Great, let's" not in note
    assert utf16_len(note) <= 120


def test_a_note_keeps_the_sentence_that_says_why_over_a_list_of_ids() -> None:
    prose = (
        "Here are your reservations: **NM1VX1** basic economy. **KC18K6** basic economy. "
        "**H8Q05L** basic economy. **WUNA5K** economy. Since only the reservation **WUNA5K** "
        "is eligible for an upgrade to business class, would you like to proceed with it? "
        "Please also tell me which payment method you would like to use."
    )
    note = note_text(prose, 200)
    assert "Since only the reservation **WUNA5K** is eligible" in note
    assert utf16_len(note) <= 200


def test_a_short_turn_is_its_note_whole() -> None:
    assert note_text("Fixed the typo: `s.modle()` is `s.model()` now.") == (
        "Fixed the typo: `s.modle()` is `s.model()` now."
    )


def test_a_json_result_is_kept_by_its_values() -> None:
    record = {
        "reservation_id": "WUNA5K",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT271", "date": "2024-05-10"}],
        "insurance": None,
        "paid": True,
    }
    gist = json_gist(json.dumps(record))
    assert gist == "WUNA5K economy flights: HAT271 2024-05-10"
    assert json_gist("[]") == "[]"
    assert json_gist("not json") is None


def test_an_output_gist_skips_a_progress_meter_and_a_file_shown_back() -> None:
    meter = (
        "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
        "                                 Dload  Upload   Total   Spent    Left  Speed\n"
        "100    22  100    22    0     0    257      0 --:--:-- --:--:-- --:--:--   268\n"
        "Hello World from Perl!"
    )
    assert output_gist(meter) == "Hello World from Perl!"
    assert output_gist("1:from z3 import *\n2:s = Solver()") == ""
    long_output = "Decompilation Found!\n" + "seed = _hash(flag); " * 20
    assert output_gist(long_output).startswith("Decompilation Found! seed = _hash(flag);")


def test_an_edit_is_shown_by_what_it_added() -> None:
    short = short_arguments(
        {
            "path": "/testbed/src/marshmallow/fields.py",
            "old_str": "return int(value.total_seconds() / base)",
            "new_str": "return int(round(value.total_seconds() / base))",
        }
    )
    assert short == "fields.py: +return int(round(value.total_seconds() / base))"
    # An edit aimed at a line it keeps says where it went: the rule, the function, the block.
    aimed = short_arguments(
        {
            "path": "/workspace/src/libponyc/ast/parser.c",
            "old_str": "DEF(idseqsingle);\n  AST_NODE(TK_NONE);\n  DONE();",
            "new_str": "DEF(idseqsingle);\n  AST_NODE(TK_NONE);\n  SET_FLAG(IN_PARENS);\n  DONE();",
        }
    )
    assert aimed == "parser.c [DEF(idseqsingle);]: +SET_FLAG(IN_PARENS);"
    assert short_arguments({"origin": "MSP", "destination": "EWR", "date": "2024-05-25"}) == (
        "MSP, EWR, 2024-05-25"
    )


# -- notes in the brief ------------------------------------------------------------------------


def _lookups(used: bool) -> list[Message]:
    """A user, two lookups, and a turn that does (or does not) use the first one's values."""
    messages = [
        Message(role="user", content="Please downgrade my reservations to economy class."),
        turn("l1", "get_reservation_details", reservation_id="JG7FMM"),
        result("l1", json.dumps({"id": "JG7FMM", "payment_id": "credit_card_2929732"})),
        turn("l2", "get_flight_status", flight_number="HAT999"),
        result("l2", json.dumps({"status": "on time", "gate": "B77"})),
    ]
    for i in range(6):  # newer turns that fill the notes' newest places
        messages.append(turn(f"t{i}", "think", thought=f"Step {i} is being considered now."))
        messages.append(result(f"t{i}", ""))
    if used:
        messages.append(
            turn(
                "u1",
                "update_reservation",
                reservation_id="JG7FMM",
                payment_id="credit_card_2929732",
            )
        )
        messages.append(result("u1", "ok"))
    return messages


def test_a_lookup_whose_values_the_work_used_is_noted_first() -> None:
    text = brief(_lookups(used=True), clip_chars=500, mode="all")
    notes = section(text, "Progress notes")
    assert "get_reservation_details(JG7FMM) → JG7FMM credit_card_2929732" in notes
    assert "gate" not in notes and "B77" not in notes


def test_what_lookups_returned_is_noted_with_the_call() -> None:
    facts = Collector().feed(_lookups(used=False))
    calls = [c for note in facts.notes for c in note.calls]
    assert "get_flight_status(HAT999) → on time B77" in calls
    used = Collector().feed(_lookups(used=True))
    assert used.notes[0].used > 0 and used.notes[1].used == 0


# -- the task, the requests, the identifiers -----------------------------------------------------

LONG_TASK = (
    "We are solving a CTF challenge named Katy, worth 10 points. "
    "The description is: i every1 im new!!!!!!! holds up spork my name is katy lol. "
    + "im very random!!!! bcuz its SOOOO random!!!! " * 20
    + "The challenge server runs on crypto.chal.csaw.io port 4242. "
    + "Good luck, have fun and be nice to the other people in the competition. " * 5
)


def test_a_task_s_gist_leaves_out_a_rule_cut_where_its_sentences_are() -> None:
    # The rule runs on past "(e.g." where the gist cuts the task's sentences: its opening piece
    # is still the rule's, listed with the rules, and no part of the gist.
    rule = (
        "Note however that you cannot use any interactive session commands (e.g. python, vim) "
        "in this environment, but you can write scripts and run them."
    )
    task = LONG_TASK + rule
    gist = task_gist(task, 400, frozenset({rule.lower()}))
    assert "crypto.chal.csaw.io port 4242" in gist
    assert "interactive session" not in gist


def test_a_long_task_is_shown_by_its_opening_and_what_it_names() -> None:
    gist = task_gist(LONG_TASK, 200)
    assert gist.startswith("We are solving a CTF challenge named Katy, worth 10 points.")
    assert "crypto.chal.csaw.io port 4242" in gist
    assert utf16_len(gist) <= 200
    assert task_gist("Fix the bug.", 200) == "Fix the bug."


def test_the_task_led_by_the_guard_s_words_adds_what_they_do_not_hold() -> None:
    # The gist left out "The description is:", so only its first sentence matches the guard's
    # words; the sentence those words end inside is not shown again after them, and a sentence
    # naming a host comes before one that only has a number.
    fact = Fact(
        "task",
        "We are solving a CTF challenge named Katy, worth 10 points. "
        "The description is: i every1 im new!!!!!!! holds up spork",
        "task",
    )
    gist = (
        "We are solving a CTF challenge named Katy, worth 10 points. "
        "i every1 im new!!!!!!! holds up spork my name is katy lol. "
        "im 13 years old and i like 2 watch invader zim w/ my girlfreind lol. "
        "The challenge server runs on crypto.chal.csaw.io port 4242."
    )
    items = [Item(gist, 0)]
    mark({TASK: items}, [fact])
    text = items[0].text
    assert text.startswith(fact.text + " … ")
    rest = text[len(fact.text) :]
    assert "i every1 im new" not in rest
    assert rest.endswith("The challenge server runs on crypto.chal.csaw.io port 4242.")
    assert items[0].variants[-1] == fact.text


def test_a_pinned_task_takes_little_of_the_brief() -> None:
    messages = [Message(role="user", content="ok go")]
    for i in range(8):
        said = f"Probing the server, attempt {i}."
        messages += [
            turn(f"b{i}", "bash", said=said, command=f"nc -w5 host 4242 < probe{i}"),
            result(f"b{i}", f"reply {i}: " + "0123456789abcdef" * 20),
        ]
    text = brief(messages, clip_chars=2000, task=LONG_TASK)
    task = section(text, "Task")
    assert "Katy" in task and "4242" in task
    assert utf16_len(task) <= 0.15 * 2000


def test_a_long_first_request_leads_with_the_guard_s_words_and_keeps_its_gist_after() -> None:
    path = trajectory("OpenHands__multi_swe_bench_examples_output__ponylang__ponyc-4593.jsonl")
    span = [Message.from_openai(d, id=f"m{i}") for i, d in enumerate(load_conversation(path)[:61])]
    shown = section(brief(span, mode="all", clip_chars=3900), "Task")
    lead = next(f.text for f in extract_facts(span) if f.kind == "task")
    assert shown.startswith(lead)  # the guard's words for the task, whole
    # and, after them, what the issue's gist names: not the harness's opening alone
    assert "./cmd sub" in shown and "command_parser.pony" in shown


def test_requests_lose_their_courtesies_only() -> None:
    assert request_gist("Great, thank you! For the remaining flights, can you upgrade me?") == (
        "For the remaining flights, can you upgrade me?"
    )
    assert request_gist("Thanks for that. Cancel S61CZX. Thank you!") == "Cancel S61CZX."
    assert request_gist("Thank you!") == "Thank you!"
    messages = [
        Message(role="user", content="Hello! Please look at my reservations."),
        Message(role="assistant", content="Sure, which ones?"),
        Message(role="user", content="I understand. Please cancel the trip S61CZX for me now."),
    ]
    facts = extract_facts(messages)
    assert any(f.kind == "request" and f.text.startswith("Please cancel") for f in facts)


def test_values_of_one_argument_are_listed_under_its_name_once() -> None:
    messages = [Message(role="user", content="Check my bookings please, all of them today.")]
    for i, rid in enumerate(("NM1VX1", "KC18K6", "S61CZX")):
        messages += [turn(f"r{i}", "get_reservation", reservation_id=rid), result(f"r{i}", "{}")]
    identifiers = section(brief(messages), "Identifiers")
    assert identifiers.count("reservation_id=") == 1
    assert re.search(r"reservation_id=\w{6}, \w{6}, \w{6}", identifiers)
    assert {"NM1VX1", "KC18K6", "S61CZX"} <= set(re.findall(r"\w{6}", identifiers))


# -- decisions, errors, rules ----------------------------------------------------------------


def test_a_plan_for_the_next_step_is_no_decision() -> None:
    messages = [
        Message(role="user", content="Find out what the web server at port 8000 serves."),
        Message(role="assistant", content="I will use `curl` to make a GET request to the root."),
        Message(role="assistant", content="We decided to use curl to avoid a browser."),
    ]
    decisions = section(brief(messages), "Decisions")
    assert "make a GET request" not in decisions
    assert "We decided to use curl to avoid a browser." in decisions


def test_a_warning_is_no_error_and_a_timeout_is() -> None:
    assert error_lines("Warning: _curses.error: setupterm: could not find terminfo") == []
    assert error_lines("EXECUTION TIMED OUT") == ["EXECUTION TIMED OUT"]


def test_a_condition_sets_no_rule_and_an_example_s_code_neither() -> None:
    assert constraint_sentences("im bi if u dont like it deal w/it") == []
    text = "Edit with sed:\n```sh\n# Replace only first occurrence\nsed -i 's/a/b/' f\n```\n"
    assert constraint_sentences(text + "Make sure to run the tests.") == [
        "Make sure to run the tests."
    ]


def test_a_listed_rule_goes_on_over_its_indented_lines() -> None:
    text = (
        "## Important Rules\n\n1. Every response must contain exactly one action\n"
        "2. To finish, issue the following command: `echo DONE_AND_SUBMIT`.\n"
        "   Do not combine it with any other command.\n\n## Recommended Workflow\n"
        "1. Test edge cases to check the fix is robust\n"
    )
    assert heading_rules(text) == [
        "Every response must contain exactly one action",
        "To finish, issue the following command: `echo DONE_AND_SUBMIT`. Do not combine it "
        "with any other command.",
        "Test edge cases to check the fix is robust",
    ]


LISTED_TASK = (
    "Fix the division bug.\n\n## Important Rules\n"
    "1. To finish, issue the following command: `echo DONE_AND_SUBMIT`.\n"
    "   Do not combine it with any other command.\n"
)


def test_the_task_s_listed_rules_are_rules_shown_once() -> None:
    messages = [
        Message(role="user", content=LISTED_TASK),
        turn("b1", "bash", command="ls"),
        result("b1", "a.py"),
    ]
    rules = section(brief(messages, clip_chars=4000), "Constraints")
    assert "`echo DONE_AND_SUBMIT`. Do not combine it with any other command." in rules
    assert rules.count("Do not combine it") == 1


def test_a_small_brief_shows_a_listed_rule_by_its_own_sentences() -> None:
    # The guard demands the rule's sentence verbatim; what its listed item says after it is
    # advice a small brief has no room for. A rule that leans on the sentence before it ("Do
    # not combine it …") is still shown in its item.
    task = LISTED_TASK + "2. DO NOT run any command that prints binary output! Use `xxd` for it.\n"
    messages = [
        Message(role="user", content=task),
        turn("b1", "bash", command="ls"),
        result("b1", "a.py"),
    ]
    rules = section(brief(messages, clip_chars=2000), "Constraints")
    assert "- DO NOT run any command that prints binary output!\n" in rules + "\n"
    assert "`xxd`" not in rules
    assert "`echo DONE_AND_SUBMIT`. Do not combine it with any other command." in rules
    assert rules.count("Do not combine it") == 1


def test_the_pinned_task_s_rules_are_read_in_it_not_listed_again() -> None:
    # Pinned beside the summary, the task states its rules verbatim; a rule the user gave
    # later is still listed.
    messages = [
        turn("b1", "bash", command="ls"),
        result("b1", "a.py"),
        Message(role="user", content="Never edit tests/test_division.py while you fix it."),
    ]
    text = brief(messages, task=LISTED_TASK, clip_chars=4000)
    assert "Do not combine it" not in text
    assert "- Never edit tests/test_division.py while you fix it." in section(text, "Constraints")


SPECS = [f"- Add `export_rows_{i}` to the ReportsController, paged by week {i}." for i in range(12)]


def _epic(status: str) -> list[Message]:
    issue = (
        "○ web-7 · Export [● P2 · OPEN]\n\n## Technical Specs\n"
        + "\n".join(SPECS)
        + "\n- Never write to the legacy tables.\n"
    )
    messages = [
        Message(role="user", content="Work through web-7 and report back when it is done."),
        turn("s1", "Bash", command="bd show web-7"),
        result("s1", issue),
    ]
    if status == "done":
        messages += [turn("s2", "Bash", command="bd close web-7"), result("s2", "✓ Closed web-7")]
    for i in range(6):  # work that makes the span long enough for the clip to bind
        messages += [turn(f"w{i}", "Bash", command=f"make {i}"), result(f"w{i}", "." * 800)]
    return messages


def test_a_finished_item_s_specs_wait_but_its_prohibitions_stand() -> None:
    facts = Collector().feed(_epic("open"))
    assert facts.spec_sources[SPECS[0][2:].lower()] == "web-7"
    open_rules = section(brief(_epic("open"), clip_chars=700), "Constraints")
    assert "Never write to the legacy tables." in open_rules and "export_rows_0" in open_rules
    # Once web-7 is closed its specs wait behind everything else; its prohibition does not.
    done_rules = section(brief(_epic("done"), clip_chars=700), "Constraints")
    assert "Never write to the legacy tables." in done_rules and "export_rows" not in done_rules


def test_a_larger_brief_shows_a_finished_item_s_specs_after_the_rules_that_bind() -> None:
    messages = _epic("done")
    for i in range(60):  # a larger brief, with more to say than it has room for
        said = f"Step {i}: page_{i} of `weekly_{i}.csv` holds {i * 37} rows at port {4000 + i}."
        messages += [
            turn(f"n{i}", "Bash", said=said, command=f"wc -l weekly_{i}.csv"),
            result(f"n{i}", f"{i * 37} weekly_{i}.csv " + "." * 300),
        ]
    rules = section(brief(messages, clip_chars=6000), "Constraints")
    assert "Never write to the legacy tables." in rules and "export_rows_0" in rules
    assert rules.index("Never write") < rules.index("export_rows_0")


# -- what code read defines, a failed read ------------------------------------------------------

ELIXIR = """\
     1→defmodule SpotterWeb.SessionLive do
     2→  def mount(params, _session, socket) do
     3→    {:ok, socket}
     4→  end
     5→
     6→  def handle_event("text_selected", %{"row" => row}, socket) do
     7→    {:noreply, push_event(socket, "scroll_to_message", %{row: row})}
     8→  end
     9→
    10→  defp transcript_row_classes(line, current, clicked), do: []
    11→  computer :project_filter do
    12→  end
    13→end"""


def test_a_code_outline_names_what_a_file_defines() -> None:
    from precis.facts.terms import unnumbered

    outline = code_outline(unnumbered(ELIXIR))
    assert outline == (
        "SpotterWeb.SessionLive, mount/3, handle_event/3, transcript_row_classes/3, "
        "computer :project_filter; events text_selected, scroll_to_message"
    )
    js = 'import hljs from "highlight.js/lib/core"\nfunction highlightCode(root) {\n}\n'
    assert code_outline(js) == "highlightCode/1; imports highlight.js/lib/core"


def test_the_code_read_section_lists_each_file_s_outline() -> None:
    padding = "".join(f"\n{i + 14:6d}→  # line {i} of the module's comments" for i in range(200))
    messages = [
        Message(role="user", content="Explore how the session view renders its transcript."),
        turn("r1", "Read", file_path="/repo/lib/session_live.ex"),
        result("r1", ELIXIR + padding),
        turn("r2", "Read", file_path="/repo/lib/missing.html.heex"),
        result("r2", "<tool_use_error>File does not exist.</tool_use_error>"),
    ]
    text = brief(messages, clip_chars=6000)
    assert "session_live.ex: SpotterWeb.SessionLive, mount/3" in section(text, "Code read")
    assert "File does not exist." in section(text, "Errors and fixes")


# -- a small brief -----------------------------------------------------------------------------


def test_a_small_brief_spends_nothing_on_tallies_or_lookup_hints() -> None:
    messages = [Message(role="user", content="Find out why the nightly build fails, please.")]
    for i in range(12):
        messages += [
            turn(
                f"b{i}", "Bash", said=f"Run {i} of the build with flag -j{i}.", command=f"make {i}"
            ),
            result(f"b{i}", f"step {i} ok; KeyError: 'k{i}' seen in module_{i}.py\n" + "." * 900),
        ]
    small = brief(messages, clip_chars=2500)
    assert "## Tool activity" not in small and "## Lookup hints" not in small
    assert "## Progress notes" in small
    large = brief(messages, clip_chars=8000)
    assert "## Tool activity" in large


def test_a_tool_refusing_its_arguments_is_an_error_even_for_a_read() -> None:
    refusal = "Invalid `path` parameter: hello.py. The path should be an absolute path, from `/`."
    assert error_lines(refusal) == [refusal]
    assert error_lines("All invalid parameter tests passed.") == []
    messages = [
        Message(role="user", content="Show me what hello.py holds, please."),
        turn("v1", "str_replace_editor", command="view", path="hello.py"),
        result("v1", refusal),
        turn("v2", "str_replace_editor", command="view", path="/work/hello.py"),
        result("v2", "     1\tprint('Hello, World!')\n     2\t\n     3\t# end\n"),
    ]
    errors = section(brief(messages), "Errors and fixes")
    assert "The path should be an absolute path" in errors
    assert "Hello, World" not in errors  # a file read back is no error


def test_a_file_of_a_line_or_two_read_back_is_noted_by_what_it_holds() -> None:
    assert file_held("Here's `cat -n` of /w/hello.py:\n     1\tprint('Hello, World!')\n") == (
        "print('Hello, World!')"
    )
    long = "".join(f"    {i}\tline {i}\n" for i in range(1, 40))
    assert file_held(long) == ""
    messages = [
        Message(role="user", content="Does hello.py print the greeting already?"),
        turn("v1", "str_replace_editor", command="view", path="/work/hello.py"),
        result("v1", "Here's `cat -n` of /work/hello.py:\n     1\tprint('Hello, World!')\n"),
        turn("v2", "str_replace_editor", command="view", path="/work/app.py"),
        result("v2", long),
        Message(role="assistant", content="Both files are there."),
    ]
    notes = section(brief(messages), "Progress notes")
    assert "→ print('Hello, World!')" in notes
    assert "line 12" not in notes  # a longer file is what its outline says


def test_a_numbered_step_after_a_line_ending_in_issue_is_no_ticket() -> None:
    steps = "2. Create a script to reproduce the issue\n3. Edit the source code\n4. Verify"
    assert not [t for t in terms_in(steps) if t[0] == "pr"]
    assert ("pr", "#12", "issue 12") in list(terms_in("This fixes issue 12.\nThanks."))


def test_the_newest_change_is_a_note_worth_keeping_and_keeps_its_change_whole() -> None:
    messages = [Message(role="user", content="TimeDelta serializes 345 ms as 344; fix it.")]
    for i in range(6):
        said = (
            f"The `fields.py` module at line {1470 + i} holds `TimeDelta._serialize` and the "
            f"`base_unit` of {i} ms; it reads the value there."
        )
        messages += [
            turn(f"r{i}", "bash", said, command=f"sed -n {1470 + i}p src/marshmallow/fields.py"),
            result(f"r{i}", f"line {i}"),
        ]
    fix = "return int(round(value.total_seconds() / base_unit.total_seconds()))"
    said = (
        "Oh no, my previous edit did not keep the indentation of the method body, so let me "
        "redo it with the proper indentation this time around."
    )
    messages += [
        turn(
            "e1",
            "Edit",
            said,
            file_path="src/marshmallow/fields.py",
            old_string="return int(value.total_seconds() / base_unit.total_seconds())",
            new_string=fix,
        ),
        result("e1", "The file src/marshmallow/fields.py has been updated."),
    ]
    for i in range(3):
        said = f"Check {i}: the output of reproduce.py is {340 + i} for case_{i} now."
        messages += [
            turn(f"t{i}", "bash", said, command=f"python reproduce.py {i}"),
            result(f"t{i}", "345"),
        ]
    notes = section(brief(messages, clip_chars=700), "Progress notes")
    assert "base_unit.total_seconds()))" in notes  # older notes of more values give way
    facts = Collector().feed(messages)
    edit = next(i for i in _note_items(facts, "all", 260) if "Edit(" in i.text)
    assert edit.variants[-1] == f"⇒ Edit(fields.py: +{fix})"  # short of room, the change whole
    assert all(v.endswith(f"+{fix})") for v in edit.variants)


def test_identifiers_the_latest_steps_used_rank_before_those_used_often_long_ago() -> None:
    early = [
        Message(role="assistant", content=f"Step {i}: calling `load_rows` again.") for i in range(5)
    ]
    filler = [Message(role="assistant", content=f"Reading part {i}.") for i in range(80)]
    late = [Message(role="assistant", content="Now set `REVIEW_MODE` and read `REVIEW_MODE`.")]
    late.append(Message(role="assistant", content="The hook checks `REVIEW_MODE` first."))
    ranked = [t.label for t in Collector().feed([*early, *filler, *late]).identifiers.ranked()]
    assert ranked.index("REVIEW_MODE") < ranked.index("load_rows")
    # Used as often and as lately, the one used more still comes first.
    again = Collector().feed([*early, *late]).identifiers.ranked()
    assert [t.label for t in again][:2] == ["load_rows", "REVIEW_MODE"]


def _error_then(*after: Message) -> list[Message]:
    return [
        turn("e1", "str_replace", path="parser.c", old_str="DEF(single);\n  DONE();", new_str="x"),
        result("e1", "ERROR: No replacement was performed, old_str did not appear verbatim."),
        turn(
            "v1",
            "view",
            "It seems the old text did not match. Let's view the rule again.",
            path="parser.c",
        ),
        result("v1", "691\tDEF(single);\n692\t  PRINT_INLINE();\n693\t  DONE();"),
        *after,
    ]


def test_an_error_s_fix_is_the_change_made_after_the_words_that_planned_it() -> None:
    said = "The rule has `PRINT_INLINE()` on line 692, which the old text left out. Retrying."
    facts = Collector().feed(
        _error_then(turn("e2", "str_replace", said, path="parser.c", old_str="a", new_str="b"))
    )
    (error,) = facts.errors.values()
    assert error.fix == (
        "It seems the old text did not match. ⇒ The rule has `PRINT_INLINE()` on line 692, "
        "which the old text left out."
    )
    # A change that says nothing is shown after the words, unless they name what it adds.
    quiet = turn("e2", "str_replace", path="parser.c", old_str="DONE();", new_str="SET_FLAG(x);")
    (error,) = Collector().feed(_error_then(quiet)).errors.values()
    assert (
        error.fix == "It seems the old text did not match. ⇒ str_replace(parser.c: +SET_FLAG(x);)"
    )
    named = turn("v1", "view", "It needs `SET_FLAG` added before `DONE`.", path="parser.c")
    messages = _error_then(quiet)
    messages[2] = named
    (error,) = Collector().feed(messages).errors.values()
    assert error.fix == "It needs `SET_FLAG` added before `DONE`."


def test_a_failed_assertion_is_an_error() -> None:
    output = "  1) test renders the page (PageTest)\n     Assertion with =~ failed\n     code: x"
    assert error_lines(output) == ["Assertion with =~ failed"]


def test_a_port_stated_in_a_sentence_is_a_port() -> None:
    assert ("port", "port 1100", "port 1100") in list(terms_in("Good. Default port is 1100."))
    assert not [t for t in terms_in("The answer is 1100.") if t[0] == "port"]


def test_the_task_s_gist_after_the_guard_s_words_does_not_say_them_again() -> None:
    from precis.facts import Fact
    from precis.summarize.brief.items import Item
    from precis.summarize.brief.must import mark

    said = "<files> /work/repo </files> I've uploaded a repository. Consider the issue"
    gist = (
        "/work/repo I've uploaded a repository. Consider the issue: the parser drops the "
        "parent's default options on line 101, and the fix belongs in `command_parser.pony`."
    )
    out = {"task": [Item(gist, 0)]}
    mark(out, [Fact("task", said, "m1")])
    (task,) = out["task"]
    assert task.text.startswith(said + " … ")
    assert task.text.count("I've uploaded") == 1


def test_an_identifier_an_earlier_listed_one_holds_is_not_listed_again() -> None:
    said = [
        Message(role="user", content="Wrap the hook in `Tracer.with_span` and log it."),
        Message(role="assistant", content="I'll call `with_span` from the controller."),
    ]
    listed = section(brief(said), "Identifiers")
    assert "Tracer.with_span" in listed
    assert "with_span," not in listed and not listed.strip().endswith(" with_span")
    # A name another one only begins with is another name.
    said.append(Message(role="user", content="Render it from `SessionLive`, not `Session`."))
    listed = section(brief(said), "Identifiers")
    assert "SessionLive" in listed
    assert re.search(r"(?<![\w.])Session(?![\w.])", listed)


def test_a_dotted_name_in_quotes_in_written_code_is_an_identifier() -> None:
    from precis.facts.terms import symbols_in

    code = 'Tracer.with_span("spotter.hook.session_start", %{"app.id" => id}) do'
    names = [name for _, name, _ in symbols_in(code, code=True)]
    assert "spotter.hook.session_start" in names
    assert "app.id" not in names  # two parts: a key, a file or a field, not a name of its own


def test_names_in_a_commit_message_the_agent_wrote_count_as_uses() -> None:
    message = 'git commit -m "feat: setup is skipped unless SPOTTER_OTEL_ENABLED is set"'
    messages = [turn("c1", "bash", command=message), result("c1", "[main 1a2b3c4] feat")]
    term = Collector().feed(messages).identifiers.terms["SPOTTER_OTEL_ENABLED"]
    assert term.uses == 1
    # A flag's value is no message: `--status in_progress` names nothing of the work.
    flags = [turn("c2", "bash", command="bd update x-1 --status 'in_progress'")]
    assert "in_progress" not in Collector().feed(flags).identifiers.terms


def test_names_in_a_sub_agent_s_prompt_count_as_the_agent_s_uses() -> None:
    prompt = "Which field of hookSpecificOutput injects `additionalContext` at session start?"
    messages = [turn("t1", "Task", prompt=prompt, description="Research hook output")]
    term = Collector().feed(messages).identifiers.terms["additionalContext"]
    assert term.uses == 1


def test_a_read_whose_wrapped_output_is_one_refusal_failed() -> None:
    refusal = "cat: /Users/me/repo/tests/missing_colon.py: No such file or directory"
    wrapped = f"<returncode>1</returncode>\n<output>\n{refusal}\n</output>"
    messages = [
        turn("r1", "bash", command="cat /Users/me/repo/tests/missing_colon.py"),
        result("r1", wrapped),
    ]
    (error,) = Collector().feed(messages).errors.values()
    assert error.signature == refusal
    # A file read back in the same wrapper is a read, whatever its lines say.
    listing = "<returncode>0</returncode>\n<output>\n" + "\n".join(
        ["import os", "raise ValueError('No such file or directory')", "x = 1", "y = 2"]
    )
    read = [turn("r2", "bash", command="cat src/app.py"), result("r2", listing + "\n</output>")]
    assert not Collector().feed(read).errors


def test_a_fix_says_what_the_change_s_words_say_not_a_cry_or_a_plan() -> None:
    said = "Great! Now let me fix it. The rule lacks `PRINT_INLINE()` on line 692."
    change = turn("e2", "str_replace", said, path="parser.c", old_str="a", new_str="b")
    (error,) = Collector().feed(_error_then(change)).errors.values()
    assert error.fix.endswith("⇒ The rule lacks `PRINT_INLINE()` on line 692.")
    plan = turn(
        "e2", "str_replace", "Now let me edit it!", path="parser.c", old_str="a", new_str="b"
    )
    (error,) = Collector().feed(_error_then(plan)).errors.values()
    assert error.fix == "It seems the old text did not match. ⇒ str_replace(parser.c: +b)"


def test_a_traceback_error_says_where_the_projects_code_raised_it() -> None:
    """The innermost frame of the project's code names the file a successor opens; a
    library's frame (site-packages) or a `<string>` one names nothing of the project's."""
    ours = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 1, in <module>\n'
        '  File "/testbed/tests/missing_colon.py", line 5, in division\n'
        "    return a/b\n"
        "           ~^~\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert error_lines(ours) == [
        "ZeroDivisionError: division by zero (/testbed/tests/missing_colon.py, line 5, in division)"
    ]
    library = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/site-packages/yaml/parser.py", line 9, in parse\n'
        "    raise ParserError(problem)\n"
        "yaml.parser.ParserError: expected ':'\n"
    )
    assert error_lines(library) == ["yaml.parser.ParserError: expected ':'"]
    assert error_lines('  File "<string>", line 1\nSyntaxError: invalid syntax') == [
        "SyntaxError: invalid syntax"
    ]


def test_a_port_given_with_its_host_is_shown_with_it() -> None:
    # "nc crypto.example.io:4242" names where to connect; "port 4242" alone does not. A file's
    # line ("main.py:12") is no host and port.
    found = list(terms_in("run nc crypto.example.io:4242 after main.py:12, on port 8000"))
    assert ("port", "port 4242", "crypto.example.io:4242") in found
    assert not any(key == "port 12" for _, key, _ in found)
    assert ("port", "port 8000", "port 8000") in found
    messages = [
        Message(role="user", content="It runs on port 4242: use nc crypto.example.io:4242."),
        turn("b1", "bash", command="ls"),
        result("b1", "a.py"),
    ]
    assert "crypto.example.io:4242" in section(brief(messages, clip_chars=2000), "Identifiers")


def test_a_task_gist_shows_no_headings_and_its_opening_whole() -> None:
    # "INSTRUCTIONS:" heads what follows and says nothing by itself; a short opening too long
    # for its share of the gist is shown whole, not cut ("We're currently solving the fo …").
    task = (
        "We're currently solving the following CTF challenge.\n"
        "The description is:\nWtf... I just set up this website and it's already popped...\n"
        "INSTRUCTIONS:\nNow, you're going to solve this challenge on your own.\n"
        "IMPORTANT TIPS:\n" + "Use it wisely! " * 20
    )
    gist = task_gist(task, 120)
    assert gist.startswith("We're currently solving the following CTF challenge. ")
    assert "INSTRUCTIONS:" not in gist and "TIPS:" not in gist and "…" not in gist
