"""A small SVG chart: stacked areas over numbered turns, guide lines, markers and hover columns.

Pure string building, no I/O and no script: the inspector inlines the result in its pages and
`precis eval --plot` writes it to a file. Hover works without script too: each column carries a
`<title>` (the browser's tooltip) and a class the stylesheet highlights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

__all__ = [
    "Chart",
    "Column",
    "Guide",
    "Layer",
    "Marker",
    "Title",
    "document",
    "nice_ceiling",
    "render",
    "short_number",
]

# Most hover columns a chart draws; longer runs share a column between neighbouring turns.
MAX_COLUMNS = 240
# Room around the plot: left (tick labels), right, top (title and one legend row), bottom.
MARGIN = (60, 20, 54, 34)
# Width of a legend label's character at 11 px, near enough to lay the legend out in rows.
LEGEND_CHAR = 6.3


# A tooltip, or what writes it: a long run's chart writes only the ones it draws.
Title = str | Callable[[], str]


def text_of(title: Title) -> str:
    return title if isinstance(title, str) else title()


@dataclass(frozen=True, slots=True)
class Layer:
    """One band of the stack: a value per turn, drawn in `color` above the bands before it."""

    name: str
    label: str
    color: str
    values: Sequence[float]


@dataclass(frozen=True, slots=True)
class Guide:
    """A horizontal line across the plot at `y`, such as the window or the threshold."""

    y: float
    label: str
    color: str
    dashed: bool = True


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical mark at turn `x` (a compaction, or `count` of them close together),
    optionally a link; `title` is its tooltip."""

    x: float
    color: str
    title: Title
    href: Title | None = None
    key: str = ""
    count: int = 1


@dataclass(frozen=True, slots=True)
class Column:
    """What hovering over the turn `x` shows."""

    x: float
    title: Title


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything one drawing needs; `xs` are the turn numbers, one per value of each layer.

    `tap` is the least size, in pixels, a marker answers a click or a tap over (whoever makes
    the markers draws those closer than that as one, with their count: `composition_chart`).
    `max_columns` bounds the hover columns."""

    title: str
    xs: Sequence[float]
    layers: Sequence[Layer]
    guides: Sequence[Guide] = ()
    markers: Sequence[Marker] = ()
    columns: Sequence[Column] = ()
    x_label: str = "turn"
    y_label: str = "tokens"
    width: int = 960
    height: int = 340
    legend: Sequence[tuple[str, str]] = field(default=())
    tap: int = 32
    max_columns: int = MAX_COLUMNS


def short_number(value: float) -> str:
    """1234 → '1.2k', 2000000 → '2M': tick labels that stay narrow."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if abs(value) >= size:
            text = f"{value / size:.1f}".rstrip("0").rstrip(".")
            return text + suffix
    return f"{value:.0f}"


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above `value` (1 for nothing to show)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def _f(value: float) -> str:
    """One decimal, none when it is 0 (a chart writes thousands of these)."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


class _Frame:
    """Maps turns and tokens to the plot's pixels."""

    def __init__(self, chart: Chart, highest: float, top: float) -> None:
        left, right, _, bottom = MARGIN
        self.x0, self.x1 = float(left), float(chart.width - right)
        self.y0, self.y1 = float(chart.height - bottom), float(top)
        xs = chart.xs
        self.first, self.last = (min(xs), max(xs)) if xs else (0.0, 1.0)
        if self.first == self.last:  # one turn sits in the middle
            self.first, self.last = self.first - 2, self.last + 2
        # Four to six gridlines at a round step, the top one at or above the highest value.
        self.step = nice_ceiling(highest / 5)
        self.ticks = max(1, math.ceil(highest / self.step))
        self.top = self.step * self.ticks

    def point(self, turn: float, tokens: float) -> str:
        return f"{_f(self.x(turn))},{_f(self.y(tokens))}"

    def x(self, turn: float) -> float:
        return self.x0 + (turn - self.first) / (self.last - self.first) * (self.x1 - self.x0)

    def y(self, tokens: float) -> float:
        return self.y0 - min(tokens, self.top) / self.top * (self.y0 - self.y1)


