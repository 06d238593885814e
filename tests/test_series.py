"""The chart's reads (stores/series.py): what a SQL store thins and joins in the database is
what the rows give when every sample and event is read, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from inspector_data import long_conversation, replay

from precis.core.messages import Message
from precis.stores import MemoryStore
from precis.stores.base import CompactionEvent, ConversationStore
from precis.stores.series import RowSeries, SeriesReads, bin_of, coarser, series_of


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


def _unsampled_compaction(store: ConversationStore, conversation_id: str) -> None:
    """A compaction committed with no sample after it, as before samples were kept."""
    snapshot = store.context(conversation_id)
    summary = Message(role="user", content="old", kind="summary", id="old-summary")
    stats = {"context_tokens_before": 2000, "context_tokens_after": 500}
    store.commit_compaction(
        conversation_id,
        expected_version=snapshot.version,
        snapshot_last_seq=snapshot.last_seq,
        summary=summary,
        context_ids=[summary.id],
        event=CompactionEvent("manual", "all", stats, summary.id, "t"),
    )


def test_markers_counted_per_stretch_of_turns_match_the_full_rows(
    sql_store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_conversation(sql_store, "long", turns=300)
    replay(sql_store, "airline", manual_every=7)
    long_conversation(sql_store, "old", turns=12)
    _unsampled_compaction(sql_store, "old")
    sql_store.create("empty")
    rows = RowSeries(sql_store)
    expected = {
        (cid, bins): rows.marker_bins(cid, bins)
        for cid in ("long", "airline", "old", "empty")
        for bins in (0, 1, 2, 7, 16, 55, 1000)
    }

    def every_row(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("counted from every marker's row")

    # Where every event sits at the sample it made, the database counts them: no row is read.
    with monkeypatch.context() as patched:
        patched.setattr(sql_store, "marker_rows", every_row)
        for cid in ("long", "airline", "empty"):
            for bins in (0, 1, 2, 7, 16, 55, 1000):
                assert sql_store.marker_bins(cid, bins) == expected[cid, bins]
    for bins in (0, 1, 2, 7, 16, 55, 1000):
        assert sql_store.marker_bins("old", bins) == expected["old", bins]
    # One count serves a chart of fewer bins that divide it: merged, they are its own count.
    for cid in ("long", "airline", "old", "empty"):
        fine = sql_store.marker_bins(cid, 48)
        for by, bins in ((3, 16), (48, 1), (1, 48)):
            assert coarser(fine, by) == rows.marker_bins(cid, bins)
    for cid in ("long", "airline", "old"):
        events = sql_store.events(cid)
        every = rows.marker_rows(cid)
        turns = len(sql_store.samples(cid))
        for bins in (1, 16, 55):
            found = expected[cid, bins]
            assert sum(b.count for b in found) == len(events)
            assert len(found) <= bins * len({e.trigger for e in events})
            for b in found:
                inside = [
                    m for m in every if b.first <= m.event <= b.last and m.trigger == b.trigger
                ]
                assert len(inside) == b.count
                assert {bin_of(m.turn, turns, bins) for m in inside} == {b.bin}
                assert (b.low, b.high) == (inside[0].turn, inside[-1].turn)
    assert len(expected["long", 55]) == 55 and expected["empty", 55] == []
    (one,) = expected["long", 1]
    every = rows.marker_rows("long")
    assert (one.count, one.first, one.last, one.mode) == (300, 0, 299, "sliding_window")
    assert one.before == (min(m.before or 0 for m in every), max(m.before or 0 for m in every))
    assert one.after == (min(m.after or 0 for m in every), max(m.after or 0 for m in every))
