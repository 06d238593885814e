"""The context window's composition over a run: the data behind the chart, and the chart.

`chart_data` turns a conversation's samples and compaction events into plain data (what the
inspector serves as JSON); `composition_chart` draws that data. The inspector's page and
`precis eval --plot` both draw through here, so they show the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from precis.charts.svg import Chart, Column, Guide, Layer, Marker, short_number
from precis.stores.base import CompactionEvent
from precis.stores.samples import PARTS, Sample

__all__ = [
    "FREE",
    "PART_STYLE",
    "RESERVED",
    "TRIGGER_COLORS",
    "chart_data",
    "composition_chart",
    "fullness_bar",
    "markers",
    "trigger_color",
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


def markers(samples: Sequence[Sample], events: Sequence[CompactionEvent]) -> list[dict[str, Any]]:
    """One marker per compaction event, at the turn of the sample its commit made.

    Event i made context version i + 1, which its sample carries. An event without its sample
    (made before samples were kept) sits at the first turn after it, else at the last.
    """
    at_version: dict[int, int] = {}
    for sample in samples:
        if sample.kind == "compaction":
            at_version.setdefault(sample.version, sample.turn)
    out: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        turn = at_version.get(index + 1)
        if turn is None:
            later = [s.turn for s in samples if s.version >= index + 1]
            turn = later[0] if later else (samples[-1].turn if samples else 0)
        stats = event.stats
        out.append(
            {
                "event": index,
                "turn": turn,
                "trigger": event.trigger,
                "mode": event.mode,
                "at": event.at,
                "summary_id": event.summary_id,
                "tokens_before": stats.get("context_tokens_before"),
                "tokens_after": stats.get("context_tokens_after"),
                "fallback": stats.get("fallback"),  # what stood in for a summarizer that failed
                "color": trigger_color(event.trigger),
            }
        )
    return out


def chart_data(
    samples: Sequence[Sample],
    events: Sequence[CompactionEvent],
    *,
    threshold: int | None = None,
) -> dict[str, Any]:
    """What the chart shows, as plain data: a sample per turn and a marker per compaction."""
    return {
        "parts": list(PARTS),
        "samples": [s.as_dict() for s in samples],
        "markers": markers(samples, events),
        "window": samples[-1].window if samples else None,
        "threshold": threshold,
    }


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


def composition_chart(
    data: Mapping[str, Any],
    *,
    title: str,
    href: Callable[[int], str] | None = None,
    width: int = 960,
    height: int = 340,
) -> Chart:
    """The stacked chart of `chart_data`'s output; `href(event)` links each marker."""
    samples: list[dict[str, Any]] = list(data["samples"])
    xs = [float(s["turn"]) for s in samples]
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
    found = [
        Marker(
            x=float(m["turn"]),
            color=m["color"],
            title=(
                f"compaction {m['event'] + 1}: {m['trigger']}, {m['mode']}, "
                f"{m['tokens_before']} → {m['tokens_after']} tokens"
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
        columns=[Column(float(s["turn"]), _hover(s)) for s in samples],
        width=width,
        height=height,
        legend=legend,
    )


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
