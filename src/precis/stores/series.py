"""What the inspector's chart reads: a conversation's turns thinned to a few hundred points and
its compactions' markers a page at a time, so a page's cost does not grow with the conversation.

`SeriesReads` is the read side a store may answer itself (the SQL stores thin and join in SQL:
stores/sql_series.py); `series_of` answers it for any `ConversationStore` from its full rows
(`RowSeries`, what the memory store does), with the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from precis.stores.base import CompactionEvent, ConversationStore
from precis.stores.samples import Sample

__all__ = [
    "MarkerRow",
    "RowSeries",
    "SeriesReads",
    "downsampled",
    "marker_rows_of",
    "series_of",
    "total_of",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MarkerRow:
    """One compaction as the chart marks it: `event` counts from 0; `turn` is the turn of the
    sample its commit made; `before`/`after` are the totals around it (every part counted);
    `stats` is the event's stats when asked for (a store may leave them out otherwise)."""

    event: int
    trigger: str
    mode: str
    at: str
    summary_id: str
    turn: int
    before: int | None
    after: int | None
    stats: Mapping[str, Any] | None = None


@runtime_checkable
class SeriesReads(Protocol):
    """The chart's reads, each bounded by what the page shows."""

    def thinned_samples(self, conversation_id: str, most: int) -> tuple[int, list[Sample]]:
        """How many samples there are, and at most `most` of them (`downsampled`'s choice)."""
        ...

    def compaction_count(self, conversation_id: str) -> int:
        """How many compaction events the conversation has."""
        ...

    def marker_rows(
        self,
        conversation_id: str,
        *,
        offset: int = 0,
        limit: int | None = None,
        stats: bool = False,
    ) -> list[MarkerRow]:
        """The markers of events `offset` … `offset + limit - 1`, oldest first."""
        ...


def total_of(sample: Sample) -> int:
    """A sample's total, as the key `downsampled` orders by."""
    return sample.total


def downsampled(rows: Sequence[T], most: int, total: Callable[[T], int]) -> list[T]:
    """At most `most` of `rows` (2 at the least), in order: in each stretch of turns the one with
    the fewest tokens (`total`) and the one with the most, so no peak or drop is lost."""
    if len(rows) <= most:
        return list(rows)
    stretches = max(1, most // 2)
    totals = [total(row) for row in rows]
    kept: list[T] = []
    for i in range(stretches):
        start, end = i * len(rows) // stretches, (i + 1) * len(rows) // stretches
        if start == end:
            continue
        span = range(start, end)
        low = min(span, key=totals.__getitem__)
        high = max(span, key=totals.__getitem__)
        kept += [rows[j] for j in sorted({low, high})]
    return kept


def _plus(value: Any, floor: int) -> int | None:
    return value + floor if isinstance(value, int) else None


def marker_rows_of(
    samples: Sequence[Sample], events: Sequence[CompactionEvent], first: int = 0
) -> list[MarkerRow]:
    """One marker per event (`events` being the conversation's from event `first` on), at the
    turn of the sample its commit made.

    Event i made context version i + 1, which its sample carries. Its tokens before and after
    are the samples' totals; an event without its sample (made before samples were kept) sits at
    the first turn after it, else at the last, its stats counted the same way.
    """
    at_version: dict[int, int] = {}
    for place, sample in enumerate(samples):
        if sample.kind == "compaction":
            at_version.setdefault(sample.version, place)
    out: list[MarkerRow] = []
    later = 0
    for index, event in enumerate(events, start=first):
        stats = event.stats
        position = at_version.get(index + 1)
        if position is not None:
            turn = samples[position].turn
            after: int | None = total_of(samples[position])
            before: int | None = (
                total_of(samples[position - 1])
                if position
                else _plus(stats.get("context_tokens_before"), samples[0].system + samples[0].tools)
            )
        else:
            while later < len(samples) and samples[later].version < index + 1:
                later += 1
            near = samples[min(later, len(samples) - 1)] if samples else None
            turn = samples[later].turn if later < len(samples) else (near.turn if near else 0)
            floor = near.system + near.tools if near else 0
            before, after = (
                _plus(stats.get("context_tokens_before"), floor),
                _plus(stats.get("context_tokens_after"), floor),
            )
        out.append(
            MarkerRow(
                index,
                event.trigger,
                event.mode,
                event.at,
                event.summary_id,
                turn,
                before,
                after,
                stats,
            )
        )
    return out


class RowSeries:
    """`SeriesReads` for any store, from its full rows (the memory store's way: no I/O)."""

    def __init__(self, store: ConversationStore) -> None:
        self._store = store

    def thinned_samples(self, conversation_id: str, most: int) -> tuple[int, list[Sample]]:
        samples = self._store.samples(conversation_id)
        return len(samples), downsampled(samples, most, total_of)

    def compaction_count(self, conversation_id: str) -> int:
        return len(self._store.events(conversation_id))

    def marker_rows(
        self,
        conversation_id: str,
        *,
        offset: int = 0,
        limit: int | None = None,
        stats: bool = False,
    ) -> list[MarkerRow]:
        events = self._store.events(conversation_id)
        rows = marker_rows_of(self._store.samples(conversation_id), events)
        return rows[offset : None if limit is None else offset + limit]


def series_of(store: ConversationStore) -> SeriesReads:
    """The store itself when it answers the chart's reads, else those reads from its rows."""
    return store if isinstance(store, SeriesReads) else RowSeries(store)
