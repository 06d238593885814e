"""The context window's composition over a run: the data behind the chart, and the chart.

`chart_data` turns a conversation's samples and compaction events into plain data (what the
inspector serves as JSON); `composition_chart` draws that data. The inspector's page and
`precis eval --plot` both draw through here, so they show the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any, TypeVar

from precis.charts.svg import Chart, Column, Guide, Layer, Marker, short_number
from precis.stores.base import CompactionEvent
from precis.stores.samples import PARTS, Sample

__all__ = [
    "CONVENTION",
    "FREE",
    "PART_STYLE",
    "RESERVED",
    "TRIGGER_COLORS",
    "chart_data",
    "composition_chart",
    "downsampled",
    "fullness_bar",
    "markers",
    "own_settings",
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


T = TypeVar("T")

# What every figure counts, said on every page that shows one.
CONVENTION = "tokens the model is sent: the system prompt and tool definitions included"
# Most samples chart_data serves: the lowest and the highest of each stretch are kept.
MAX_POINTS = 2000


def markers(samples: Sequence[Sample], events: Sequence[CompactionEvent]) -> list[dict[str, Any]]:
    """One marker per compaction event, at the turn of the sample its commit made.

    Event i made context version i + 1, which its sample carries. Its tokens before and after
    are the samples' totals (CONVENTION); an event without its sample (made before samples were
    kept) sits at the first turn after it, else at the last, its stats counted the same way.
    """
    at_version: dict[int, int] = {}
    for place, sample in enumerate(samples):
        if sample.kind == "compaction":
            at_version.setdefault(sample.version, place)
    out: list[dict[str, Any]] = []
    later = 0
    for index, event in enumerate(events):
        stats = event.stats
        position = at_version.get(index + 1)
        if position is not None:
            turn = samples[position].turn
            after: int | None = _total_of(samples[position])
            before: int | None = (
                _total_of(samples[position - 1])
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
            {
                "event": index,
                "turn": turn,
                "trigger": event.trigger,
                "mode": event.mode,
                "at": event.at,
                "summary_id": event.summary_id,
                "tokens_before": before,
                "tokens_after": after,
                "fallback": stats.get("fallback"),  # what stood in for a summarizer that failed
                "color": trigger_color(event.trigger),
            }
        )
    return out


def _plus(value: Any, floor: int) -> int | None:
    return value + floor if isinstance(value, int) else None


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


def own_settings(
    samples: Sequence[Sample], events: Sequence[CompactionEvent]
) -> tuple[int | None, int | None, int | None]:
    """The conversation's window and watermarks (threshold, hard limit), as it recorded them:
    the window with its latest sample, the watermarks with its latest compaction at that window
    (None where nothing recorded them; the service's settings may be other)."""
    window = samples[-1].window if samples else None
    stats = events[-1].stats if events else {}
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
    window, threshold, hard = own_settings(samples, events)
    return {
        "convention": CONVENTION,
        "parts": list(PARTS),
        "turns": len(samples),
        "samples": [s.as_dict() for s in downsampled(samples, most, _total_of)],
        "markers": markers(samples, events),
        "window": window,
        "threshold": threshold,
        "hard_limit": hard,
    }


def _total_of(sample: Sample) -> int:
    return sample.total


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


def composition_chart(
    data: Mapping[str, Any],
    *,
    title: str,
    href: Callable[[int], str] | None = None,
    width: int = 960,
    height: int = 340,
    tap: int = 32,
) -> Chart:
    """The stacked chart of `chart_data`'s output; `href(event)` links each marker. The samples
    are thinned to about one low and one high per 3 pixels of `width`."""
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
    found = [
        Marker(
            x=by_turn.get(m["turn"], float(m["turn"]) - 1),
            color=m["color"],
            title=(
                f"compaction {m['event'] + 1}: {m['trigger']}, {what_it_did(m['mode'])}, "
                f"{_count(m['tokens_before'])} → {_count(m['tokens_after'])} tokens"
            ),
            href=href(m["event"]) if href is not None else None,
            key=str(m["event"]),
        )
        for m in data["markers"]
    ]
    triggers = dict.fromkeys(m["trigger"] for m in data["markers"])
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
        columns=[Column(_x(s), _hover(s)) for s in samples],
        width=width,
        height=height,
        legend=legend,
        tap=tap,
        max_columns=max(20, width // 4),
    )


def what_it_did(mode: str) -> str:
    """A compaction's mode as an operator reads it: a truncation summarized nothing."""
    return "truncated (oldest dropped)" if mode == "truncate" else f"{mode} summary"


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
