"""precis.facts: scans remembered per message stay right, the folded context, token edges."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from precis.core.jscompat import utf16_len
from precis.core.messages import Message
from precis.facts import Fact, context_text, extract_facts, fact_present, fold, missing_facts
from precis.facts.verify import ContextText


def texts(messages: list[Message]) -> list[str]:
    return [f.text for f in extract_facts(messages)]


def test_a_view_that_keeps_the_id_gets_the_facts_of_its_own_text() -> None:
    first = Message(role="user", id="m1", content="Fix src/app/main.py, never use npm.")
    assert "src/app/main.py" in texts([first])
    shown = replace(first, content="Fix lib/other/util.py please, and keep going with it.")
    found = texts([shown])
    assert "lib/other/util.py" in found and "src/app/main.py" not in found
    assert "src/app/main.py" in texts([first])


def test_the_context_text_carries_its_folded_form() -> None:
    messages = [
        Message(role="user", id="a", content="  Never   USE npm\n"),
        Message(role="user", id="b", content=""),
        Message(role="user", id="c", content="Straße\tPORT 8080", metadata={"summary": "old"}),
    ]
    text = context_text(messages)
    assert isinstance(text, ContextText) and text.folded == fold(str(text))
    assert missing_facts([Fact("constraint", "never use npm", "a")], text) == []


def test_paths_and_identifiers_must_stand_as_whole_tokens() -> None:
    text = "see `src/app.py`, not src/app.pyc; v1.2.3 and xv1.2.34 and 12345-6"
    for needle in ("src/app.py", "src/app", "app.py", "v1.2.3", "1.2.3", "2345", "12345"):
        path = re.search(rf"(?<![\w.\-]){re.escape(needle)}(?![\w\-]|\.\w)", text) is not None
        token = re.search(rf"(?<![A-Za-z0-9]){re.escape(needle)}(?![A-Za-z0-9])", text)
        assert (missing_facts([Fact("file_read", needle, "x")], text) == []) == path
        assert (missing_facts([Fact("identifier", needle, "x")], text) == []) == (token is not None)


def test_a_remembered_ledger_reads_back_as_its_json_would() -> None:
    """`remember_ledger` spares the parse only when the parse would give the same ledger."""
    from precis.core.memo import Memo
    from precis.core.messages import KIND_SUMMARY
    from precis.facts import Ledger, remember_ledger, stored_ledger
    from precis.facts.extract import LEDGERS

    memo = Memo()
    ledger = Ledger((Fact("task", "ship it", "m1"), Fact("error", "E1 boom", "m2", "retry")))
    summary = Message(
        role="user", kind=KIND_SUMMARY, id="sum-remembered", metadata={"ledger": ledger.to_json()}
    )
    assert remember_ledger(summary, ledger, memo)  # noted, its strings plain
    copy = replace(summary, metadata={"ledger": [dict(item) for item in ledger.to_json()]})
    assert stored_ledger(copy, memo) is ledger
    assert stored_ledger(copy, memo) == Ledger.from_json(copy.metadata["ledger"])
    assert stored_ledger(copy) is not ledger  # without the memo it was noted in: parsed
    assert stored_ledger(copy) == ledger

    # A blank text would be dropped by the parse, so such a ledger is not remembered.
    odd = Ledger((Fact("task", "ship it", "m1"), Fact("request", "  ", "m2")))
    other = Message(
        role="user", kind=KIND_SUMMARY, id="sum-blank", metadata={"ledger": odd.to_json()}
    )
    assert not remember_ledger(other, odd, memo)
    assert "sum-blank" not in memo[LEDGERS]
    assert stored_ledger(other, memo) == Ledger((Fact("task", "ship it", "m1"),))

    # A kind that is a str but not plain JSON data: not noted, so not vouched for as plain.
    class Kind(str):
        pass

    unusual = Ledger((Fact(Kind("task"), "ship it", "m1"),))  # type: ignore[arg-type]
    third = replace(summary, id="sum-kind", metadata={"ledger": unusual.to_json()})
    assert not remember_ledger(third, unusual, memo)


CARRIED_FACTS = (
    Fact("constraint", "never use npm", "u1"),
    Fact("task", "ship the parser", "task"),
    Fact("state", "web-12: done", "progress"),
    Fact("state", "web-13: in progress", "progress"),
    Fact("file_modified", "src/app/main.py", "a1"),
    Fact("file_read", "src/app/util.py", "a2"),
    Fact("identifier", "v1.2.3", "a3"),
    Fact("request", "Fix lib/other/util.py please", "u2"),
)
SPAN_WORDS = (
    "Never use npm.",
    "Fix src/app/main.py please.",
    "Fix lib/other/util.py please",
    "Release v1.2.3 today.",
    "Read src/app/util.py first.",
    "Always run the tests.",
)


@pytest.mark.property
@given(
    carried=st.lists(st.sampled_from(CARRIED_FACTS), unique=True),
    said=st.lists(st.sampled_from(SPAN_WORDS), min_size=1, max_size=4),
    task=st.sampled_from((None, "ship the parser")),
)
def test_a_span_gives_the_same_facts_whether_its_ledger_was_remembered_or_parsed(
    carried: list[Fact], said: list[str], task: str | None
) -> None:
    """A carried ledger `remember_ledger` noted is read with its facts' (kind, text), so only
    the span's own facts are looked up; the facts are those the parsed ledger gives."""
    from precis.core.memo import Memo
    from precis.core.messages import KIND_SUMMARY
    from precis.facts import Ledger, remember_ledger

    memo = Memo()
    ledger = Ledger(tuple(carried))
    summary = Message(
        role="user", kind=KIND_SUMMARY, id="sum-carried", metadata={"ledger": ledger.to_json()}
    )
    assert remember_ledger(summary, ledger, memo)
    parsed = replace(summary, id="", metadata={"ledger": ledger.to_json()})  # not remembered
    span = [Message(role="user", id=f"said-{i}", content=text) for i, text in enumerate(said)]
    remembered = extract_facts([summary, *span], task=task, memo=memo)
    assert remembered == extract_facts([parsed, *span], task=task)


