"""The engine end to end over real stores: commit, fallback, rollback, recall, races, crashes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from conformance import TRAJECTORY_FILES, trajectory_as_openai

from precis.core.errors import SummarizerError, VersionConflict
from precis.core.memo import Memo
from precis.core.messages import KIND_SUMMARY, Message, messages_from_openai
from precis.core.tokens import LettaEstimator
from precis.core.validity import check
from precis.engine.compactor import Compactor
from precis.engine.settings import CompactionSettings
from precis.session import AsyncSession, Session, acompact_messages, compact_messages, drive
from precis.stores.base import ConversationStore
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import SQLiteStore
from precis.summarize.base import LocalSummarizer, SummaryRequest
from precis.summarize.mock import MockSummarizer

SRC = Path(__file__).resolve().parents[1] / "src"


class ScriptedSummarizer(LocalSummarizer):
    """Answers with fixed text and records requests: for tests of how the engine treats output."""

    def __init__(self, answer: str = "the summary", fail: Exception | None = None) -> None:
        self.answer = answer
        self.fail = fail
        self.requests: list[SummaryRequest] = []

    @property
    def name(self) -> str:
        return "scripted"

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if self.fail is not None:
            raise self.fail
        return self.answer


def chat(n: int, chars: int = 200) -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "x" * chars)
        for i in range(n)
    ]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ConversationStore:
    if request.param == "memory":
        return MemoryStore()
    return SQLiteStore(tmp_path / "precis.db")


def state(store: ConversationStore, cid: str) -> tuple[object, ...]:
    snap = store.context(cid)
    return (
        [m.id for m in snap.messages],
        snap.version,
        [m.id for m in store.history(cid)],
        store.events(cid),
        store.system_prompt(cid),
    )


def test_s1_recall_finds_what_only_evicted_messages_held(store: ConversationStore) -> None:
    session = Session(
        store,
        "s1",
        LettaEstimator(),
        MockSummarizer(),
        CompactionSettings(context_window=1200, pin_task=False),  # S1 pins nothing
    )
    session.append(Message(role="user", content="数据库端口是 5433，不要用默认的 5432"))
    session.append(Message(role="assistant", content="好的，记住了。"))
    for i in range(16):
        session.append(Message(role="user", content=f"unrelated question {i} " + "y" * 150))
        session.append(Message(role="assistant", content=f"unrelated answer {i} " + "z" * 150))
    stats = session.compact()
    assert stats.summarized >= 2
    in_context = " ".join(m.content for m in session.context() if m.kind != KIND_SUMMARY)
    assert "5433" not in in_context
    hits = session.recall("5433")
    assert hits and "数据库端口是 5433" in session.store.get("s1", [hits[0].id])[0].content
    assert len(session.history()) == 34 + 1


def test_commit_records_event_marks_prompt_and_keeps_pairs(store: ConversationStore) -> None:
    settings = CompactionSettings(context_window=2000, pin_task=False, guard=False)
    session = Session(store, "c", LettaEstimator(), ScriptedSummarizer(), settings)
    session.set_system_prompt("You are precise.")
    session.append(*chat(30))
    result = session.compact_result()
    context = session.context()
    assert context[0].id == result.summary.id and context[0].kind == KIND_SUMMARY
    packed = json.loads(context[0].content)
    assert packed["type"] == "system_alert" and packed["message"].endswith("the summary")
    assert result.summary.metadata["summary"] == "the summary"
    assert check(context) == []
    (event,) = session.events()
    assert (event.trigger, event.mode, event.summary_id) == (
        "manual",
        "sliding_window",
        context[0].id,
    )
    assert event.stats["summarized"] == result.stats.summarized
    assert store.system_prompt("c") == ("You are precise.", True)
    assert session.prompt()[0] == {"role": "system", "content": "You are precise."}
    assert store.system_prompt("c") == ("You are precise.", False)
    assert result.stats.context_tokens_after < result.stats.context_tokens_before


def test_second_compaction_folds_the_first_summary(store: ConversationStore) -> None:
    summarizer = ScriptedSummarizer()
    session = Session(
        store, "c", LettaEstimator(), summarizer, CompactionSettings(context_window=2000)
    )
    session.append(*chat(30))
    session.compact()
    session.append(*chat(30))
    session.compact()
    assert any(m.kind == KIND_SUMMARY for m in summarizer.requests[1].messages)
    assert sum(m.kind == KIND_SUMMARY for m in session.context()) == 1
    assert len(session.events()) == 2


class _Name(str):
    """A summarizer name that is a str, but not plain JSON data."""


@pytest.mark.parametrize("name", ["scripted", _Name("scripted")])
def test_summary_metadata_goes_to_the_store_plain_and_the_result_shares_none_of_it(
    store: ConversationStore, name: str
) -> None:
    summarizer = ScriptedSummarizer()
    summarizer.__class__ = type("Named", (ScriptedSummarizer,), {"name": name})
    settings = CompactionSettings(context_window=2000)
    session = Session(store, "c", LettaEstimator(), summarizer, settings)
    session.append(*chat(30))
    result = session.compact_result()
    assert result.summary is not None
    (stored,) = [m for m in session.context() if m.id == result.summary.id]
    assert stored == result.summary and type(stored.metadata) is dict
    assert type(stored.metadata["summarizer"]) is str  # copied plain when it was not
    assert set(stored.metadata) >= {"summary", "ledger", "stats", "audit"}
    # The store's summary is the result's, or shares no container with it.
    if stored is not result.summary:
        assert stored.metadata is not result.summary.metadata
        assert all(
            stored.metadata[k] is not result.summary.metadata[k]
            for k in ("ledger", "stats", "audit")
        )


@pytest.mark.parametrize(
    ("failure", "calls"),
    [(SummarizerError("blank"), 3), (RuntimeError("model down"), 3), (TimeoutError(), 1)],
)
def test_failing_summarizer_falls_back_to_the_extractive_brief(
    store: ConversationStore, failure: Exception, calls: int
) -> None:
    """Asked again (not after a timeout), then the brief stands in: one commit, nothing lost."""
    summarizer = ScriptedSummarizer(fail=failure)
    session = Session(store, "c", LettaEstimator(), summarizer, CompactionSettings(2000))
    session.append(*chat(30))
    history = [m.id for m in store.history("c")]
    result = session.compact_result()
    assert len(summarizer.requests) == calls and result.stats.fallback == "extractive"
    assert result.summary is not None and result.summary.metadata["summarizer"] == "extractive"
    assert [m.id for m in store.history("c")] == [*history, result.summary.id]
    assert [dict(e.stats) for e in store.events("c")] == [result.stats.as_dict()]


def test_slow_summarizer_times_out_and_the_brief_stands_in(store: ConversationStore) -> None:
    class Hanging:
        """A model that never answers (not a `LocalSummarizer`: a model call is awaited)."""

        name = "scripted"

        def summarize(self, request: SummaryRequest) -> str:
            raise AssertionError("an AsyncSession awaits a model's summary")

        async def asummarize(self, request: SummaryRequest) -> str:
            await asyncio.Event().wait()  # never set: only the timeout ends this
            return ""

    session = AsyncSession(
        store,
        "c",
        LettaEstimator(),
        Hanging(),
        CompactionSettings(context_window=2000, summary_timeout=0.05),
    )
    asyncio.run(session.append(*chat(30)))
    result = asyncio.run(session.compact_result())
    assert result.stats.fallback == "extractive"
    assert result.stats.fallback_reason == "summarizer 'scripted': no answer within 0.05s"
    assert check(store.context("c").messages) == [] and len(store.events("c")) == 1


def test_runaway_summary_is_clipped_to_the_window(store: ConversationStore) -> None:
    session = Session(
        store,
        "c",
        LettaEstimator(),
        ScriptedSummarizer("blah " * 10_000),
        CompactionSettings(context_window=2000),
    )
    session.append(*chat(30))
    result = session.compact_result()
    raw = result.summary.metadata["summary"]
    assert raw.startswith("blah blah") and len(raw) <= 800  # the clip, retained facts included
    assert result.stats.context_tokens_after < 2000


def test_sliding_falls_back_to_all_and_keeps_custom_instructions(store: ConversationStore) -> None:
    summarizer = ScriptedSummarizer()
    settings = CompactionSettings(context_window=2000, pin_task=False, low_watermark=None)
    session = Session(store, "c", LettaEstimator(), summarizer, settings)
    # No assistant message to cut before: letta's sliding planner raises, all-mode runs.
    session.append(*[Message(role="user", content=f"note {i} " + "n" * 300) for i in range(10)])
    stats = session.compact(instructions="Keep every port number.")
    assert stats.mode == "all"
    assert [r.instructions for r in summarizer.requests] == ["Keep every port number."]
    # Everything is summarized but the newest message, the turn being answered.
    assert [m.kind for m in session.context()] == [KIND_SUMMARY, "message"]
    assert session.context()[-1].content.startswith("note 9 ")


def test_result_still_over_threshold_falls_back_to_all(store: ConversationStore) -> None:
    summarizer = ScriptedSummarizer()
    # Evicting 5 % at a time meets a goal of 950 tokens, above the 800-token threshold: the
    # sliding result is valid but still too big, so all-mode must run.
    settings = CompactionSettings(
        context_window=1000, sliding_window_percentage=0.05, low_watermark=None
    )
    session = Session(store, "c", LettaEstimator(), summarizer, settings)
    session.append(*chat(20))
    stats = session.compact(instructions="mine")
    assert [r.mode for r in summarizer.requests] == ["sliding_window", "all"]
    assert [r.instructions for r in summarizer.requests] == ["mine", "mine"]
    assert stats.mode == "all"


def test_pinned_message_survives_and_leads_the_context(store: ConversationStore) -> None:
    session = Session(
        store, "c", LettaEstimator(), ScriptedSummarizer(), CompactionSettings(context_window=2000)
    )
    session.append(Message(role="user", content="never use npm", pinned=True))
    session.append(*chat(30))
    session.compact()
    context = session.context()
    assert context[0].content == "never use npm" and context[1].kind == KIND_SUMMARY
    assert session.prompt()[0]["content"] == "never use npm"


def test_a_snapshot_handed_in_spares_the_read_and_a_commit_since_is_still_caught(
    store: ConversationStore,
) -> None:
    settings = CompactionSettings(context_window=2000, commit_retries=0)
    store.append("c", chat(30))
    reads: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> object:
            if name == "context":
                reads.append(name)
            return getattr(store, name)

    compactor = Compactor(Counting(), LettaEstimator(), ScriptedSummarizer(), settings)  # type: ignore[arg-type]
    drive(compactor.compaction("c", snapshot=store.context("c")))
    assert reads == [] and len(store.events("c")) == 1
    # Stale by the time it is used: the compare-and-set fails, and the context is read again
    # as many times as without a snapshot (commit_retries=0: once), so the compaction commits.
    stale = store.context("c")
    store.append("c", chat(4))
    drive(Compactor(store, LettaEstimator(), ScriptedSummarizer("late"), settings).compaction("c"))
    drive(compactor.compaction("c", snapshot=stale))
    assert reads == ["context"] and len(store.events("c")) == 3


def test_nothing_to_compact_is_a_no_op_that_says_why(store: ConversationStore) -> None:
    session = Session(store, "c", LettaEstimator(), ScriptedSummarizer())
    result = session.compact_result()
    assert not result.compacted and result.summary is None
    assert "nothing to summarize" in result.reason
    assert result.stats.mode == "none" and result.stats.summarized == 0
    assert result.stats.context_tokens_after == result.stats.context_tokens_before
    assert session.events() == []


def test_concurrent_compaction_cannot_both_win(store: ConversationStore) -> None:
    settings = CompactionSettings(context_window=2000, commit_retries=0)
    a = Compactor(store, LettaEstimator(), ScriptedSummarizer("A"), settings)
    store.append("c", chat(30))
    snapshot = store.context("c")

    class RacingSummarizer(ScriptedSummarizer):
        def summarize(self, request: SummaryRequest) -> str:
            if not self.requests:
                drive(a.compaction("c"))  # another worker commits while this one summarizes
            return super().summarize(request)

    b = Compactor(store, LettaEstimator(), RacingSummarizer("B"), settings)
    with pytest.raises(VersionConflict):
        drive(b.compaction("c"))
    assert [e.summary_id for e in store.events("c")] == [
        m.id for m in store.history("c") if m.kind == KIND_SUMMARY
    ]
    assert len(store.events("c")) == 1 and store.context("c").version == snapshot.version + 1
    # With a retry allowed, the loser re-plans against the winner's context and commits.
    retrying = Compactor(
        store, LettaEstimator(), ScriptedSummarizer("C"), CompactionSettings(context_window=500)
    )
    drive(retrying.compaction("c"))
    assert check(store.context("c").messages) == []


def test_compact_messages_stateless_entry_point() -> None:
    rows = [{"role": "system", "content": "Be brief."}]
    for i in range(20):
        rows.append({"role": "user", "content": f"question {i} " + "q" * 300})
        rows.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            }
        )
        rows.append({"role": "tool", "tool_call_id": f"c{i}", "content": "r" * 300})
    out, stats = compact_messages(rows, context_window=4000, summarizer=MockSummarizer())
    assert out[0] == {"role": "system", "content": "Be brief."}
    assert out[-1] == rows[-1] and len(out) < len(rows)
    assert check(messages_from_openai(out[1:])) == []
    assert stats.messages_count_before == 60
    again, _ = asyncio.run(
        acompact_messages(rows, context_window=4000, summarizer=MockSummarizer())
    )
    assert len(again) == len(out)


@pytest.mark.parametrize("path", TRAJECTORY_FILES, ids=lambda p: p.stem[:50])
def test_real_trajectories_compact_until_they_fit(path: Path, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "precis.db")
    rows = trajectory_as_openai(path)
    session = Session(
        store, "t", LettaEstimator(), MockSummarizer(), CompactionSettings(context_window=8000)
    )
    session.append(*rows)
    originals = [m.id for m in session.history()]
    rounds = 0
    while session.needs_compaction():
        rounds += 1
        assert rounds <= 20, f"still {session.tokens()} tokens after 20 compactions"
        session.compact()
        assert check(session.context()) == []
        history_ids = {m.id for m in session.history()}
        assert history_ids.issuperset(originals)
    assert session.tokens() <= CompactionSettings(context_window=8000).threshold  # type: ignore[operator]


def _child(code: str, db: Path) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code), str(db), str(SRC)]


def test_kill_between_summary_and_commit_leaves_store_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "precis.db"
    store = SQLiteStore(db)
    store.append("c", chat(30))
    before = state(store, "c")
    code = """
        import sys, time
        sys.path.insert(0, sys.argv[2])
        from precis.engine.compactor import Compactor
        from precis.engine.settings import CompactionSettings
        from precis.stores.sqlite import SQLiteStore
        from precis.summarize.mock import MockSummarizer
        from precis.core.tokens import LettaEstimator
        from precis.session import drive

        def progress(step):
            if step == "verified":  # the summary exists; the commit has not begun
                print("READY", flush=True)
                while True:
                    time.sleep(1)

        store = SQLiteStore(sys.argv[1])
        compactor = Compactor(store, LettaEstimator(), MockSummarizer(),
                              CompactionSettings(context_window=2000), progress=progress)
        drive(compactor.compaction("c"))
    """
    child = subprocess.Popen(_child(code, db), stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "READY"
    finally:
        child.kill()
        child.wait()
    assert child.returncode != 0
    reopened = SQLiteStore(db)
    assert state(reopened, "c") == before
    assert check(reopened.context("c").messages) == []


def test_appends_from_another_process_during_summary_stay_in_context(tmp_path: Path) -> None:
    db = tmp_path / "precis.db"
    store = SQLiteStore(db)
    store.append("c", chat(30))
    writer = """
        import sys
        sys.path.insert(0, sys.argv[2])
        from precis.core.messages import Message
        from precis.stores.sqlite import SQLiteStore
        store = SQLiteStore(sys.argv[1])
        for i in range(200):
            role = "user" if i % 2 == 0 else "assistant"
            store.append("c", [Message(role=role, content=f"late {i}")])
    """

    class SlowSummarizer(ScriptedSummarizer):
        def summarize(self, request: SummaryRequest) -> str:
            done = subprocess.run(_child(writer, db), check=True)
            assert done.returncode == 0
            return super().summarize(request)

    compactor = Compactor(
        store, LettaEstimator(), SlowSummarizer(), CompactionSettings(context_window=2000)
    )
    result = drive(compactor.compaction("c"))
    late = [m for m in store.history("c") if m.content.startswith("late ")]
    assert len(late) == 200
    context_ids = [m.id for m in store.context("c").messages]
    assert context_ids[-200:] == [m.id for m in late]
    assert result.summary.id in context_ids
    assert check(store.context("c").messages) == []


def test_usage_reported_before_a_compaction_is_stale(store: ConversationStore) -> None:
    session = Session(
        store, "c", LettaEstimator(), ScriptedSummarizer(), CompactionSettings(context_window=2000)
    )
    session.set_system_prompt("sys")
    old_usage = {"usage": {"total_tokens": 99_999}}
    session.append(
        *[
            Message(
                role=m.role, content=m.content, metadata=old_usage if m.role == "assistant" else {}
            )
            for m in chat(30)
        ]
    )
    assert session.tokens() == 99_999  # the last reply's usage anchors; nothing after it
    session.compact()
    assert session.tokens() < 2000  # the kept replies' old usage no longer anchors the estimate
    session.append(
        Message(role="assistant", content="fresh", metadata={"usage": {"total_tokens": 700}})
    )
    session.append(Message(role="user", content="next question"))
    assert session.tokens() == 700 + LettaEstimator().count(session.context()[-1])


def test_stats_as_dict_is_asdict() -> None:
    """`as_dict` is written out for speed; it must stay `dataclasses.asdict`, key order too
    (but for the fallback's fields when there was none)."""
    import dataclasses

    from precis.engine.compactor import CompactionStats

    stats = CompactionStats(
        "manual",
        "all",
        900,
        300,
        1000,
        12,
        3,
        10,
        800,
        950,
        fallback="extractive",
        fallback_reason="503",
    )
    assert list(stats.as_dict().items()) == list(dataclasses.asdict(stats).items())
    # Without a fallback its fields are left out: the stats stored as before they existed.
    plain = replace(stats, fallback=None, fallback_reason=None)
    whole = dataclasses.asdict(stats).items()
    assert list(plain.as_dict().items()) == [i for i in whole if not i[0].startswith("fallback")]


def test_the_ledger_read_ahead_is_the_ledger_replayed_at_the_compaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checks before a compaction replay what it will summarize whatever it plans; the
    compaction goes on from there, and finds the ledger a replay of its whole span finds."""
    from precis.engine import candidates as compactor_module
    from precis.facts.extract import Replay

    used: list[int] = []
    extract = compactor_module.extract_facts

    def spy(span: list[Message], *, task: str | None, replay: Replay | None, memo: Memo) -> object:
        ahead = 0 if replay is None or not replay.starts(span, task) else len(replay.fed)
        found = extract(span, task=task, replay=replay, memo=memo)
        if ahead:
            used.append(ahead)
            assert found == extract(span, task=task)
        return found

    monkeypatch.setattr(compactor_module, "extract_facts", spy)
    path = next(p for p in TRAJECTORY_FILES if p.name.startswith("OpenHands"))
    settings = CompactionSettings(context_window=4000)
    session = Session(MemoryStore(), "c", summarizer=ScriptedSummarizer(), settings=settings)
    for item in trajectory_as_openai(path)[:120]:
        session.append(item)
        if item.get("role") != "tool":
            session.maybe_compact()
    assert len(used) >= 3 and max(used) > 2
