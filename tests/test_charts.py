"""The composition chart's data and drawing, with plain samples and events."""

from __future__ import annotations

from xml.etree import ElementTree

from precis.charts import chart_data, composition_chart, document, fullness_bar, render
from precis.charts.svg import nice_ceiling, short_number
from precis.stores.base import CompactionEvent
from precis.stores.samples import Sample

SVG = "{http://www.w3.org/2000/svg}"


def sample(turn: int, kind: str = "append", version: int = 0, **parts: int) -> Sample:
    return Sample(kind, f"t{turn}", 3, 1000, reserved=100, turn=turn, version=version, **parts)  # type: ignore[arg-type]


def event(trigger: str, before: int, after: int) -> CompactionEvent:
    stats = {
        "context_tokens_before": before,
        "context_tokens_after": after,
        "context_window": 1000,
        "threshold": 800,
    }
    return CompactionEvent(trigger, "sliding_window", stats, "s", "now")


SAMPLES = [
    sample(1, system=200, messages=300),
    sample(2, system=200, messages=500, tool_outputs=200),
    sample(3, "compaction", 1, system=200, summary=150, messages=100),
    sample(4, "append", 1, system=200, summary=150, messages=400),
    sample(5, "compaction", 2, system=200, summary=160, messages=90),
]
EVENTS = [event("context_window_limit", 900, 450), event("manual", 750, 450)]


def test_a_marker_per_event_at_its_compaction_turn() -> None:
    data = chart_data(SAMPLES, EVENTS)
    assert [(m["event"], m["turn"], m["trigger"]) for m in data["markers"]] == [
        (0, 3, "context_window_limit"),
        (1, 5, "manual"),
    ]
    assert [m["color"] for m in data["markers"]] == ["#dc2626", "#111827"]
    # An event without its sample sits at the first turn after it, else at the last.
    early = chart_data(SAMPLES[3:], [*EVENTS, event("manual", 1, 1)])["markers"]
    assert [m["turn"] for m in early] == [4, 5, 5]
    for row in data["samples"]:
        assert sum(row["parts"].values()) == row["total"]
        assert row["total"] + row["reserved"] + row["free"] == 1000


def test_the_drawing_stacks_the_parts_and_links_each_marker() -> None:
    data = chart_data(SAMPLES, EVENTS)
    chart = composition_chart(data, title="c <b>", href=lambda i: f"/ui/c/c/compactions/{i + 1}")
    root = ElementTree.fromstring(render(chart, element_id="composition"))
    assert root.get("id") == "composition"
    bands = [p.get("class") for p in root.iter(f"{SVG}path") if "part" in (p.get("class") or "")]
    assert bands == [
        "part part-free",
        "part part-reserved",
        "part part-tool_outputs",
        "part part-messages",
        "part part-summary",
        "part part-system",
    ]  # each down to the axis, the highest first; tools and pinned are zero: not drawn
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == ["/ui/c/c/compactions/1", "/ui/c/c/compactions/2"]
    hovers = [t.text or "" for r in root.iter(f"{SVG}rect") for t in r.iter(f"{SVG}title")]
    assert len(hovers) == len(SAMPLES)
    assert hovers[1].startswith("turn 2 (append): 900 of 1,000 tokens")
    assert "tool outputs: 200" in hovers[1]
    assert root.find(f"{SVG}title") is not None and root.find(f"{SVG}title").text == "c <b>"  # type: ignore[union-attr]
    guides = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "window 1,000" in guides and "compacts above 800" in guides


def test_text_from_the_store_is_escaped() -> None:
    hostile = CompactionEvent('<script>alert("x")</script>', "all", {}, "s", "now")
    drawn = render(composition_chart(chart_data(SAMPLES[:3], [hostile]), title="t"))
    assert "<script>" not in drawn and "&lt;script&gt;" in drawn
    ElementTree.fromstring(drawn)


def test_one_turn_no_window_and_the_panel_document() -> None:
    single = [Sample("append", "t", 1, None, messages=40, turn=1)]
    data = chart_data(single, [])
    root = ElementTree.fromstring(render(composition_chart(data, title="one")))
    assert [p.get("class") for p in root.iter(f"{SVG}path")] == ["part part-messages"]
    both = document([composition_chart(data, title="a"), composition_chart(data, title="b")])
    whole = ElementTree.fromstring(both.split("\n", 1)[1])
    assert whole.get("height") == str(340 * 2 + 12)
    assert len(whole.findall(f"{SVG}g/{SVG}svg")) == 2


def test_numbers_and_the_fullness_bar() -> None:
    assert [nice_ceiling(v) for v in (0, 3, 420, 1001, 2600)] == [1, 5, 500, 2000, 5000]
    assert [short_number(v) for v in (999, 1200, 2000, 2_500_000)] == ["999", "1.2k", "2k", "2.5M"]
    bar = fullness_bar(SAMPLES[1])
    assert "900 of 1k (90%)" in bar and bar.count("<rect") == 1 + 3
    assert "no sample yet" in fullness_bar(None)


def test_the_conversations_own_window_and_one_convention() -> None:
    data = chart_data(SAMPLES, EVENTS)
    assert (data["window"], data["threshold"]) == (1000, 800)
    # Markers count as the chart does: the samples' totals, the system prompt included.
    assert [(m["tokens_before"], m["tokens_after"]) for m in data["markers"]] == [
        (900, 450),
        (750, 450),
    ]
    # A watermark recorded at another window than the latest sample's is not drawn.
    other = [
        CompactionEvent("manual", "all", {"context_window": 9000, "threshold": 7000}, "s", "t")
    ]
    assert chart_data(SAMPLES[:3], other)["threshold"] is None


def test_a_compaction_is_a_step_and_dense_markers_cluster() -> None:
    data = chart_data(SAMPLES, EVENTS)
    chart = composition_chart(data, title="t")
    # The compaction at turn 3 is drawn at turn 2's x: a vertical drop, not a slope.
    assert list(chart.xs) == [1, 2, 2, 4, 4]
    many = [
        sample(i, "compaction" if i % 2 else "append", i // 2, messages=i) for i in range(1, 4001)
    ]
    events = [event("manual", 10, 5) for _ in range(2000)]
    big = chart_data(many, events)
    assert big["turns"] == 4000 and len(big["samples"]) <= 2000
    # The lowest and the highest of each stretch are kept: the extremes survive.
    totals = [s["total"] for s in big["samples"]]
    assert min(totals) == 1 and max(totals) == 4000
    drawn = render(composition_chart(big, title="t", href=lambda i: f"/c/{i}"))
    root = ElementTree.fromstring(drawn)
    links = list(root.iter(f"{SVG}a"))
    assert 1 < len(links) < 60  # one marker per finger's width, not 2,000
    assert sum(int(a.get("data-count") or 0) for a in links) == 2000
    assert len(drawn) < 150_000
