"""Composition samples as sessions record them, and the audit a compaction leaves on its summary."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from precis import AsyncSession, CompactionSettings, Session
from precis.core.errors import StoreError
from precis.core.messages import Message, ToolCall
from precis.core.tokens import LettaEstimator
from precis.engine.audit import audit_of
from precis.engine.composition import kind_of, measure
from precis.stores import MemoryStore, SQLiteStore
from precis.stores.base import ConversationStore
from precis.stores.samples import PARTS, SAMPLE_KINDS, Sample, check_sample, numbered
from precis.summarize.base import LocalSummarizer, SummaryRequest

RED_LINE = "never touch the legacy/ directory, only add new modules"
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def turn(session: Session, n: int) -> None:
    """One agent turn in three appends: a request, a tool call, its result and the answer."""
    call = ToolCall(f"call_{n}", "read_file", f'{{"path": "src/module_{n}.py"}}')
    session.append(Message(role="user", content=f"step {n}: read module {n} " + "x" * 200))
    session.append(Message(role="assistant", content="", tool_calls=(call,)))
    session.append(
        Message(role="tool", tool_call_id=call.id, content=f"def f{n}(): pass\n" * 30),
        Message(role="assistant", content=f"module {n} defines f{n}."),
    )


def whole(session: Session) -> Sample:
    """The context measured afresh, as a compaction's sample is."""
    system = session.counter.count_text(session.system_prompt())
    tools = session.counter.count_text(json.dumps(session.tools))
    return measure(
        session.view(),
        session.counter,
        kind="append",
        at="now",
        settings=session.settings,
        system_tokens=system,
        tool_tokens=tools,
    )


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ConversationStore:
    if request.param == "memory":
        return MemoryStore()
    return SQLiteStore(tmp_path / "precis.db")


def test_every_turn_records_one_sample_that_adds_up(store: ConversationStore) -> None:
    settings = CompactionSettings(context_window=2000, reserved_tokens=100)
    session = Session(store, "c", LettaEstimator(), settings=settings, tools=TOOLS)
    session.set_system_prompt("You are a careful engineer.")
    appends = compactions = 0
    for n in range(16):
        turn(session, n)
        appends += 3
        compactions += len(session.maybe_compact())
        # An append's sample grows the last one without reading the context, and still says
        # exactly what a fresh count of the whole context says.
        latest = store.latest_sample("c")
        assert latest is not None
        fresh = whole(session)
        assert latest.parts == fresh.parts and latest.in_context == fresh.in_context
    assert compactions >= 2
    samples = store.samples("c")
    assert len(samples) == appends + compactions
    assert [s.turn for s in samples] == list(range(1, len(samples) + 1))
    assert sum(s.kind == "compaction" for s in samples) == compactions == len(session.events())
    # A compaction's sample carries the version its commit made: event i made version i + 1.
    assert [s.version for s in samples if s.kind == "compaction"] == list(range(1, compactions + 1))
    for sample in samples:
        data = sample.as_dict()
        assert sum(data["parts"].values()) == data["total"]
        assert data["total"] + data["reserved"] + data["free"] >= 2000
        assert data["parts"]["system"] > 0 and data["parts"]["tools"] > 0
        assert set(data["parts"]) == set(PARTS)
    first_compaction = next(s for s in samples if s.kind == "compaction")
    assert first_compaction.summary > 0 and first_compaction.pinned > 0  # summary and task
    assert first_compaction.total < samples[first_compaction.turn - 2].total


def test_a_conversation_without_samples_is_counted_whole_on_its_next_turn() -> None:
    store = MemoryStore()
    store.append("old", [Message(role="user", content="an imported task " * 20)] * 1)
    store.append("old", [Message(role="assistant", content="an imported answer " * 20)])
    session = Session(store, "old", LettaEstimator(), settings=CompactionSettings(8000))
    session.append({"role": "user", "content": "and now?"})
    (sample,) = store.samples("old")
    assert sample.in_context == 3
    assert sample.total == sum(session.counter.count(m) for m in session.view())


def test_an_async_session_records_the_same_samples() -> None:
    store = MemoryStore()

    async def run() -> None:
        session = AsyncSession(store, "a", LettaEstimator(), settings=CompactionSettings(2000))
        for n in range(10):
            await session.append({"role": "user", "content": f"request {n} " + "y" * 400})
            await session.append({"role": "assistant", "content": f"answer {n} " + "z" * 400})
        await session.compact()

    asyncio.run(run())
    samples = store.samples("a")
    assert [s.kind for s in samples] == ["append"] * 20 + ["compaction"]
    assert samples[-1].in_context < samples[-2].in_context


