"""`ConversationStore.tail`: what an append is checked against, read without the whole context.

Every backend answers as `tail_of(snapshot)` does; a SQL store reads only the rows of the last turn
and the pinned ones; `Session.append` gives the verdicts the whole context gave before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from precis import Session
from precis.core.errors import InvalidMessage
from precis.core.messages import KIND_SUMMARY, Message, ToolCall
from precis.session._base import answers_outside, refuse_append
from precis.stores import CompactionEvent, ConversationStore, MemoryStore, SQLiteStore
from precis.stores.base import ContextSnapshot, ContextTail, tail_of

CID = "c"


@pytest.fixture
def store(any_store: ConversationStore) -> ConversationStore:
    return any_store


def user(text: str, **kw: Any) -> Message:
    return Message(role="user", content=text, **kw)


def calls(*ids: str) -> Message:
    return Message(role="assistant", tool_calls=tuple(ToolCall(i, "run", "{}") for i in ids))


def result(call_id: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=f"out {call_id}")


def ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def same(tail: ContextTail, store: ConversationStore) -> None:
    """The store's tail is the tail of its whole context, flags and all."""
    expected = tail_of(store.context(CID), *store.system_prompt(CID))
    assert ids(tail.turn) == ids(expected.turn)
    assert ids(tail.pinned) == ids(expected.pinned)
    assert tail == expected


def compact(store: ConversationStore, keep: Sequence[str]) -> None:
    snap = store.context(CID)
    summary = Message(role="user", kind=KIND_SUMMARY, id=f"s{snap.version}", content="summary")
    store.commit_compaction(
        CID,
        expected_version=snap.version,
        snapshot_last_seq=snap.last_seq,
        summary=summary,
        context_ids=[summary.id, *keep],
        event=CompactionEvent("manual", "all", {}, summary.id, "now"),
    )


def whole(context: list[Message]) -> ContextSnapshot:
    return ContextSnapshot(context, 0, len(context), False)


def test_tail_of_a_context() -> None:
    a, b, c = user("a"), calls("x", "y"), result("x")
    assert tail_of(whole([])) == ContextTail([], 0, [], 0, 0, False, "", False)
    assert tail_of(whole([a, b, c])).turn == [b, c]
    assert tail_of(whole([a])).turn == [a]
    assert tail_of(whole([c, c])).turn == [c, c]  # only results: all of it
    assert tail_of(whole([a, b, c, user("d")])).turn[0].content == "d"


def test_tail_follows_appends_pins_and_compactions(store: ConversationStore) -> None:
    with pytest.raises(Exception, match="nope"):
        store.tail("nope")
    store.create(CID)
    assert store.tail(CID) == ContextTail([], 0, [], 0, 0, False, "", False)
    (task,) = store.append(CID, [user("the task", pinned=True)])
    same(store.tail(CID), store)
    store.append(CID, [calls("a", "b"), result("a")])
    tail = store.tail(CID)
    same(tail, store)
    assert [m.role for m in tail.turn] == ["assistant", "tool"] and ids(tail.pinned) == [task.id]
    (later, *_) = store.append(CID, [result("b"), user("more"), Message(role="assistant")])
    store.set_pinned(CID, later.id, True)  # a result pinned after append (the overlay)
    same(store.tail(CID), store)
    store.set_pinned(CID, task.id, False)
    same(store.tail(CID), store)
    history = ids(store.history(CID))
    compact(store, [later.id, *history[-2:]])
    same(store.tail(CID), store)
    appended = store.append(CID, [calls("c"), result("c")])
    tail = store.tail(CID)
    same(tail, store)
    assert ids(tail.turn) == ids(appended) and ids(tail.pinned) == [later.id]
    compact(store, [later.id, appended[1].id])  # a context ending in a lone result
    same(store.tail(CID), store)
    store.set_pinned(CID, task.id, True)  # pinned, but no longer in context
    tail = store.tail(CID)
    same(tail, store)
    assert ids(tail.pinned) == [later.id]


def test_tail_of_a_log_of_results_only(store: ConversationStore) -> None:
    store.append(CID, [result("x"), result("y")])
    tail = store.tail(CID)
    same(tail, store)
    assert len(tail.turn) == 2


# --- Session.append checks against the tail --------------------------------------------------

_KINDS = st.sampled_from(["user", "assistant", "calls", "result"])
_IDS = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def _messages(draw: st.DrawFn, max_size: int) -> list[Message]:
    """Any sequence of users, assistants, calls and results over a few ids, valid or not."""
    out: list[Message] = []
    for _ in range(draw(st.integers(0, max_size))):
        kind = draw(_KINDS)
        if kind == "user":
            out.append(user("u", pinned=draw(st.booleans())))
        elif kind == "assistant":
            out.append(Message(role="assistant", content="x"))
        elif kind == "calls":
            out.append(calls(*draw(st.lists(_IDS, min_size=1, max_size=3))))
        else:
            out.append(result(draw(_IDS)))
    return out