def _areas(chart: Chart, frame: _Frame) -> list[str]:
    """Each layer filled from its top down to the axis, the highest first, so the ones below
    paint over it: a path holds one point per turn, not two."""
    one = len(chart.xs) == 1  # one turn draws as a bar: a line from a turn to itself is empty
    xs = [chart.xs[0] - 0.4, chart.xs[0] + 0.4] if one else list(chart.xs)
    tops: list[list[float]] = []
    base = [0.0] * len(chart.xs)
    for layer in chart.layers:
        base = [b + float(v) for b, v in zip(base, layer.values, strict=True)]
        tops.append(base * 2 if one else base)
    out: list[str] = []
    pixels = [_f(frame.x(x)) for x in xs]  # the same for every layer
    floor = _f(frame.y(0))
    for layer, top in zip(reversed(chart.layers), reversed(tops), strict=True):
        if any(v > 0 for v in layer.values):
            points = [f"{x},{_f(frame.y(t))}" for x, t in zip(pixels, top, strict=True)]
            points += [f"{pixels[-1]},{floor}", f"{pixels[0]},{floor}"]
            out.append(
                f'<path class="part part-{escape(layer.name)}" fill="{escape(layer.color)}" '
                f'd="M{"L".join(points)}Z"><title>{escape(layer.label)}</title></path>'
            )
    return out


def _axes(chart: Chart, frame: _Frame) -> list[str]:
    out = [
        f'<line class="axis" x1="{_f(frame.x0)}" y1="{_f(frame.y0)}" x2="{_f(frame.x1)}" '
        f'y2="{_f(frame.y0)}" stroke="#666"/>',
        f'<line class="axis" x1="{_f(frame.x0)}" y1="{_f(frame.y0)}" x2="{_f(frame.x0)}" '
        f'y2="{_f(frame.y1)}" stroke="#666"/>',
    ]
    for i in range(frame.ticks + 1):
        value = frame.step * i
        y = frame.y(value)
        out.append(
            f'<line x1="{_f(frame.x0)}" y1="{_f(y)}" x2="{_f(frame.x1)}" y2="{_f(y)}" '
            'stroke="#000" stroke-opacity="0.08"/>'
            f'<text class="tick" x="{_f(frame.x0 - 6)}" y="{_f(y + 4)}" text-anchor="end" '
            f'font-size="11" fill="#444">{short_number(value)}</text>'
        )
    out.append(
        f'<text x="{_f(frame.x1)}" y="{_f(frame.y0 + 30)}" text-anchor="end" font-size="11" '
        f'fill="#444">{escape(chart.x_label)}</text>'
        f'<text x="12" y="{_f(frame.y1 - 8)}" font-size="11" fill="#444">'
        f"{escape(chart.y_label)}</text>"
    )
    return out


def _turn_ticks(chart: Chart, frame: _Frame) -> list[str]:
    """Up to 8 turn numbers under the plot."""
    out: list[str] = []
    if chart.xs:
        count, last = min(8, len(chart.xs)), len(chart.xs) - 1
        picks = sorted({chart.xs[round(i * last / max(count - 1, 1))] for i in range(count)})
        for turn in picks:
            out.append(
                f'<text class="tick" x="{_f(frame.x(turn))}" y="{_f(frame.y0 + 16)}" '
                f'text-anchor="middle" font-size="11" fill="#444">{short_number(turn)}</text>'
            )
    return out


def _guides(chart: Chart, frame: _Frame) -> list[str]:
    out: list[str] = []
    for guide in chart.guides:
        y = frame.y(guide.y)
        dash = ' stroke-dasharray="6 4"' if guide.dashed else ""
        out.append(
            f'<g class="guide"><line x1="{_f(frame.x0)}" y1="{_f(y)}" x2="{_f(frame.x1)}" '
            f'y2="{_f(y)}" stroke="{escape(guide.color)}" stroke-width="1.5"{dash}/>'
            f'<text x="{_f(frame.x1 - 4)}" y="{_f(y - 4)}" text-anchor="end" font-size="11" '
            f'fill="{escape(guide.color)}" stroke="#fff" stroke-width="3" paint-order="stroke">'
            f"{escape(guide.label)}</text></g>"
        )
    return out


def _columns(chart: Chart, frame: _Frame) -> list[str]:
    columns = list(chart.columns)
    if not columns:
        return []
    stride = math.ceil(len(columns) / chart.max_columns)
    shown = columns[stride - 1 :: stride] if stride > 1 else columns
    half = max((frame.x1 - frame.x0) / max(len(chart.xs) - 1, 1) * stride / 2, 3.0)
    return [
        '<g class="columns">',
        *(
            f'<rect class="col" x="{_f(frame.x(c.x) - half)}" y="{_f(frame.y1)}" '
            f'width="{_f(2 * half)}" height="{_f(frame.y0 - frame.y1)}" fill="#000" '
            f'fill-opacity="0"><title>{escape(text_of(c.title))}</title></rect>'
            for c in shown
        ),
        "</g>",
    ]