def test_kinds_of_messages() -> None:
    assert kind_of(Message(role="user", content="t", pinned=True)) == "pinned"
    assert kind_of(Message(role="user", content="s", kind="summary")) == "summary"
    assert kind_of(Message(role="user", content="m", kind="marker")) == "summary"
    assert kind_of(Message(role="tool", content="out", tool_call_id="c")) == "tool_outputs"
    assert kind_of(Message(role="assistant", content="a")) == "messages"


def test_a_sample_counts_each_message_in_its_kind() -> None:
    messages = [
        Message(role="user", content="t" * n, pinned=n % 2 == 0, kind=kind)
        for n, kind in enumerate(["message", "summary", "marker", "task", "summary"], 1)
    ]
    messages += [
        Message(role="tool", content="out", tool_call_id="c"),
        Message(role="tool", content="kept", tool_call_id="d", pinned=True),
        Message(role="assistant", content="a" * 40),
    ]
    counter = LettaEstimator()
    sample = measure(messages, counter, kind="append", at="t", settings=CompactionSettings())
    for part in ("pinned", "summary", "tool_outputs", "messages"):
        expected = sum(counter.count(m) for m in messages if kind_of(m) == part)
        assert sample.part(part) == expected


class ForgetfulSummarizer(LocalSummarizer):
    """A summary that keeps nothing the user said, red lines included."""

    @property
    def name(self) -> str:
        return "forgetful"

    def summarize(self, request: SummaryRequest) -> str:
        return "Work happened."


def test_a_compaction_keeps_its_audit_on_the_summary(store: ConversationStore) -> None:
    settings = CompactionSettings(context_window=2000, guard=False)
    session = Session(store, "c", LettaEstimator(), ForgetfulSummarizer(), settings)
    session.append({"role": "user", "content": "Add a CSV export to the report page."})
    session.append({"role": "assistant", "content": "I will read the code first."})
    session.append({"role": "user", "content": RED_LINE})
    for n in range(14):
        session.append({"role": "user", "content": f"request {n}: " + "please go on " * 25})
        session.append({"role": "assistant", "content": f"done {n}: " + "went on " * 25})
    before = {m.id for m in session.context()}
    result = session.compact_result(trigger="context_window_limit")
    # Both summaries dropped the red line: each was rolled back, and truncation kept it.
    assert result.stats.mode == "truncate"
    (stored,) = store.get("c", [result.summary.id])
    audit = audit_of(stored)
    attempts = audit["attempts"]
    assert [a.split(":")[0] for a in attempts] == ["sliding_window", "all"]
    assert all("dropped verbatim" in a and "legacy/" in a for a in attempts)
    after = {m.id for m in session.context()}
    assert set(audit["summarized"]["ids"]) == before - after
    assert audit["summarized"]["count"] == result.stats.summarized
    checked = audit["verification"]
    assert checked["pinned_kept"] == 1  # the task
    assert RED_LINE in checked["verbatim_kept"]
    assert checked["tokens"] == [
        result.stats.context_tokens_before,
        result.stats.context_tokens_after,
    ]
    assert audit_of(Message(role="user", content="old summary", kind="summary"))["attempts"] == []


_COUNT = st.one_of(st.integers(-2, 9), st.booleans())


@given(
    st.sampled_from(["append", "compaction", "rewind"]),
    st.lists(_COUNT, min_size=8, max_size=8),
    st.one_of(st.none(), st.integers(-1, 9), st.booleans()),
    st.integers(0, 9),
    st.integers(0, 9),
)
def test_a_store_checks_and_numbers_a_sample_as_the_plain_field_by_field_way_does(
    kind: str, counts: list[int], window: int | None, turn: int, version: int
) -> None:
    """`check_sample` refuses what a look at each field refuses; `numbered` is `replace`."""
    sample = Sample(kind, "t", counts[0], window, *counts[1:])  # type: ignore[arg-type]
    fields = {name: sample.part(name) for name in PARTS}
    fields |= {"in_context": sample.in_context, "reserved": sample.reserved}
    bad = (
        kind not in SAMPLE_KINDS
        or any(not isinstance(v, int) or v < 0 for v in fields.values())
        or (window is not None and (not isinstance(window, int) or window < 1))
    )
    try:
        check_sample("c", sample)
    except StoreError:
        assert bad
    else:
        assert not bad
    assert numbered(sample, turn, version) == replace(sample, turn=turn, version=version)
