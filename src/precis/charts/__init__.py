"""Charts drawn as SVG on the server: the window's composition over a run, for the inspector's
pages and for `precis eval --plot` alike."""

from __future__ import annotations

from precis.charts.composition import chart_data, composition_chart, fullness_bar, markers
from precis.charts.svg import Chart, document, render

__all__ = [
    "Chart",
    "chart_data",
    "composition_chart",
    "document",
    "fullness_bar",
    "markers",
    "render",
]