def _markers(chart: Chart, frame: _Frame) -> list[str]:
    """Each marker a line, a head with its count (when it stands for more than one) and a tap
    target `chart.tap` wide."""
    out: list[str] = []
    half = chart.tap / 2
    for marker in chart.markers:
        x = frame.x(marker.x)
        count = (
            f'<text x="{_f(x)}" y="{_f(frame.y1 - 15)}" text-anchor="middle" font-size="11" '
            f'font-weight="600" fill="{escape(marker.color)}">{marker.count}</text>'
            if marker.count > 1
            else ""
        )
        body = (
            f'<line x1="{_f(x)}" y1="{_f(frame.y1)}" x2="{_f(x)}" y2="{_f(frame.y0)}" '
            f'stroke="{escape(marker.color)}" stroke-width="1.5"/>'
            f'<path d="M{_f(x - 7)},{_f(frame.y1 - 12)} L{_f(x + 7)},{_f(frame.y1 - 12)} '
            f'L{_f(x)},{_f(frame.y1)} Z" fill="{escape(marker.color)}" stroke="#fff"/>{count}'
            f'<rect class="tap" x="{_f(x - half)}" y="{_f(frame.y1 - chart.tap + 4)}" '
            f'width="{chart.tap}" height="{chart.tap}" fill="#000" fill-opacity="0"/>'
            f"<title>{escape(text_of(marker.title))}</title>"
        )
        key = f' data-key="{escape(marker.key)}" data-count="{marker.count}"' if marker.key else ""
        if marker.href is not None:
            href = escape(text_of(marker.href))
            out.append(f'<a class="marker" href="{href}"{key}>{body}</a>')
        else:
            out.append(f'<g class="marker"{key}>{body}</g>')
    return out


def _legend(chart: Chart) -> tuple[list[str], float]:
    """The legend's rows under the title, wrapped to the width, and where the plot may start."""
    out: list[str] = ['<g class="legend">']
    left, right = MARGIN[0], chart.width - MARGIN[1]
    x, y = float(left), 23.0
    for label, color in chart.legend:
        wide = 15 + LEGEND_CHAR * len(label) + 14
        if x > left and x + wide > right:
            x, y = float(left), y + 16
        out.append(
            f'<rect x="{_f(x)}" y="{_f(y)}" width="11" height="11" fill="{escape(color)}"/>'
            f'<text x="{_f(x + 15)}" y="{_f(y + 10)}" font-size="11" fill="#333">'
            f"{escape(label)}</text>"
        )
        x += wide
    out.append("</g>")
    return out, y + 31


def render(chart: Chart, *, element_id: str = "") -> str:
    """The chart as one `<svg>` element, to inline in a page or wrap with `document`."""
    top = max(
        [g.y for g in chart.guides]
        + [sum(float(layer.values[i]) for layer in chart.layers) for i in range(len(chart.xs))]
        + [0.0]
    )
    legend, plot_top = _legend(chart)
    frame = _Frame(chart, top * 1.04, plot_top)
    ident = f' id="{escape(element_id)}"' if element_id else ""
    # How turns and tokens map to pixels, for the page's script that appends live turns.
    scale = (
        f'data-x0="{_f(frame.x0)}" data-x1="{_f(frame.x1)}" data-first="{_f(frame.first)}" '
        f'data-last="{_f(frame.last)}" data-y0="{_f(frame.y0)}" data-y1="{_f(frame.y1)}" '
        f'data-top="{_f(frame.top)}"'
    )
    parts = [
        f'<svg{ident} class="chart" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {chart.width} {chart.height}" width="{chart.width}" '
        f'height="{chart.height}" role="img" aria-label="{escape(chart.title)}" '
        f'font-family="system-ui, sans-serif" {scale}>',
        f"<title>{escape(chart.title)}</title>",
        f'<text x="{MARGIN[0]}" y="14" font-size="13" font-weight="600" fill="#222">'
        f"{escape(chart.title)}</text>",
        *legend,
        '<g class="plot">',
        *_areas(chart, frame),
        *_turn_ticks(chart, frame),
        "</g>",
        *_axes(chart, frame),
        *_guides(chart, frame),
        '<g class="plot">',
        *_columns(chart, frame),
        *_markers(chart, frame),
        "</g>",
        "</svg>",
    ]
    return "".join(parts)


def document(charts: Sequence[Chart], *, gap: int = 12) -> str:
    """Charts stacked top to bottom as one standalone SVG file."""
    width = max((c.width for c in charts), default=0)
    total = sum(c.height for c in charts) + gap * max(len(charts) - 1, 0)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
        f'viewBox="0 0 {width} {total}">',
        f'<rect width="{width}" height="{total}" fill="#fff"/>',
    ]
    y = 0
    for chart in charts:
        out.append(f'<g transform="translate(0 {y})">{render(chart)}</g>')
        y += chart.height + gap
    out.append("</svg>\n")
    return "".join(out)
