"""The context window's composition over a run: the data behind the chart, and the chart.

`chart_data` turns a conversation's samples and compaction events into plain data (what the
inspector serves as JSON); `composition_chart` draws that data. The inspector's page and
`precis eval --plot` both draw through here, so they show the same thing the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from precis.charts.svg import MARGIN, Chart, Column, Guide, Layer, Marker, short_number
from precis.stores.base import CompactionEvent
from precis.stores.samples import PARTS, Sample
from precis.stores.series import (
    MarkerBin,
    MarkerRow,
    coarser,
    downsampled,
    marker_bins_of,
    marker_rows_of,
    total_of,
)

__all__ = [
    "CONVENTION",
    "FREE",
    "PART_STYLE",
    "RESERVED",
    "TRIGGER_COLORS",
    "bins_for",
    "chart_data",
    "composition_chart",
    "downsampled",
    "fullness_bar",
    "marker_dict",
    "markers",
    "own_settings",
    "series_data",
    "settings_of",
    "trigger_color",
    "what_it_did",
]

# Each part's label and colour, in stacking order (stores.samples.PARTS).
PART_STYLE: dict[str, tuple[str, str]] = {
    "system": ("system prompt", "#64748b"),
    "tools": ("tool definitions", "#a3adbd"),
    "pinned": ("pinned / task", "#8b5cf6"),
    "summary": ("summary", "#f59e0b"),
    "messages": ("messages", "#3b82f6"),
    "tool_outputs": ("tool outputs", "#14b8a6"),
}
RESERVED = ("reserved", "#fecaca")
FREE = ("free", "#eef2f7")
# A compaction marker's colour says what triggered it.
TRIGGER_COLORS: dict[str, str] = {
    "manual": "#111827",
    "context_window_limit": "#dc2626",
    "context_window_overflow": "#c026d3",
    "hard_watermark": "#7f1d1d",
    "turn_limit": "#2563eb",
    "phase_complete": "#16a34a",
}
OTHER_TRIGGER = "#475569"


def trigger_color(trigger: str) -> str:
    return TRIGGER_COLORS.get(trigger, OTHER_TRIGGER)


# What every figure counts, said on every page that shows one.
CONVENTION = "tokens the model is sent: the system prompt and tool definitions included"
# Most samples chart_data serves: the lowest and the highest of each stretch are kept.
MAX_POINTS = 2000


def markers(samples: Sequence[Sample], events: Sequence[CompactionEvent]) -> list[dict[str, Any]]:
    """One marker per compaction event, at the turn of the sample its commit made (see
    `stores.series.marker_rows_of`), as plain data."""
    return [marker_dict(row) for row in marker_rows_of(samples, events)]


def marker_dict(row: MarkerRow) -> dict[str, Any]:
    """A marker as the chart's JSON holds it; `fallback` (what stood in for a summarizer that
    failed) is known only when the row was read with its stats."""
    return {
        "event": row.event,
        "turn": row.turn,
        "trigger": row.trigger,
        "mode": row.mode,
        "at": row.at,
        "summary_id": row.summary_id,
        "tokens_before": row.before,
        "tokens_after": row.after,
        "fallback": row.stats.get("fallback") if row.stats else None,
        "color": trigger_color(row.trigger),
    }


def own_settings(
    samples: Sequence[Sample], events: Sequence[CompactionEvent]
) -> tuple[int | None, int | None, int | None]:
    """The conversation's window and watermarks (threshold, hard limit), as it recorded them:
    the window with its latest sample, the watermarks with its latest compaction at that window
    (None where nothing recorded them; the service's settings may be other)."""
    return settings_of(samples[-1] if samples else None, events[-1].stats if events else {})


def settings_of(
    latest: Sample | None, stats: Mapping[str, Any]
) -> tuple[int | None, int | None, int | None]:
    """`own_settings` from the latest sample and the latest compaction's stats alone."""
    window = latest.window if latest is not None else None
    if window is None:
        window = (
            stats.get("context_window") if isinstance(stats.get("context_window"), int) else None
        )
    same = stats.get("context_window") == window
    threshold, hard = (stats.get("threshold"), stats.get("hard_limit")) if same else (None, None)
    return (
        window,
        threshold if isinstance(threshold, int) else None,
        hard if isinstance(hard, int) else None,
    )


def chart_data(
    samples: Sequence[Sample], events: Sequence[CompactionEvent], *, most: int = MAX_POINTS
) -> dict[str, Any]:
    """What the chart shows, as plain data: samples (at most `most`, the lowest and highest of
    each stretch kept), a marker per compaction, the conversation's own window and watermarks."""
    return series_data(
        len(samples),
        downsampled(samples, most, total_of),
        marker_rows_of(samples, events),
        own_settings(samples, events),
    )


def series_data(
    turns: int,
    shown: Sequence[Sample],
    rows: Sequence[MarkerRow],
    settings: tuple[int | None, int | None, int | None],
) -> dict[str, Any]:
    """`chart_data` from what a store read for it: how many turns, the samples to draw, the
    markers, and the conversation's own window and watermarks (`settings_of`)."""
    window, threshold, hard = settings
    return {
        "convention": CONVENTION,
        "parts": list(PARTS),
        "turns": turns,
        "samples": [s.as_dict() for s in shown],
        "markers": [marker_dict(row) for row in rows],
        "window": window,
        "threshold": threshold,
        "hard_limit": hard,
    }


def _total(sample: Mapping[str, Any]) -> int:
    total: int = sample["total"]
    return total


def _hover(sample: Mapping[str, Any]) -> str:
    window = sample["window"]
    of = f" of {window:,}" if window else ""
    lines = [f"turn {sample['turn']} ({sample['kind']}): {sample['total']:,}{of} tokens"]
    lines += [
        f"{PART_STYLE[name][0]}: {value:,}" for name, value in sample["parts"].items() if value
    ]
    if window:
        lines.append(f"reserved: {sample['reserved']:,} · free: {sample['free']:,}")
    lines.append(f"{sample['in_context']} messages in context")
    return "\n".join(lines)


def _x(sample: Mapping[str, Any]) -> float:
    """A compaction takes no turn of the conversation's: it is drawn at the turn before it, so
    the drop is a step, not a slope."""
    turn = float(sample["turn"])
    return turn - 1 if sample["kind"] == "compaction" and turn > 1 else turn


def bins_for(width: int, tap: int) -> int:
    """How many stretches of turns a chart `width` pixels wide draws its markers in: one per
    half a tap target of its plot (the markers of a stretch are drawn as one)."""
    return max(1, (width - MARGIN[0] - MARGIN[1]) * 2 // max(tap, 1))


def _binned(data: Mapping[str, Any], bins: int) -> Sequence[MarkerBin]:
    """The markers in `bins` bins: as a store counted them for that many, or for a multiple of
    it (merged), else counted here from the markers."""
    given: Mapping[int, Sequence[MarkerBin]] = data.get("marker_bins") or {}
    if bins in given:
        return given[bins]
    for count, binned in given.items():
        if count % bins == 0:
            return coarser(binned, count // bins)
    return marker_bins_of(_rows(data), data["turns"], bins)


def _rows(data: Mapping[str, Any]) -> list[MarkerRow]:
    return [
        MarkerRow(
            m["event"],
            m["trigger"],
            m["mode"],
            m["at"],
            m["summary_id"],
            m["turn"],
            m["tokens_before"],
            m["tokens_after"],
        )
        for m in data["markers"]
    ]


def _drawn_markers(
    binned: Sequence[MarkerBin], x: Callable[[int], float], href: Callable[[int], str] | None
) -> list[Marker]:
    """One marker per bin (its triggers together), coloured as its first compaction, linked
    to it, at its one turn or midway between its lowest and highest."""
    by_bin: dict[int, list[MarkerBin]] = {}
    for one in binned:
        by_bin.setdefault(one.bin, []).append(one)
    out: list[Marker] = []
    for group in by_bin.values():
        first = min(group, key=lambda b: b.first)
        count = sum(b.count for b in group)
        low, high = min(b.low for b in group), max(b.high for b in group)
        out.append(
            Marker(
                x=x(low) if low == high else (x(low) + x(high)) / 2,
                color=trigger_color(first.trigger),
                title=functools.partial(_bin_title, group, count),
                href=functools.partial(href, first.first) if href is not None else None,
                key=str(first.first),
                count=count,
            )
        )
    return out


def _bin_title(group: Sequence[MarkerBin], count: int) -> str:
    if count == 1:
        (one,) = group
        return (
            f"compaction {one.first + 1}: {one.trigger}, {what_it_did(one.mode or '')}, "
            f"{_count(one.before[0])} → {_count(one.after[0])} tokens"
        )
    first, last = min(b.first for b in group), max(b.last for b in group)
    low, high = min(b.low for b in group), max(b.high for b in group)
    lines = [f"{count} compactions here: {first + 1}–{last + 1}, turns {low:,}–{high:,}"]
    for one in sorted(group, key=lambda b: b.first):
        what = what_it_did(one.mode) if one.mode else "several modes"
        lines.append(
            f"{one.count} × {one.trigger}, {what}, {_range(one.before)} → {_range(one.after)} "
            "tokens"
        )
    return "\n".join(lines)


def _range(span: tuple[int | None, int | None]) -> str:
    low, high = span
    return _count(low) if low == high else f"{_count(low)}–{_count(high)}"


def composition_chart(
    data: Mapping[str, Any],
    *,
    title: str,
    href: Callable[[int], str] | None = None,
    width: int = 960,
    height: int = 340,
    tap: int = 32,
    bins: int | None = None,
) -> Chart:
    """The stacked chart of `chart_data`'s output; `href(event)` links each marker. The samples
    are thinned to about one low and one high per 3 pixels of `width`; the markers are drawn
    one per stretch of turns, `bins` of them (by default `bins_for` the width and tap), from
    `data["marker_bins"]` when a store counted them (for that many or a multiple), else
    counted here from `data["markers"]`."""
    samples = downsampled(list(data["samples"]), max(2, width * 2 // 3), _total)
    xs = [_x(s) for s in samples]
    layers = [
        Layer(name, PART_STYLE[name][0], PART_STYLE[name][1], [s["parts"][name] for s in samples])
        for name in PARTS
    ]
    windowed = data.get("window") is not None
    if windowed:
        layers.append(Layer("reserved", *RESERVED, [s["reserved"] for s in samples]))
        layers.append(Layer("free", *FREE, [s["free"] for s in samples]))
    guides: list[Guide] = []
    if windowed:
        guides.append(Guide(float(data["window"]), f"window {data['window']:,}", "#111827"))
    if data.get("threshold") is not None:
        label = f"compacts above {data['threshold']:,}"
        guides.append(Guide(float(data["threshold"]), label, "#b45309"))
    by_turn = {s["turn"]: _x(s) for s in samples}
    binned = _binned(data, bins or bins_for(width, tap))
    found = _drawn_markers(binned, lambda turn: by_turn.get(turn, float(turn) - 1), href)
    triggers = dict.fromkeys(b.trigger for b in binned)
    legend = [(label, color) for label, color in PART_STYLE.values()]
    if windowed:
        legend += [RESERVED, FREE]
    legend += [(f"▼ {t}", trigger_color(t)) for t in triggers]
    return Chart(
        title=title,
        xs=xs,
        layers=layers,
        guides=guides,
        markers=found,
        columns=[Column(_x(s), functools.partial(_hover, s)) for s in samples],
        width=width,
        height=height,
        legend=legend,
        tap=tap,
        max_columns=max(20, width // 4),
    )


def what_it_did(mode: str) -> str:
    """A compaction's mode as an operator reads it, with its tier: a truncation and a masking
    summarized nothing."""
    if mode == "truncate":
        return "truncated (oldest dropped)"
    if mode == "mask":
        return "masked old tool outputs (no summary)"
    return f"{mode} summary"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def fullness_bar(sample: Sample | None, *, width: int = 180, height: int = 14) -> str:
    """How full the window is now, as a small stacked bar (parts over the window)."""
    if sample is None:
        return (
            f'<svg class="bar" width="{width}" height="{height}" role="img" '
            f'aria-label="no sample yet"><rect width="{width}" height="{height}" '
            'fill="#eef2f7"/></svg>'
        )
    scale = max(sample.window or 0, sample.total, 1)
    out = [
        f'<svg class="bar" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="{_fullness(sample)}">',
        f'<rect width="{width}" height="{height}" fill="{FREE[1]}"/>',
    ]
    x = 0.0
    for name in PARTS:
        share = sample.part(name) / scale * width
        if share > 0:
            out.append(
                f'<rect x="{x:.1f}" width="{share:.1f}" height="{height}" '
                f'fill="{PART_STYLE[name][1]}"/>'
            )
            x += share
    out.append(f"<title>{_fullness(sample)}</title></svg>")
    return "".join(out)


def _fullness(sample: Sample) -> str:
    if sample.window is None:
        return escape(f"{sample.total:,} tokens (no window set)")
    share = sample.total / sample.window
    return escape(f"{short_number(sample.total)} of {short_number(sample.window)} ({share:.0%})")
