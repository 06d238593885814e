"""An append hands the check after it what its transaction read (`_append_read_steps`): the
context as last read with the stored messages after it, and the system prompt. These tests hold
that this is the store's own answer whatever another writer did before, and that a check fed by
it counts what a check that reads again counts."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from precis import CompactionSettings, Session
from precis.core.errors import CompactionError
from precis.session._io import drive
from precis.stores.base import ConversationStore
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import SQLiteStore
from precis.summarize.base import LocalSummarizer

CID = "c"
WORDS = [
    "the",
    "deploy",
    "waits",
    "for",
    "the",
    "payments",
    "migration",
    "and",
    "the",
    "cache",
    "flush",
    "on",
    "staging",
]

# What the other writer (a second session on the same conversation) does between A's appends.
OTHER = st.sampled_from(["nothing", "append", "compact", "pin", "prompt", "tool turn"])


class Brief(LocalSummarizer):
    """A summarizer that answers at once: what is kept is not what these tests are about."""

    name = "brief"

    def summarize(self, request: Any) -> str:
        return f"Summary of {len(request.messages)} messages."


def text(n: int) -> str:
    return " ".join(WORDS[(n + i) % len(WORDS)] for i in range(30 + 9 * (n % 7)))


def session_on(store: ConversationStore) -> Session:
    settings = CompactionSettings(context_window=600)
    return Session(store, CID, summarizer=Brief(), settings=settings)


def other_writes(other: Session, what: str, n: int) -> None:
    if what == "append":
        other.append({"role": "user", "content": f"other {text(n)}"})
    elif what == "compact":
        with contextlib.suppress(CompactionError):  # nothing to compact yet
            other.compact()
    elif what == "pin" and other.context():
        last = other.context()[-1]
        other.pin(last.id, not last.pinned)
    elif what == "prompt":
        other.set_system_prompt(f"You deploy release {n}.")
    elif what == "tool turn":
        call = {"id": f"o{n}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        other.append({"role": "assistant", "content": "", "tool_calls": [call]})
        other.append({"role": "tool", "tool_call_id": f"o{n}", "content": text(n)})


def check_rounds(store: ConversationStore, others: list[str]) -> int:
    """A's appends, each after the other's write: what the append read is the store's context
    and prompt then, and the check fed by it counts as a check that reads both again."""
    mine, other = session_on(store), session_on(store)
    carried = 0
    for n, what in enumerate(others):
        other_writes(other, what, n)
        message = {"role": "user" if n % 2 else "assistant", "content": text(n)}
        appended, read = drive(mine._append_read_steps([message]))
        assert [m.content for m in appended] == [message["content"]]
        if read is None:  # the last read was not what the append saw: nothing carried
            mine.maybe_compact()  # which reads again
            continue
        carried += 1
        now = store.context(CID)
        assert read.snapshot.messages == now.messages
        got = (read.snapshot.version, read.snapshot.last_seq, read.snapshot.compacted)
        assert got == (now.version, now.last_seq, now.compacted)
        assert (read.system_prompt, read.prompt_stale) == store.system_prompt(CID)
        fed = drive(mine._checked_steps((), read))
        assert drive(mine._checked_steps())[0] == fed[0]
        mine.maybe_compact()
    return carried


@pytest.mark.property
@settings(deadline=None)
@given(st.lists(OTHER, min_size=1, max_size=14))
def test_what_an_append_read_is_the_stores_context_in_memory(others: list[str]) -> None:
    check_rounds(MemoryStore(), others)


@pytest.mark.property
@settings(deadline=None, max_examples=40)
@given(st.lists(OTHER, min_size=1, max_size=10))
def test_what_an_append_read_is_the_stores_context_on_sqlite(others: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "p.db")
        try:
            check_rounds(store, others)
        finally:
            store.close()


def test_appends_with_no_other_writer_carry_their_reads(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    # The first append has no read to carry (the session never read); every later one does.
    assert check_rounds(store, ["nothing"] * 8) == 7
    # Another writer's append or pin in between: that append carries nothing.
    store2 = SQLiteStore(tmp_path / "q.db")
    assert check_rounds(store2, ["nothing", "append", "nothing", "pin", "nothing"]) == 2


def test_a_compaction_committed_after_the_append_is_read_not_the_carried_context() -> None:
    """A compaction behind the turn that commits between the append and its check moves the
    session's last read on: the check reads again and counts the compacted context."""
    store = MemoryStore()
    session = session_on(store)
    for n in range(6):
        drive(session._append_read_steps([{"role": "user", "content": text(n)}]))
        session.maybe_compact()
    _, read = drive(session._append_read_steps([{"role": "assistant", "content": text(7)}]))
    assert read is not None
    session.compact()  # as the compaction behind commits, on the session's own last read
    tokens, snapshot, _ = drive(session._checked_steps((), read))
    assert snapshot.version == store.context(CID).version > read.snapshot.version
    assert tokens == drive(session._checked_steps())[0]
