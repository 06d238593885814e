"""Hostile text: a long run of one character class (or a short alternation) reaches every
extractor and a whole compaction, and each scan grows linearly with it; the linear rewrites of
the scans find what the patterns they replace found."""

from __future__ import annotations

import gc
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from precis.core import jscompat, textfeatures
from precis.core.errors import InvalidMessage
from precis.core.memo import CALL_ENTRIES, Bounded
from precis.core.messages import (
    Message,
    ToolCall,
    nested_too_deep,
    parse_json,
)
from precis.core.tokens import TextEstimator, TiktokenCounter, letta_chars
from precis.engine.settings import CompactionSettings
from precis.facts import (
    collect,
    decisions,
    demos,
    fixes,
    gist,
    language,
    model,
    patterns,
    progress,
    records,
    rules,
    terms,
    text,
    verify,
)
from precis.facts.scan import offered, scan, task_scan
from precis.session import Session
from precis.stores import pg_terms, scoring
from precis.stores.base import ConversationStore
from precis.stores.memory import MemoryStore
from precis.summarize import packaging, transcript
from precis.summarize.brief import labels, read, sections, state

# Issue #28 asks for every scan to read a megabyte of hostile text in 2 s. The suite holds the
# shape of that bound, not a time: each scan's CPU cost on a run of BIG characters against its
# cost on GROWTH runs of BIG / GROWTH characters (the same characters in all). A linear scan
# costs about the same both ways (the short runs pay more call overhead); a quadratic one costs
# GROWTH (8) times more on the long run. The bound, MAX_RATIO, sits about a factor of 3 from
# each. BIG is past the 4,300 digits Python parses into an int (a bounded quadratic, refused
# beyond) and BIG / GROWTH past the lengths the extractors answer whole without scanning. The
# figures on a megabyte, and the ratio t(1 MB) / t(250 KB), are bench/hostile.py's
# (bench/README.md).
GROWTH = 8
BIG = 4_800
MAX_RATIO = 3.0
ATTEMPTS = 5
# A hang guard, not a measure: a scan not done by then is stuck.
HANG_SECONDS = 60.0
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
    "CJK stops": "中。",
    "emoji": "😀",
    "replacement": "\ufffd",
    "a.": "a.",
    "a-": "a-",
    "a_": "a_",
    "a:": "a:",
    "a/": "a/",
    "/a": "/a",
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
    "never ": "never ",
    "must. ": "You must. ",
    "不要": "不要",
}


