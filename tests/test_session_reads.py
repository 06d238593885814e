"""A session reads on from what it last read: after its own compaction, from the context the
commit left (the store's own snapshot of it), so the next check reads only what came since and
sees exactly what a whole read sees."""

from __future__ import annotations

from pathlib import Path

from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.base import ContextSnapshot
from precis.stores.dialect import Handle
from precis.stores.sqlite import SQLiteStore

CID = "reads"


class CountingStore(SQLiteStore):
    """A real SQLite store that counts its reads of the whole context."""

    whole = 0

    def _snapshot(self, db: Handle, conversation_id: str) -> ContextSnapshot:
        self.whole += 1
        return super()._snapshot(db, conversation_id)


def test_a_check_after_a_compaction_reads_on_from_its_commit(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "reads.db")
    session = Session(store, CID, settings=CompactionSettings(context_window=4000))
    for i in range(12):
        session.append({"role": "user", "content": f"question {i} " + "about the deploy " * 20})
        session.append({"role": "assistant", "content": f"answer {i} " + "we roll back " * 20})
    result = session.compact_result("all")
    assert result.compacted and result.committed is not None
    assert result.committed == store.context(CID)
    reads = store.whole
    session.append({"role": "user", "content": "and now?"})
    tokens = session.tokens()
    assert store.whole == reads  # no whole read after the commit: only what came since
    assert session.context() == store.context(CID).messages
    fresh = Session(store, CID, settings=CompactionSettings(context_window=4000))
    assert tokens == fresh.tokens()