@pytest.mark.property
@given(
    pieces=st.lists(
        st.sampled_from(("#", "pr", "issue", "ticket", " ", "\t", "x", "_", "-", "1", "2", "12")),
        max_size=12,
    ),
    number=st.sampled_from(("1", "12", "2")),
)
@example(pieces=["x", "pr", " ", "12"], number="12")
@example(pieces=["pr", " ", "#", " ", "12"], number="12")
@example(pieces=["-", "ticket", "#", "12", "x"], number="12")
@example(pieces=["#", "12"], number="1")
def test_a_ticket_is_found_as_the_one_pattern_finds_it(pieces: list[str], number: str) -> None:
    """The ticket test runs one pattern per branch, each led by a literal; the answer is the one
    pattern's."""
    text = "".join(pieces)
    one = re.compile(rf"(?:#|\b(?:pr|issue|ticket)\s*#?\s*){number}(?!\d)")
    assert fact_present(Fact("identifier", f"#{number}", "x"), text) == (
        one.search(fold(text)) is not None
    )


# Pieces of folded text that make facts stand, almost stand, and stand across a join; the long
# ones put an occurrence past the windows a fact absent last time is looked for in.
PIECES = ("a", "1", "-", ".", "/", "#1", "pr", "x/a.py", "done", "web-1:", "1a2b3c4", " ")
FILLERS = ("z" * 130, "y " * 450)
KEPT_FACTS = (
    Fact("file_read", "x/a.py", "s"),
    Fact("file_read", "a.py", "s"),
    Fact("identifier", "#1", "s"),
    Fact("identifier", "1a2b3c4", "s"),
    Fact("state", "web-1: done", "s"),
    Fact("state", "web-1: done, committed 1a2b3c4", "s"),
    Fact("constraint", "a 1", "s"),
    Fact("constraint", "done x/a.py", "s"),
    Fact("task", "1 - a", "s"),
)


def assert_holders_hold(kept: Any) -> None:
    """What KeptFacts remembers as the part holding a fact does hold it, alone."""
    from precis.facts.verify import _matcher

    parts, found, facts = kept._last[:3]
    for fact in facts:
        held = found[id(fact)][0]
        assert held < 0 or _matcher(fact.kind, fact.text)(parts[held])


