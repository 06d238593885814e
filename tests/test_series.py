"""The chart's reads (stores/series.py): what a SQL store thins and joins in the database is
what the rows give when every sample and event is read, on SQLite and PostgreSQL."""

from __future__ import annotations

from inspector_data import long_conversation, replay

from precis.stores import MemoryStore
from precis.stores.base import ConversationStore
from precis.stores.series import RowSeries, SeriesReads, series_of


def test_thinned_samples_and_markers_match_the_full_rows(sql_store: ConversationStore) -> None:
    long_conversation(sql_store, "long", turns=400)
    replay(sql_store, "airline", manual_every=7)
    reads = series_of(sql_store)
    assert reads is sql_store and isinstance(reads, SeriesReads)
    rows = RowSeries(sql_store)
    for cid in ("long", "airline"):
        turns = len(sql_store.samples(cid))
        for most in (0, 2, 3, 10, 99, 640, 2000):
            thinned = reads.thinned_samples(cid, most)
            assert thinned == rows.thinned_samples(cid, most)
            assert thinned[0] == turns and len(thinned[1]) <= max(most, 2)
        events = sql_store.events(cid)
        assert reads.compaction_count(cid) == len(events) >= 3
        every = rows.marker_rows(cid)
        assert reads.marker_rows(cid, stats=True) == every
        assert reads.marker_rows(cid, offset=2, limit=3, stats=True) == every[2:5]
        assert reads.marker_rows(cid, offset=len(events)) == []
        light = reads.marker_rows(cid)
        assert [(m.turn, m.before, m.after) for m in light] == [
            (m.turn, m.before, m.after) for m in every
        ]
        assert all(m.stats is None for m in light)
        assert [m.stats for m in every] == [e.stats for e in events]


def test_a_store_without_the_reads_is_answered_from_its_rows() -> None:
    store = MemoryStore()
    long_conversation(store, "long", turns=30)
    reads = series_of(store)
    assert isinstance(reads, RowSeries)
    turns, shown = reads.thinned_samples("long", 10)
    assert turns == 60 and len(shown) <= 10
    assert [m.event for m in reads.marker_rows("long", offset=28)] == [28, 29]