def _verdict(context: Sequence[Message], messages: Sequence[Message], start: int = 0) -> object:
    try:
        refuse_append(context, messages, start)
    except InvalidMessage as exc:
        return (exc.index, exc.reason, exc.field)
    return None


@pytest.mark.property
@given(_messages(12), _messages(5))
def test_the_tail_gives_the_verdict_of_the_whole_context(
    context: list[Message], messages: list[Message]
) -> None:
    tail = tail_of(whole(context))
    assert tail.turn == context[tail.start :]
    if answers_outside(tail.turn, messages):
        assert _verdict(context, messages) is not None  # refused, whatever the tail says
    else:
        assert _verdict(tail.turn, messages, tail.start) == _verdict(context, messages)


class CountingStore:
    """A real store that counts the messages each kind of read hands back."""

    def __init__(self, inner: ConversationStore) -> None:
        self.inner = inner
        self.read: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            check = kwargs.get("check")
            if name == "append" and check is not None:
                # The tail an append is checked against, read inside its transaction.
                def counted(tail: ContextTail) -> Any:
                    self.read["tail"] = self.read.get("tail", 0) + len(tail.turn)
                    self.read["tail"] += len(tail.pinned)
                    return check(tail)

                kwargs["check"] = counted
            answer = method(*args, **kwargs)
            if name == "context":
                self.read[name] = self.read.get(name, 0) + len(answer.messages)
            elif name == "tail":
                self.read[name] = self.read.get(name, 0) + len(answer.turn) + len(answer.pinned)
            return answer

        return call


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_session_append_reads_the_tail_not_the_context(backend: str, tmp_path: Path) -> None:
    inner = MemoryStore() if backend == "memory" else SQLiteStore(tmp_path / "p.db")
    store = CountingStore(inner)
    session = Session(store, CID)  # type: ignore[arg-type]
    for turn in range(300):  # never compacted: the context is every message
        session.append(user(f"turn {turn}"), calls(f"c{turn}"), result(f"c{turn}"))
    store.read.clear()
    session.append(user("next"))
    session.append(calls("p", "q"))
    session.append(result("p"))
    # Each append read the turn so far (2, 1, 1 messages) and the pinned task, nothing else.
    assert store.read == {"tail": 3 + 2 + 2}
    assert session.task() == "turn 0"
    # A result for a call of an earlier turn is refused as before, named from the whole context.
    with pytest.raises(InvalidMessage, match="orphan_tool_result") as caught:
        session.append(result("c5"))
    assert caught.value.field == "tool_call_id" and store.read["context"] == 903
    with pytest.raises(InvalidMessage, match="unknown tool_call_id 'zz'"):
        session.append(result("zz"))
    session.append(result("q"), user("and on"))
    assert len(session.history()) == 905
    inner.close()


def _steps(db: sqlite3.Connection, action: Any) -> int:
    """VDBE instructions an action runs on this connection: a cost no machine load skews."""
    counter = [0]

    def tick() -> int:
        counter[0] += 1
        return 0

    db.set_progress_handler(tick, 1)
    try:
        action()
    finally:
        db.set_progress_handler(None, 1)
    return counter[0]


def test_sqlite_tail_costs_the_same_at_any_length(tmp_path: Path) -> None:
    steps: dict[tuple[int, bool], int] = {}
    for size in (500, 5_000):
        with SQLiteStore(tmp_path / f"h{size}.db") as s:
            s.append("noise", [user(f"noise {i}") for i in range(300)])
            (task,) = s.append(CID, [user("task", pinned=True)])
            for i in range(0, size, 500):
                turns = [m for k in range(i, i + 500, 2) for m in (calls(f"k{k}"), result(f"k{k}"))]
                s.append(CID, turns)
            s.append(CID, [user("last"), calls("x", "y"), result("x")])
            db = s._connection()
            steps[size, False] = _steps(db, lambda s=s: s.tail(CID))
            compact(s, [task.id, *(m.id for m in s.history(CID, offset=size - 200))])
            steps[size, True] = _steps(db, lambda s=s: s.tail(CID))
            tail = s.tail(CID)
            assert [m.role for m in tail.turn] == ["assistant", "tool"]
            assert ids(tail.pinned) == [task.id]
    for compacted in (False, True):
        assert steps[5_000, compacted] <= steps[500, compacted] * 1.1, steps
