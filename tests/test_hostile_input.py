"""Hostile text: a megabyte run of one character class (or a short alternation) reaches every
extractor and a whole compaction, and each finishes within the issue's bound; the linear
rewrites of the scans find what the patterns they replace found."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from precis.core import jscompat, textfeatures
from precis.core.errors import InvalidMessage
from precis.core.messages import (
    MAX_MESSAGE_CHARS,
    Message,
    ToolCall,
    nested_too_deep,
    parse_json,
)
from precis.engine.settings import CompactionSettings
from precis.facts import (
    collect,
    decisions,
    digest,
    fixes,
    model,
    progress,
    records,
    terms,
    text,
    verify,
)
from precis.facts.scan import offered
from precis.session import Session
from precis.stores.base import ConversationStore
from precis.stores.memory import MemoryStore
from precis.summarize import packaging
from precis.summarize.brief import read, sections, state

# Issue #28 asks for "≤ 2 s each" on a megabyte of hostile text. The project forbids timed
# assertions in general; this is the explicit bound, held as a generous deadline (a
# quadratic scan takes minutes here, a linear one well under a second), not a measurement.
DEADLINE_SECONDS = 2.0
MEGABYTE = 1_000_000

# What each scan's patterns could hate: a long run of one class (no separator, no digit, no
# closing quote or bracket), or of a short alternation that keeps a pattern's options open.
RUNS: dict[str, str] = {
    "letters": "a",
    "capitals": "A",
    "digits": "7",
    "spaces": " ",
    "tabs": "\t",
    "newlines": "\n",
    "crlf": "\r\n",
    "dots": ".",
    "dashes": "-",
    "underscores": "_",
    "slashes": "/",
    "colons": ":",
    "equals": "=",
    "commas": ",",
    "at signs": "@",
    "double quotes": '"',
    "single quotes": "'",
    "backticks": "`",
    "open parens": "(",
    "close parens": ")",
    "open brackets": "[",
    "open braces": "{",
    "backslashes": "\\",
    "hashes": "#",
    "stars": "*",
    "pipes": "|",
    "angles": "<",
    "CJK": "中",
    "emoji": "😀",
    "a.": "a.",
    "a-": "a-",
    "a_": "a_",
    "a:": "a:",
    "a/": "a/",
    "1.": "1.",
    "1.1 ": "1.1 ",
    "aA": "aA",
    "Aa ": "Aa ",
    "a1": "a1",
    "a@": "a@",
    "a(": "a(",
    '\\"': '\\"',
    "- ": "- ",
    "a. ": "a. ",
    "12→": "12→",
    "--a ": "--a ",
    "$ ": "$ ",
    "a=1 ": "a=1 ",
    "x×": "x×",
}


def run_of(unit: str, size: int = MEGABYTE) -> str:
    """`unit` repeated to `size` characters."""
    return (unit * (size // len(unit) + 1))[:size]


def within_deadline(work: Callable[[], Any]) -> None:
    """Run `work` on a thread and fail when it is not done by the deadline (see above)."""
    failure: list[BaseException] = []

    def body() -> None:
        try:
            result = work()
            if isinstance(result, Iterable) and not isinstance(result, str | bytes | dict):
                for _ in result:
                    pass
        except Exception as exc:  # the extractor may refuse the text; it must not hang
            failure.append(exc)

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(DEADLINE_SECONDS)
    assert not worker.is_alive(), f"still scanning after the issue's {DEADLINE_SECONDS:g} s bound"


# Every pure function that reads a message's text, by name.
EXTRACTORS: dict[str, Callable[[str], Any]] = {
    "collect.spec_rules": collect.spec_rules,
    "decisions.decisions": decisions.decisions,
    "decisions.reasons": decisions.reasons,
    "digest.note_text": digest.note_text,
    "digest.value_tokens": digest.value_tokens,
    "digest.value_count": digest.value_count,
    "digest.output_digest": digest.output_digest,
    "digest.file_held": digest.file_held,
    "digest.json_digest": digest.json_digest,
    "digest.calls_made": digest.calls_made,
    "digest.code_outline": digest.code_outline,
    "digest.task_gist": lambda t: digest.task_gist(t, 400),
    "digest.request_gist": digest.request_gist,
    "fixes.refusal": fixes.refusal,
    "model.state_subject": model.state_subject,
    "progress.shell_work": progress.shell_work,
    "progress.commit_lines": progress.commit_lines,
    "progress.test_tally": progress.test_tally,
    "progress.push_ok": progress.push_ok,
    "progress.push_target": progress.push_target,
    "progress.exit_failed": progress.exit_failed,
    "progress.titles": progress.titles,
    "records.read_record": records.read_record,
    "scan.offered": offered,
    "terms.clean_path": terms.clean_path,
    "terms.paths_in": lambda t: list(terms.paths_in(t, prose=True)),
    "terms.terms_in": lambda t: list(terms.terms_in(t)),
    "terms.symbols_in": lambda t: list(terms.symbols_in(t, code=True)),
    "terms.message_symbols": terms.message_symbols,
    "terms.parse_arguments": terms.parse_arguments,
    "terms.shell_modified": terms.shell_modified,
    "terms.error_key": terms.error_key,
    "terms.error_names": terms.error_names,
    "terms.unnumbered": terms.unnumbered,
    "terms.error_lines": terms.error_lines,
    "text.one_line": text.one_line,
    "text.is_trivial": text.is_trivial,
    "text.forbids": text.forbids,
    "text.constraint_sentences": text.constraint_sentences,
    "text.heading_rules": text.heading_rules,
    "text.injected_rules": text.injected_rules,
    "text.clean_user_text": text.clean_user_text,
    "text.fix_text": text.fix_text,
    "text.first_line": text.first_line,
    "verify.fold": verify.fold,
    "verify.folded_text": verify.folded_text,
    "brief.parse_brief": read.parse_brief,
    "brief.wanted_sections": sections.wanted_sections,
    "brief.subject_of": state.subject_of,
    "packaging.js_trim": packaging.js_trim,
    "jscompat.js_restringify": jscompat.js_restringify,
    "jscompat.utf16_len": jscompat.utf16_len,
    "textfeatures.text_features": textfeatures.text_features,
    "messages.nested_too_deep": nested_too_deep,
}


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_every_extractor_reads_a_megabyte_run_within_the_bound(run: str) -> None:
    hostile = run_of(run)
    for name, extract in EXTRACTORS.items():
        try:
            within_deadline(partial(extract, hostile))
        except AssertionError as exc:
            raise AssertionError(f"{name} on a megabyte of {run!r}: {exc}") from None


PLACES = ("user", "assistant", "arguments", "tool")


def _conversation(hostile: str, place: str) -> list[dict[str, Any]]:
    """A conversation with the run in one `place`: the user's words, the agent's prose, a tool
    call's arguments (raw, not JSON) or the tool's output."""
    return [
        {"role": "user", "content": "Fix the failing build in /repo, port 8080."},
        {"role": "user", "content": hostile if place == "user" else "go on"},
        {"role": "assistant", "content": hostile if place == "assistant" else "On it."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": hostile if place == "arguments" else '{"cmd": "make"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": hostile if place == "tool" else "ok"},
        {"role": "user", "content": "and now?"},
        {"role": "assistant", "content": "Done: the build passes."},
    ]


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_a_compaction_over_a_megabyte_run_finishes_within_the_bound(run: str) -> None:
    hostile = run_of(run, MAX_MESSAGE_CHARS - 10)  # under the size limit every entry enforces
    for place in PLACES:
        session = Session(MemoryStore(), "c", settings=CompactionSettings(context_window=8_000_000))
        try:
            within_deadline(partial(session.append, *_conversation(hostile, place)))
            within_deadline(partial(session.compact, trigger="manual"))
            within_deadline(session.prompt)
        except AssertionError as exc:
            raise AssertionError(f"a megabyte of {run!r} in the {place}: {exc}") from None
        assert len(session.history()) == 7


# --- Arguments nested at any depth, lone surrogates -----------------------------------------

DEEP = "[" * 1000 + "]" * 1000


def _call_with(arguments: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}
        ],
    }


def test_arguments_nested_past_the_limit_are_refused_before_anything_is_written(
    any_store: ConversationStore,
) -> None:
    session = Session(any_store, "deep", settings=CompactionSettings(context_window=2000))
    session.append({"role": "user", "content": "go"})
    with pytest.raises(InvalidMessage) as refused:
        session.append(_call_with(DEEP), {"role": "tool", "tool_call_id": "c1", "content": "ok"})
    assert str(refused.value) == (
        "message 0: tool_calls[0].function.arguments nested deeper than 64 levels"
    )
    assert refused.value.field == "tool_calls[0].function.arguments"
    built = Message(role="assistant", tool_calls=(ToolCall("c1", "bash", DEEP),))
    with pytest.raises(InvalidMessage, match="arguments nested deeper than 64"):
        session.append(built)
    assert [m.content for m in session.history()] == ["go"]
    session.append(
        _call_with('{"cmd": "ls"}'), {"role": "tool", "tool_call_id": "c1", "content": "a"}
    )
    assert session.prompt() and session.compact().messages_count_before == 3


def test_a_conversation_already_holding_deep_arguments_still_reads_and_compacts(
    any_store: ConversationStore,
) -> None:
    # Written below the session's check, as a store written before it holds them.
    any_store.append(
        "old",
        [
            Message(role="user", content="go"),
            Message(role="assistant", tool_calls=(ToolCall("c1", "bash", DEEP),)),
            Message(role="tool", tool_call_id="c1", content="[" * 5000 + "]" * 5000),
            Message(role="user", content="and then?"),
            Message(role="assistant", content="done"),
        ],
    )
    session = Session(any_store, "old", settings=CompactionSettings(context_window=2000))
    assert len(session.context()) == 5
    assert session.prompt()
    assert session.compact().messages_count_before == 5
    assert session.prompt()


@pytest.mark.parametrize("parser", [terms.parse_arguments, jscompat.js_restringify])
def test_parsers_of_message_text_never_recurse_out_of_the_stack(
    parser: Callable[[str], Any],
) -> None:
    for hostile in (DEEP, "{" + '"a":{' * 100_000, "[" * MEGABYTE):
        parser(hostile)  # no RecursionError: too deep is not JSON here
    assert digest.json_digest(DEEP) is None
    assert records.read_record('{"id": "a", "x": ' + "[" * 3000 + "]" * 3000 + "}") is None


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5), st.lists, max_leaves=40))
def test_the_nesting_scan_agrees_with_the_parser(value: Any) -> None:
    text_ = json.dumps(value)
    depth = _depth(value)
    assert nested_too_deep(text_) == (depth > 64)
    assert parse_json(text_) == value if depth <= 64 else True


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "user", "content": "a\ud800b"}, "content"),
        (_call_with('{"cmd": "\udfff"}'), "arguments"),
        ({"role": "user", "content": "x", "name": "\ud800"}, "name"),
        ({"role": "user", "content": [{"type": "text", "text": "\ud83d"}]}, "content part"),
    ],
)
def test_a_lone_surrogate_is_refused_in_one_line_and_nothing_is_written(
    any_store: ConversationStore, message: dict[str, Any], field: str
) -> None:
    session = Session(any_store, "s", settings=CompactionSettings(context_window=2000))
    session.append({"role": "user", "content": "first"})
    with pytest.raises(InvalidMessage) as refused:
        session.append({"role": "user", "content": "fine 😀"}, message)
    assert str(refused.value).startswith("message 1: contains a lone surrogate (U+D")
    assert len(str(refused.value).splitlines()) == 1
    with pytest.raises(InvalidMessage, match="lone surrogate"):
        session.append(Message(role="user", content="\ud800"))
    with pytest.raises(InvalidMessage, match="lone surrogate"):
        session.append(Message(role="tool", tool_call_id="\udc00", content="x"))
    assert [m.content for m in session.history()] == ["first"]