@pytest.mark.property
@given(
    steps=st.lists(
        st.tuples(
            st.booleans(),  # a new first part (another task pinned)
            st.integers(0, 4),  # parts dropped after the first, as a compaction evicts them
            st.lists(
                st.lists(st.sampled_from(PIECES + FILLERS), min_size=1, max_size=8), max_size=4
            ),
            st.sets(st.sampled_from(KEPT_FACTS), min_size=1),  # the facts asked about
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_kept_facts_answer_as_the_whole_text_does(
    steps: list[tuple[bool, int, list[list[str]], set[Fact]]],
) -> None:
    """What `KeptFacts` carries from one check to the next never changes an answer: each check
    finds missing exactly the facts that the parts joined by spaces lack."""
    from precis.facts import KeptFacts, missing_from_folded

    kept = KeptFacts()
    parts: list[str] = []
    seen: list[Message] = []
    for repin, drop, added, asked in steps:
        new = [p for p in (fold(" ".join(words)) for words in added) if p]
        first = new[:1] if repin else parts[:1]
        parts = first + parts[1 + drop :] + new[1 if repin else 0 :]
        facts = sorted(asked, key=KEPT_FACTS.index)
        assert kept.missing(facts, parts) == missing_from_folded(facts, " ".join(parts))
        assert_holders_hold(kept)
        # The same parts and more, asked of other facts (a ledger that grew).
        more = [*parts, *new[:1]]
        assert kept.missing(KEPT_FACTS, more) == missing_from_folded(KEPT_FACTS, " ".join(more))
        assert_holders_hold(kept)
        assert kept.missing(facts, parts) == missing_from_folded(facts, " ".join(parts))
        # Messages observed as they come (here: the parts as messages) change no answer.
        seen = seen[drop:] + [Message(role="user", content=p, id=f"m{id(p)}") for p in new]
        kept.observe(seen)
        kept.observe_more(seen[-1:])
        again = [m.content for m in seen]
        assert kept.missing(facts, again) == missing_from_folded(facts, " ".join(again))


@pytest.mark.property
@given(
    parts=st.lists(
        st.lists(st.sampled_from(PIECES + FILLERS), min_size=1, max_size=8).map(
            lambda words: fold(" ".join(words))
        ),
        max_size=6,
    ),
    fact=st.sampled_from(KEPT_FACTS),
)
def test_the_holder_found_from_the_end_is_the_newest_part_holding_the_fact(
    parts: list[str], fact: Fact
) -> None:
    """`_held` finds the parts holding a fact's anchor by where it occurs in the whole; what it
    notes is what testing each part, newest first, and then the whole would note."""
    from precis.facts.kept import _ABSENT, _SPREAD, _held
    from precis.facts.verify import _probe

    test, anchor, _ = _probe(fact.kind, fact.text)
    text = " ".join(parts)
    plain = next((i for i in range(len(parts) - 1, -1, -1) if test(parts[i])), None)
    if plain is None:
        plain = _SPREAD if test(text) else _ABSENT
    assert _held(test, anchor, parts, text, False) == plain


def test_kept_facts_look_across_a_join_an_eviction_made() -> None:
    """Parts that stood apart last time and now stand together may hold a fact between them."""
    from precis.facts import KeptFacts

    fact = Fact("constraint", "never use npm", "s")
    first, middle, last = fold("Never use"), fold("x" * 300), fold("npm, only pnpm")
    kept = KeptFacts()
    assert kept.missing([fact], [first, middle, last]) == [fact]
    assert kept.missing([fact], [first, last]) == []
    assert kept.missing([fact], [first, middle, last]) == [fact]


def test_kept_facts_observed_as_messages_come_see_across_their_joins() -> None:
    """A fact that the last message and the one appended after it hold between them is held."""
    from precis.facts import KeptFacts, folded_text_parts

    fact = Fact("constraint", "never use npm", "s")
    older = [Message(role="user", content=f"step {i}", id=f"o{i}") for i in range(3)]
    kept = KeptFacts()
    assert kept.missing([fact], [fold(m.content) for m in older]) == [fact]
    said = Message(role="user", content="We never use", id="s1")
    kept.observe([*older, said])
    added = Message(role="user", content="NPM here.", id="s2")
    kept.observe_more([added])
    parts = [part for m in (*older, said, added) for part in folded_text_parts(m) if part]
    assert kept.missing([fact], parts) == []


@pytest.mark.parametrize("name", ["OpenHands", "SWE-agent", "software-agent-sdk"])
def test_a_replay_read_ahead_gives_the_facts_a_replay_of_the_span_gives(name: str) -> None:
    """`extract_facts` fed the rest of a span after a replay of its first messages finds what it
    finds replaying the span; a replay of other messages, or of another task, it does not use."""
    from conformance import TRAJECTORY_FILES, trajectory_as_openai

    from precis.core.messages import messages_from_openai
    from precis.facts.extract import Replay

    path = next(p for p in TRAJECTORY_FILES if p.name.startswith(name))
    messages = messages_from_openai(trajectory_as_openai(path))[:80]
    task = next(m.content for m in messages if m.role == "user")
    for end in (6, 30, 80):
        span = messages[1:end]
        expected = extract_facts(span, task=task)
        for ahead in (0, 1, 4, len(span) // 2, len(span)):
            replay = Replay(task)
            replay.feed(span[:ahead])
            assert extract_facts(span, task=task, replay=replay) == expected
            assert replay.fed == span  # fed the rest: a longer span may use it again
    span = messages[1:30]
    for other in (Replay(task), Replay("another task")):
        other.feed(messages[2:5] if other.task == task else span[:3])
        fed = list(other.fed)
        assert extract_facts(span, task=task, replay=other) == extract_facts(span, task=task)
        assert other.fed == fed  # not used, so not fed


@pytest.mark.property
@given(
    text=st.lists(
        st.sampled_from(
            ["a", "bc", " ", "  \n", "\t", "é", "😀", ",", "\u2028", "w" * 40, " " * 30]
        )
    ).map("".join),
    units=st.sampled_from([0, 1, 2, 5, 12, 50, 120]),
)
def test_a_long_text_is_compacted_from_its_head_as_from_the_whole(text: str, units: int) -> None:
    """`compact` of a long text reads only a head of it; its cut is the whole text's."""
    from precis.facts.text import compact, head, one_line

    line = one_line(text)
    if utf16_len(line) <= units:
        plain = line
    else:
        cut = head(line, units)
        space = cut.rfind(" ")
        plain = (cut[:space] if space >= len(cut) // 2 else cut).rstrip(" ,;:")
    assert compact(text, units) == plain


@pytest.mark.property
@given(
    texts=st.lists(st.sampled_from(["", "a b", "Never use NPM", "x/a.py", "  "]), max_size=8),
    first=st.integers(0, 3),
    cut=st.integers(0, 4),
)
def test_the_kept_messages_parts_are_read_off_those_observed(
    texts: list[str], first: int, cut: int
) -> None:
    """What `parts_of` reads off the messages last observed is what folding the kept messages
    gives: the first observed and the last, with a run cut out between them; None for others."""
    from precis.facts import KeptFacts, folded_text_parts

    messages = [Message(role="user", content=t, id=f"k{i}") for i, t in enumerate(texts)]
    kept = KeptFacts()
    kept.missing([Fact("constraint", "never use npm", "s")], [])  # a ledger to observe for
    kept.observe(messages)
    first = min(first, len(messages))
    stays = messages[:first] + messages[min(len(messages), first + cut) :]
    ends: list[int] = []
    parts = kept.parts_of(stays, first, ends)
    plain = [p for m in stays for p in folded_text_parts(m) if p]
    assert parts == plain
    assert ends == [
        sum(1 for m in stays[: i + 1] for p in folded_text_parts(m) if p) for i in range(len(stays))
    ]
    other = [Message(role="user", content="a b", id="other"), *stays]
    assert kept.parts_of(other, 1, []) is None


@pytest.mark.property
@given(
    weight=st.integers(0, 5),
    last=st.integers(0, 99),
    first=st.integers(0, 99),
    heat=st.sampled_from([0.0, 0.5, 1.0, 3.7]),
    warm=st.integers(0, 99),
)
def test_a_keyed_term_ranks_as_the_term_does(
    weight: int, last: int, first: int, heat: float, warm: int
) -> None:
    """The sort key of a keyed term, written out, is the term's own rank."""
    from precis.facts.tally import TermEntry, _rank, _rank_keyed

    term = TermEntry("x", weight, 1, first, "path", last, 0, heat, warm)
    assert _rank_keyed(("x", term)) == _rank(term)