def run_of(unit: str, size: int = MEGABYTE) -> str:
    """`unit` repeated to `size` characters."""
    return (unit * (size // len(unit) + 1))[:size]


def consume(work: Callable[[str], Any], hostile: str) -> None:
    """Run `work` on `hostile` to the end (a generator too); a refusal is an answer."""
    try:
        result = work(hostile)
        if isinstance(result, Iterable) and not isinstance(result, str | bytes | dict):
            for _ in result:
                pass
    except Exception:  # the extractor may refuse the text; it must not take long over it
        pass


def cpu_seconds(work: Callable[[], None]) -> float:
    """The CPU time this thread spends on `work` (no other thread's), the collector held off."""
    gc.disable()
    try:
        start = time.thread_time()
        work()
        return time.thread_time() - start
    finally:
        gc.enable()


def growth(work: Callable[[str], Any], unit: str, big: int = BIG, times: int = GROWTH) -> float:
    """The cost of `work` on one run of `big` characters over its cost on `times` runs of
    big / times: about 1 (or less) for a linear scan, about `times` for a quadratic one. Each
    cost is the least of up to ATTEMPTS measures, taken again only while over the bound (a
    measure is only ever too high: the thread was interrupted, a cache was cold)."""
    long_run, short_run = run_of(unit, big), run_of(unit, big // times)
    consume(work, short_run)  # warm: compiled patterns, first-call work
    short = long = float("inf")
    for _ in range(ATTEMPTS):
        short = min(short, cpu_seconds(lambda: [consume(work, short_run) for _ in range(times)]))
        long = min(long, cpu_seconds(lambda: consume(work, long_run)))
        if long <= MAX_RATIO * short:
            break
    return long / max(short, 1e-9)


def unhung(work: Callable[[], Any]) -> Any:
    """`work()` on a thread, failing when it is still running after HANG_SECONDS."""
    answer: list[Any] = []
    worker = threading.Thread(target=lambda: answer.append(work()), daemon=True)
    worker.start()
    worker.join(HANG_SECONDS)
    assert not worker.is_alive(), f"still running after {HANG_SECONDS:g} s"
    assert answer, "the work raised"
    return answer[0]


def _user(t: str) -> Any:
    return scan(Message(role="user", content=t))


def _assistant(t: str) -> Any:
    return scan(Message(role="assistant", content=t))


def _call(t: str) -> Any:
    return scan(Message(role="assistant", tool_calls=(ToolCall("c1", "bash", t),)))


def _tool(t: str) -> Any:
    return scan(Message(role="tool", tool_call_id="c1", content=t))


_TIKTOKEN = TiktokenCounter()

# Every function that reads a message's text, by name.
EXTRACTORS: dict[str, Callable[[str], Any]] = {
    "collect.spec_rules": collect.spec_rules,
    "decisions.decisions": decisions.decisions,
    "decisions.reasons": decisions.reasons,
    "demos.request_part": demos.request_part,
    "gist.note_text": gist.note_text,
    "gist.value_tokens": gist.value_tokens,
    "gist.value_count": gist.value_count,
    "gist.output_gist": gist.output_gist,
    "gist.file_held": gist.file_held,
    "gist.json_gist": gist.json_gist,
    "gist.calls_made": gist.calls_made,
    "gist.code_outline": gist.code_outline,
    "gist.task_gist": lambda t: gist.task_gist(t, 400),
    "gist.request_gist": gist.request_gist,
    "fixes.refusal": fixes.refusal,
    "language.is_chinese": lambda t: language.is_chinese([t]),
    "model.state_subject": model.state_subject,
    "progress.shell_work": progress.shell_work,
    "progress.commit_lines": progress.commit_lines,
    "progress.test_tally": progress.test_tally,
    "progress.push_ok": progress.push_ok,
    "progress.push_target": progress.push_target,
    "progress.exit_failed": progress.exit_failed,
    "progress.titles": progress.titles,
    "progress.children": lambda t: progress.children(t, "src"),
    "records.read_record": records.read_record,
    "scan.offered": offered,
    "scan.scan user": _user,
    "scan.scan assistant": _assistant,
    "scan.scan call": _call,
    "scan.scan tool": _tool,
    "scan.task_scan": task_scan,
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
    "terms.basename": terms.basename,
    "text.one_line": text.one_line,
    "text.shorten": lambda t: text.shorten(t, 80, t.split(".")),
    "text.compact": lambda t: text.compact(t, 80),
    "text.is_trivial": text.is_trivial,
    "text.forbids": text.forbids,
    "rules.constraint_sentences": rules.constraint_sentences,
    "text.heading_rules": text.heading_rules,
    "text.injected_rules": text.injected_rules,
    "text.listed_rules": lambda t: text.listed_rules(t, ()),
    "text.clean_user_text": text.clean_user_text,
    "text.fix_text": text.fix_text,
    "text.first_line": text.first_line,
    "verify.fold": verify.fold,
    "verify.folded_text": verify.folded_text,
    "brief.parse_brief": read.parse_brief,
    "brief.wanted_sections": sections.wanted_sections,
    "brief.subject_of": state.subject_of,
    "packaging.js_trim": packaging.js_trim,
    "transcript.middle_truncate": lambda t: transcript.middle_truncate(t, 200),
    "jscompat.js_restringify": jscompat.js_restringify,
    "jscompat.utf16_len": jscompat.utf16_len,
    "textfeatures.text_features": textfeatures.text_features,
    "tokens.estimate": TextEstimator().count_text,
    "tokens.tiktoken": _TIKTOKEN.count_text,
    "tokens.letta_chars": lambda t: letta_chars(Message(role="user", content=t)),
    "messages.nested_too_deep": nested_too_deep,
    "scoring.search_text_of": lambda t: scoring.search_text_of(t, (ToolCall("c", "bash", t),)),
    "scoring.query_terms": scoring.query_terms,
    "scoring.term_score": lambda t: scoring.term_score(t, ["aa", "--", "中中"]),
    "scoring.snippet": lambda t: scoring.snippet(t, ["zz", "a."]),
    "pg_terms.caseless": pg_terms.caseless,
    "pg_terms.doc_text": lambda t: pg_terms.doc_text(t, t),
    "pg_terms.term_trigrams": pg_terms.term_trigrams,
}


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_every_extractor_grows_linearly_on_a_long_run(run: str) -> None:
    ratios = unhung(lambda: {name: growth(extract, run) for name, extract in EXTRACTORS.items()})
    steep = {name: round(r, 1) for name, r in ratios.items() if r > MAX_RATIO}
    assert not steep, f"super-linear on a run of {run!r} (cost ratio, linear ~1, quadratic ~16)"


PLACES = ("user", "assistant", "arguments", "tool")


def _conversation(hostile: str, places: Iterable[str] = PLACES) -> list[dict[str, Any]]:
    """A conversation with the run in each of `places`: the user's words, the agent's prose, a
    tool call's arguments (raw, not JSON) or the tool's output."""

    def at(place: str, plain: str) -> str:
        return hostile if place in places else plain

    return [
        {"role": "user", "content": "Fix the failing build in /repo, port 8080."},
        {"role": "user", "content": at("user", "go on")},
        {"role": "assistant", "content": at("assistant", "On it.")},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": at("arguments", '{"cmd": "make"}')},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": at("tool", "ok")},
        {"role": "user", "content": "and now?"},
        {"role": "assistant", "content": "Done: the build passes."},
    ]


def _places(hostile: str) -> tuple[str, ...]:
    """Every place, but not the arguments when the run nests too deep (refused there)."""
    return PLACES if not nested_too_deep(hostile) else PLACES[:2] + PLACES[3:]


def compaction_over(hostile: str) -> Session:
    """A whole append, compaction and prompt over a conversation holding `hostile`."""
    session = Session(MemoryStore(), "c", settings=CompactionSettings(context_window=8_000_000))
    session.append(*_conversation(hostile, _places(hostile)))
    session.compact(trigger="manual")  # the policy's own choice: the masking tier first
    session.compact("sliding_window", trigger="manual")  # a summary
    session.prompt()
    return session


# A compaction pays a fixed cost per conversation, so its short runs are fewer and longer: a
# quadratic compaction costs COMPACTION_GROWTH (8) times more on the long run, twice the bound.
COMPACTION_GROWTH = 8
COMPACTION_BIG = 4_800


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_a_whole_compaction_grows_linearly_on_a_long_run(run: str) -> None:
    long_run = run_of(run, COMPACTION_BIG)
    short_run = run_of(run, COMPACTION_BIG // COMPACTION_GROWTH)
    sessions: list[Session] = []

    def costs() -> tuple[float, float]:
        short = cpu_seconds(lambda: [compaction_over(short_run) for _ in range(COMPACTION_GROWTH)])
        long = cpu_seconds(lambda: sessions.append(compaction_over(long_run)))
        return short, long

    short, long = unhung(costs)
    if long > MAX_RATIO * short:  # measured again before it fails
        short, long = unhung(costs)
    assert long <= MAX_RATIO * short, f"a compaction over {run!r}: cost ratio {long / short:.1f}"
    kinds = [m.kind for m in sessions[-1].history()]
    assert kinds.count("message") == 7 and kinds.count("summary") == 1, kinds


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
    assert gist.json_gist(DEEP) is None
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


# --- The linear scans find what the patterns they replace found -----------------------------

# The patterns as they were (each rescanned a run from every character of it).
OLD_TOKEN_RE = re.compile(r"[A-Za-z0-9_@:.-]*\d[A-Za-z0-9_@:.-]*")
OLD_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
OLD_REDIRECT_RE = re.compile(r"\s+\d*>>?&?\s*\S+")
OLD_PUSH_OK_RE = re.compile(r"(?m)^\s*(?:[+*=-]|[0-9a-f]{7,}\.\.)\S*\s.*->\s*\S+|up-to-date")
OLD_PUSH_REF_RE = re.compile(r"(?m)^\s*\S+\s+\S+\s+->\s+(\S+)")
OLD_HEADING_ROOT_RE = re.compile(r"\s*\((?:in|目录) ([^)]*)\)\s*$")
OLD_COUNT_RE = re.compile(r"([^\s,×]+)×(\d+)")
OLD_NUMBER_PREFIX_RE = re.compile(r"(?m)^\s*\d+(?:→|\t)")
OLD_QUOTED_RE = re.compile(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'')
PIECES = [*"aZ1٣\u0661 \t\n\r.@-_%+>&,×()\"'\\*", "in ", "目录 ", "->", "up-to-date", "→"]
PIECES += ["abcdef1..", "x.com", "(in ", "b c", "1. ", "x:", "A"]
SHORT_TEXTS = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def _spans(pattern: re.Pattern[str], text_: str) -> list[tuple[tuple[int, int], Any]]:
    return [(m.span(), m.groups()) for m in pattern.finditer(text_)]


@pytest.mark.property
@given(SHORT_TEXTS)
def test_the_linear_scans_find_what_the_old_patterns_found(sample: str) -> None:
    assert OLD_TOKEN_RE.findall(sample) == gist._TOKEN_RE.findall(sample)
    assert _spans(OLD_REDIRECT_RE, sample) == _spans(progress._REDIRECT_RE, sample)
    assert _spans(OLD_HEADING_ROOT_RE, sample) == _spans(labels.HEADING_ROOT_RE, sample)
    assert (OLD_PUSH_OK_RE.search(sample) is None) == (progress._PUSH_OK_RE.search(sample) is None)
    old_ref, new_ref = OLD_PUSH_REF_RE.search(sample), progress._PUSH_REF_RE.search(sample)
    assert (old_ref and old_ref.group(1)) == (new_ref and new_ref.group(1))
    counted = [(name, n) for name, n in labels.COUNT_RE.findall(sample) if n]
    assert OLD_COUNT_RE.findall(sample) == counted
    email = next((m.group(0) for m in patterns.EMAIL_RE.finditer(sample) if m.group(1)), None)
    old_email = OLD_EMAIL_RE.search(sample)
    assert (old_email and old_email.group(0)) == email
    assert OLD_NUMBER_PREFIX_RE.sub("", sample) == terms.unnumbered(sample)
    quoted = [m.group(1) or m.group(2) or "" for m in OLD_QUOTED_RE.finditer(sample)]
    assert quoted == [q or "" for q in terms._quoted_texts(sample)]


_TOKENS = st.sampled_from(
    [
        "1.1",
        "a.",
        "port",
        "is",
        "8080",
        ":8080",
        "issue",
        "#12",
        "[main",
        "abc1234]",
        "src/a.py",
        "x@y.io",
        "PR-7",
        "v2.0.1",
        "1100",
        "\n",
        "a=1",
        "端口",
        "日本1.2",
    ]
)


@pytest.mark.property
@given(st.lists(_TOKENS, max_size=60), st.booleans())
def test_the_per_call_memo_of_terms_in_yields_what_reading_every_token_yields(
    words: list[str], prose: bool
) -> None:
    """The memo that reads a repeated token once answers as reading each token afresh does."""
    text = " ".join(words)
    assert list(terms._token_terms(text, prose, Bounded(CALL_ENTRIES))) == list(
        terms._token_terms(text, prose, None)
    )


_SENTENCES = st.sampled_from(
    ["Thanks!", "Thank you.", "Great, thanks.", "Use uv.", "a.", "Fix  the\\nbug.", "", "  ", "?"]
)


@pytest.mark.property
@given(st.lists(_SENTENCES, max_size=40), st.sampled_from([" ", "\n", "  "]))
def test_request_gist_reading_a_repeated_sentence_once_keeps_what_reading_each_keeps(
    sentences: list[str], joint: str
) -> None:
    """The gist's memo of sentences met before drops and keeps what the plain rule does."""
    joined = joint.join(sentences)
    lines = [text.one_line(p) for p in patterns.SENTENCE_SPLIT_RE.split(joined)]
    kept = [line for line in lines if line and not gist._is_courtesy(line)]
    assert gist.request_gist(joined) == (" ".join(kept) if kept else text.one_line(joined))


_RULE_SENTENCES = st.sampled_from(
    ["You must.", "Never use npm.", "Use uv.", "ok", "It must be done.", "Do not push!", "a.", "\n"]
)


@pytest.mark.property
@given(st.lists(_RULE_SENTENCES, max_size=40))
def test_constraint_sentences_judging_a_repeated_sentence_once_finds_what_judging_each_finds(
    sentences: list[str],
) -> None:
    """The rule finder's memo of sentences judged before finds the rules the plain rule finds."""
    joined = " ".join(sentences)
    plain = [
        sentence
        for line in rules._prose_lines(joined)
        for sentence in map(rules._clean, patterns.SENTENCE_SPLIT_RE.split(line))
        if len(sentence) >= 6 and rules.is_rule(sentence)
    ]
    assert rules.constraint_sentences(joined) == plain
