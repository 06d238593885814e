"""What the inspector's chart reads: a conversation's turns thinned to a few hundred points and
its compactions' markers a page at a time, so a page's cost does not grow with the conversation.

`SeriesReads` is the read side a store may answer itself (the SQL stores thin and join in SQL:
stores/sql_series.py); `series_of` answers it for any `ConversationStore` from its full rows
(`RowSeries`, what the memory store does), with the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from precis.stores.base import CompactionEvent, ConversationStore
from precis.stores.samples import Sample

__all__ = [
    "MarkerBin",
    "MarkerRow",
    "RowSeries",
    "SeriesReads",
    "bin_of",
    "coarser",
    "downsampled",
    "marker_bins_of",
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


@dataclass(frozen=True, slots=True)
class MarkerBin:
    """The markers of one trigger in one stretch of turns (`bin` of `bins`, as `bin_of` says),
    so a chart draws dense compactions as one mark with its count: `first`/`last` are the
    lowest and highest event, `low`/`high` the lowest and highest turn, `mode` the mode they
    share (None when they differ), `before`/`after` the (lowest, highest) totals, None where
    no marker of the bin counted one."""

    bin: int
    trigger: str
    count: int
    first: int
    last: int
    low: int
    high: int
    mode: str | None
    before: tuple[int | None, int | None]
    after: tuple[int | None, int | None]


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

    def marker_bins(self, conversation_id: str, bins: int) -> list[MarkerBin]:
        """The markers counted per stretch of turns and trigger (`marker_bins_of`'s result),
        in order of bin and first event: as many rows as the chart has room for, however
        many compactions there are."""
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


def bin_of(turn: int, turns: int, bins: int) -> int:
    """Which of `bins` equal stretches of turns 1 … `turns` holds `turn` (0 for a turn 0, the
    turn of a marker of a conversation without samples)."""
    return (turn - 1) * bins // turns if turn > 0 else 0


def _span(values: Sequence[int | None]) -> tuple[int | None, int | None]:
    known = [v for v in values if v is not None]
    return (min(known), max(known)) if known else (None, None)


def marker_bins_of(rows: Sequence[MarkerRow], turns: int, bins: int) -> list[MarkerBin]:
    """`rows` (every marker of a conversation of `turns` turns) counted per bin of turns and
    trigger, in order of bin and first event (what the SQL stores count in the database)."""
    return _merged(
        MarkerBin(
            bin_of(r.turn, max(turns, 1), bins),
            r.trigger,
            1,
            r.event,
            r.event,
            r.turn,
            r.turn,
            r.mode,
            (r.before, r.before),
            (r.after, r.after),
        )
        for r in rows
    )


def coarser(binned: Iterable[MarkerBin], by: int) -> list[MarkerBin]:
    """`binned` (of some number of bins that `by` divides) counted in `by` times fewer bins:
    what `marker_bins_of` gives for that number, since bin_of(t, n, k * b) // k is
    bin_of(t, n, b); one read serves charts of several widths."""
    return _merged(replace(b, bin=b.bin // by) for b in binned)


def _merged(binned: Iterable[MarkerBin]) -> list[MarkerBin]:
    """One bin per bin number and trigger, in order of bin and first event."""
    groups: dict[tuple[int, str], list[MarkerBin]] = {}
    for one in binned:
        groups.setdefault((one.bin, one.trigger), []).append(one)
    out = [
        MarkerBin(
            place,
            trigger,
            sum(b.count for b in group),
            min(b.first for b in group),
            max(b.last for b in group),
            min(b.low for b in group),
            max(b.high for b in group),
            group[0].mode if all(b.mode == group[0].mode for b in group) else None,
            _span([v for b in group for v in b.before]),
            _span([v for b in group for v in b.after]),
        )
        for (place, trigger), group in groups.items()
    ]
    return sorted(out, key=lambda b: (b.bin, b.first))


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

    def marker_bins(self, conversation_id: str, bins: int) -> list[MarkerBin]:
        samples = self._store.samples(conversation_id)
        rows = marker_rows_of(samples, self._store.events(conversation_id))
        return marker_bins_of(rows, samples[-1].turn if samples else 0, bins)


def series_of(store: ConversationStore) -> SeriesReads:
    """The store itself when it answers the chart's reads, else those reads from its rows."""
    return store if isinstance(store, SeriesReads) else RowSeries(store)
