"""S2 and S3 policy through a real Session: watermarks, pinned task, rollback, hooks, triggers,
tool-output display, masking and sub-agent briefs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conformance import TRAJECTORY_FILES, trajectory_as_openai

from precis.core.errors import CompactionVetoed
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message, ToolCall, messages_from_openai
from precis.core.tokens import LettaEstimator
from precis.core.validity import check
from precis.engine.settings import CompactionSettings
from precis.providers.base import Completion
from precis.session import Session
from precis.session.tools import handle_tool_call
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import SQLiteStore
from precis.summarize.base import LocalSummarizer, SummaryRequest
from precis.summarize.llm import LLMSummarizer

RED_LINE = "不许动 legacy/ 目录，只加新模块"


class RecordingProvider:
    """A model that records what it is sent and answers with fixed text."""

    def __init__(self, answer: str = "summary of the work") -> None:
        self.answer = answer
        self.sent: list[list[Mapping[str, Any]]] = []

    @property
    def context_window(self) -> int | None:
        return None

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        self.sent.append(list(messages))
        return Completion({"role": "assistant", "content": self.answer})

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> Completion:
        return self.complete(messages, tools, timeout=timeout)


class DroppingSummarizer(LocalSummarizer):
    """The disobedient summarizer: a summary that keeps nothing the user said."""

    def __init__(self, on_call: Any = None) -> None:
        self.requests: list[SummaryRequest] = []
        self.on_call = on_call

    @property
    def name(self) -> str:
        return "dropping"

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if self.on_call is not None:
            self.on_call(len(self.requests))
        return "Worked on the project."


def turns(session: Session, n: int, start: int = 0, chars: int = 300) -> None:
    for i in range(start, start + n):
        session.append(Message(role="user", content=f"question {i} " + "q" * chars))
        session.append(Message(role="assistant", content=f"answer {i} " + "a" * chars))


def test_hard_watermark_truncates_without_calling_the_model() -> None:
    provider = RecordingProvider()
    settings = CompactionSettings(context_window=2000, soft_watermark=0.8, hard_watermark=0.95)
    session = Session(MemoryStore(), "c", LettaEstimator(), LLMSummarizer(provider), settings)
    turns(session, 14)
    assert session.tokens() > settings.hard_limit  # type: ignore[operator]
    done = session.maybe_compact()
    assert [(s.trigger, s.mode) for s in done] == [("hard_watermark", "truncate")]
    assert provider.sent == []
    assert session.tokens() <= settings.threshold  # type: ignore[operator]
    context = session.context()
    assert check(context) == []
    marker = next(m for m in context if m.kind == KIND_MARKER)
    assert "earlier messages omitted — search the history for them" in marker.content
    assert context[0].pinned and context[0].content.startswith("question 0")  # the task


def test_soft_watermark_summarizes() -> None:
    settings = CompactionSettings(context_window=4000, soft_watermark=0.5)
    session = Session(MemoryStore(), "c", LettaEstimator(), DroppingSummarizer(), settings)
    turns(session, 10)  # 20 messages of 78 tokens: under 0.5 x 4000
    assert session.maybe_compact() == []
    turns(session, 4, start=10)
    (stats,) = session.maybe_compact()
    assert (stats.trigger, stats.mode) == ("context_window_limit", "sliding_window")


def test_fifty_compactions_keep_the_task_and_pinned_items_verbatim(tmp_path: Path) -> None:
    path = max(TRAJECTORY_FILES, key=lambda p: p.stat().st_size)
    messages = messages_from_openai(trajectory_as_openai(path))
    settings = CompactionSettings(context_window=8000)
    session = Session(SQLiteStore(tmp_path / "precis.db"), "long", LettaEstimator(), None, settings)
    session.append(*messages[:6])
    task = session.task()
    assert task == next(m.content for m in messages if m.role == "user")
    pin_me = next(m for m in session.context() if m.role == "assistant")
    session.pin(pin_me.id)
    position, compactions = 6, 0
    while compactions < 50:
        group = [messages[position]] if position < len(messages) else []
        position += 1
        while position < len(messages) and messages[position].role == "tool":
            group.append(messages[position])
            position += 1
        if group:
            session.append(*group)
        # A compaction of a context already under the target may find nothing to make smaller.
        compactions += session.compact().mode != "none"
        context = session.context()
        assert check(context) == []
        assert context[0].content == task and context[0].pinned
        assert any(m.id == pin_me.id and m.content == pin_me.content for m in context)
    assert len(session.events()) == 50


def _db_bytes(db: Path) -> bytes:
    wal = db.with_name(db.name + "-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_dropped_red_line_rolls_back_and_the_fallback_keeps_it(tmp_path: Path) -> None:
    db = tmp_path / "precis.db"
    store = SQLiteStore(db)
    seen: dict[int, bytes] = {}
    summarizer = DroppingSummarizer(on_call=lambda n: seen.setdefault(n, _db_bytes(db)))
    settings = CompactionSettings(context_window=2000, guard=False)
    session = Session(store, "c", LettaEstimator(), summarizer, settings)
    session.append(Message(role="user", content="给报表页加一个 CSV 导出功能。"))
    session.append(Message(role="assistant", content="好的，我先看一下现有代码。"))
    session.append(Message(role="user", content=RED_LINE))
    turns(session, 11)  # over the 1600-token threshold, so truncation has something to drop
    before = _db_bytes(db)
    stats = session.compact(trigger="context_window_limit")
    # The sliding and the all-mode summaries both dropped the red line: each was discarded
    # with the store untouched (the second summarizer call saw the same bytes as before).
    assert [r.mode for r in summarizer.requests] == ["sliding_window", "all"]
    assert seen[1] == before and seen[2] == before
    assert stats.mode == "truncate"
    context = session.context()
    assert any(RED_LINE in m.content for m in context)
    assert check(context) == []
    # With the guard on (the default) the summary itself keeps the red line verbatim.
    guarded = Session(
        MemoryStore(), "g", LettaEstimator(), DroppingSummarizer(), CompactionSettings(2000)
    )
    guarded.append(Message(role="user", content="给报表页加一个 CSV 导出功能。"))
    guarded.append(Message(role="assistant", content="好的。"))
    guarded.append(Message(role="user", content=RED_LINE))
    turns(guarded, 8)
    result = guarded.compact_result()
    assert result.stats.mode == "sliding_window"
    assert RED_LINE in result.summary.metadata["summary"]


def test_shell_hook_instructions_reach_the_prompt_and_exit_2_vetoes(tmp_path: Path) -> None:
    provider = RecordingProvider()
    hook = "cat > /dev/null; echo 'Keep every port number verbatim.'"
    settings = CompactionSettings(context_window=2000, pre_compact_hooks=(hook,))
    session = Session(MemoryStore(), "c", LettaEstimator(), LLMSummarizer(provider), settings)
    turns(session, 8)
    session.compact()
    assert "Keep every port number verbatim." in provider.sent[0][0]["content"]

    veto = "cat > /dev/null; echo 'compaction frozen during the release' >&2; exit 2"
    blocked = Session(
        MemoryStore(),
        "v",
        LettaEstimator(),
        LLMSummarizer(RecordingProvider()),
        CompactionSettings(context_window=2000, pre_compact_hooks=(veto,)),
    )
    turns(blocked, 8)
    before = [m.id for m in blocked.context()]
    with pytest.raises(CompactionVetoed, match="compaction frozen during the release"):
        blocked.compact()
    assert [m.id for m in blocked.context()] == before and blocked.events() == []


def test_post_hook_gets_stats_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "post.json"
    settings = CompactionSettings(context_window=2000, post_compact_hooks=(f"cat > {out}",))
    session = Session(MemoryStore(), "c", LettaEstimator(), DroppingSummarizer(), settings)
    turns(session, 8)
    stats = session.compact()
    payload = json.loads(out.read_text())
    assert payload["hook_event_name"] == "PostCompact"
    assert payload["stats"]["summarized"] == stats.summarized
    assert "Worked on the project." in payload["summary"]


def test_turn_limit_fires_exactly_every_n_turns() -> None:
    settings = CompactionSettings(context_window=100_000, turn_limit=3)
    session = Session(MemoryStore(), "c", LettaEstimator(), DroppingSummarizer(), settings)
    fired = []
    for i in range(9):
        turns(session, 1, start=i)
        done = session.maybe_compact()
        fired.append([s.trigger for s in done])
    assert fired == [[], [], ["turn_limit"]] * 3


def test_complete_phase_compacts_and_records_the_phase() -> None:
    settings = CompactionSettings(context_window=100_000)
    session = Session(MemoryStore(), "c", LettaEstimator(), None, settings)
    turns(session, 6)
    stats = session.complete_phase("schema migration")
    assert stats.trigger == "phase_complete"
    summary = next(m for m in session.context() if m.kind == KIND_SUMMARY)
    assert summary.metadata["phase"] == "schema migration"
    assert "schema migration" in summary.metadata["summary"]
    assert session.events()[-1].trigger == "phase_complete"


def test_long_tool_output_is_shown_head_tail_and_read_back_whole(tmp_path: Path) -> None:
    settings = CompactionSettings(context_window=100_000, tool_output_max_chars=2000)
    session = Session(SQLiteStore(tmp_path / "p.db"), "c", LettaEstimator(), None, settings)
    output = "\n".join(f"line {i}: " + "x" * 40 for i in range(400))
    session.append(Message(role="user", content="show me the log"))
    session.append(
        Message(role="assistant", tool_calls=(ToolCall("c1", "cat", '{"path":"app.log"}'),))
    )
    (stored,) = session.append(Message(role="tool", tool_call_id="c1", content=output))
    shown = session.prompt()[-1]["content"]
    assert len(shown) < 2100 and f"read_original({stored.id}, section)" in shown
    assert shown.startswith("line 0:") and shown.rstrip().endswith("x" * 40)
    assert session.history()[-1].content == output  # stored whole
    toc = handle_tool_call(session, "read_original", {"message_id": stored.id})
    assert "400 lines" in toc
    pieces = [
        handle_tool_call(session, "read_original", {"message_id": stored.id, "section": k})
        for k in range(1, 9)
    ]
    assert all(f"line {k * 50}:" in piece for k, piece in enumerate(pieces))


@pytest.mark.parametrize("path", TRAJECTORY_FILES, ids=lambda p: p.stem[:40])
def test_masking_keeps_every_trajectory_valid(path: Path) -> None:
    settings = CompactionSettings(context_window=100_000, mask_after_turns=1)
    session = Session(MemoryStore(), "m", LettaEstimator(), None, settings)
    session.append(*trajectory_as_openai(path))
    assert check(session.view()) == []
    plain = Session(MemoryStore(), "p", LettaEstimator(), None, CompactionSettings(100_000))
    plain.append(*trajectory_as_openai(path))
    assert session.tokens() <= plain.tokens()


def test_absorb_returns_only_the_sub_agents_brief() -> None:
    parent = Session(MemoryStore(), "parent", LettaEstimator(), None, CompactionSettings(8000))
    parent.append(Message(role="user", content="Find why the export is slow."))
    parent.append(Message(role="assistant", tool_calls=(ToolCall("task_1", "sub_agent", "{}"),)))
    child = Session(MemoryStore(), "child", LettaEstimator(), None, CompactionSettings(8000))
    child.append(
        Message(role="user", content="Profile src/exporter/csv_writer.py; never edit legacy/.")
    )
    child.append(Message(role="assistant", content="The writer re-opens the file per row. " * 30))
    result = parent.absorb(child, "task_1")
    assert result.role == "tool" and result.tool_call_id == "task_1"
    assert "never edit legacy/" in result.content
    assert len(parent.context()) == 3 and check(parent.context()) == []


class UselessSummarizer(DroppingSummarizer):
    """Answers "ok" to everything."""

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return "ok"


def test_useless_summary_still_leaves_every_red_line_and_the_task_for_ten_rounds() -> None:
    settings = CompactionSettings(context_window=3000, pin_task=False)
    session = Session(MemoryStore(), "c", LettaEstimator(), UselessSummarizer(), settings)
    task = "Port the CSV exporter to the new reports API."
    rules = ["Never use npm; only pnpm.", RED_LINE, "Do not change the public API of reports/."]
    session.append(Message(role="user", content=task))
    for i, rule in enumerate(rules):
        session.append(Message(role="assistant", content=f"Understood ({i})."))
        session.append(Message(role="user", content=rule))
    for round_ in range(10):
        turns(session, 6, start=round_ * 6)
        session.compact()
        text = "\n".join(
            [m.content for m in session.context()]
            + [str(m.metadata.get("summary", "")) for m in session.context()]
        )
        assert all(rule in text for rule in rules), round_
        assert task in text, round_
    assert len(session.events()) == 10
