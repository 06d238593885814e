"""Charts drawn as SVG on the server: the window's composition over a run, for the inspector's
pages and for `precis eval --plot` alike."""

from __future__ import annotations

from precis.charts.composition import (
    CONVENTION,
    chart_data,
    composition_chart,
    fullness_bar,
    markers,
    own_settings,
    what_it_did,
)
from precis.charts.svg import Chart, document, render

__all__ = [
    "CONVENTION",
    "Chart",
    "chart_data",
    "composition_chart",
    "document",
    "fullness_bar",
    "markers",
    "own_settings",
    "render",
    "what_it_did",
]
