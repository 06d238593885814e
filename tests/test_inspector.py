"""The inspector under /ui: the JSON behind its chart, its pages, its keys, its live stream, and
`precis inspect` — against real stores and real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from inspector_data import WINDOW, compacted_away_term, long_conversation, messages, replay
from live_server import serving

from precis import CompactionSettings
from precis.server import ServiceLimits, create_app
from precis.server.errors import STORE_FAILED
from precis.server.keys import ApiKeys
from precis.server.ui import POLICY
from precis.server.ui.auth import COOKIE
from precis.server.ui.data import stream_since
from precis.session import Session
from precis.stores import MemoryStore, SQLiteStore
from precis.stores.base import ConversationStore

LIMITS = ServiceLimits(event_poll_seconds=0.05, keepalive_seconds=0.5)
KEY_A = "key-of-team-a-0123456789"
KEY_B = "key-of-team-b-0123456789"
KEYS = ApiKeys.from_pairs(f"team-a={KEY_A},team-b={KEY_B}")
# Ask for a compaction by hand about this often (in messages), besides the automatic ones.
MANUAL_EVERY = 12


def _import_over_http(client: httpx.Client, conversation_id: str) -> list[str]:
    """Post a recorded conversation a message at a time, compacting by hand now and then."""
    items = messages()
    created = client.post(
        "/v1/conversations", json={"id": conversation_id, "system_prompt": items[0]["content"]}
    )
    assert created.status_code == 201, created.text
    base = f"/v1/conversations/{conversation_id}"
    turns: list[str] = []
    due = MANUAL_EVERY
    for i, item in enumerate(items[1:], start=1):
        posted = client.post(f"{base}/messages", json={"messages": [item]})
        assert posted.status_code == 201, posted.text
        turns.append("append")
        answered = i + 1 == len(items) or items[i + 1]["role"] != "tool"
        if i >= due and answered:
            compacted = client.post(f"{base}/compact", json={})
            assert compacted.status_code == 200, compacted.text
            turns.append("compaction")
            due = i + MANUAL_EVERY
    return turns


def test_the_json_behind_the_chart_has_a_sample_per_turn_and_a_marker_per_compaction(
    sql_store: ConversationStore,
) -> None:
    # Compacted by hand only: none behind the appends, so each turn's kind is known.
    settings = CompactionSettings(WINDOW, background_compaction=False)
    app = create_app(sql_store, settings=settings, limits=LIMITS)
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        turns = _import_over_http(client, "airline")
        chart = client.get("/ui/c/airline/chart.json")
        events = client.get("/v1/conversations/airline/events").json()["events"]
    assert chart.status_code == 200
    data = chart.json()
    samples = data["samples"]
    assert turns.count("compaction") >= 4
    # One sample per turn, in order, numbered from 1.
    assert [s["kind"] for s in samples] == turns
    assert [s["turn"] for s in samples] == list(range(1, len(turns) + 1))
    for sample in samples:
        parts = sample["parts"]
        assert list(parts) == data["parts"]
        assert sum(parts.values()) == sample["total"]
        assert parts["system"] > 0  # the long airline policy counts in every turn
        assert sample["window"] == WINDOW
        assert sample["total"] + sample["reserved"] + sample["free"] == max(WINDOW, sample["total"])
    # One marker per compaction event, at the turn its compaction sample records.
    markers = data["markers"]
    assert len(markers) == len(events) == turns.count("compaction")
    compaction_turns = [s["turn"] for s in samples if s["kind"] == "compaction"]
    assert [m["turn"] for m in markers] == compaction_turns
    assert [m["trigger"] for m in markers] == [e["trigger"] for e in events]
    assert {m["trigger"] for m in markers} == {"manual"}
    # One convention: the markers count as the chart does, the system prompt included.
    assert "system prompt" in data["convention"]
    by_turn = {s["turn"]: s for s in samples}
    floors = [
        by_turn[m["turn"]]["parts"]["system"] + by_turn[m["turn"]]["parts"]["tools"]
        for m in markers
    ]
    assert [m["tokens_after"] for m in markers] == [by_turn[m["turn"]]["total"] for m in markers]
    assert [m["tokens_after"] for m in markers] == [
        e["stats"]["context_tokens_after"] + floor for e, floor in zip(events, floors, strict=True)
    ]
    assert [m["tokens_before"] for m in markers] == [
        by_turn[m["turn"] - 1]["total"] for m in markers
    ]
    # The conversation's own window and watermarks, as its compactions recorded them.
    assert data["window"] == WINDOW
    assert (
        data["threshold"]
        == events[-1]["stats"]["threshold"]
        == CompactionSettings(WINDOW).threshold
    )
    for turn in compaction_turns:
        assert samples[turn - 1]["total"] < samples[turn - 2]["total"]
        assert samples[turn - 1]["parts"]["summary"] > 0
    assert data["threshold"] == CompactionSettings(WINDOW).threshold


@pytest.fixture
def replayed(tmp_path: Path) -> Iterator[tuple[TestClient, ConversationStore, list[str]]]:
    store = SQLiteStore(tmp_path / "precis.db")
    turns = replay(store, "airline", manual_every=25)
    app = create_app(store, settings=CompactionSettings(WINDOW), limits=LIMITS)
    with TestClient(app) as client:
        yield client, store, turns
    store.close()


def test_the_pages_show_the_chart_the_context_and_every_compaction(
    replayed: tuple[TestClient, ConversationStore, list[str]],
) -> None:
    client, store, turns = replayed
    listing = client.get("/ui/")
    assert listing.status_code == 200 and 'href="/ui/c/airline"' in listing.text
    assert f"{store.count('airline'):,}" in listing.text and 'class="bar"' in listing.text

    page = client.get("/ui/c/airline")
    assert page.status_code == 200
    events = store.events("airline")
    triggers = {e.trigger for e in events}
    assert {"manual", "context_window_limit"} <= triggers  # replayed like an agent, and by hand
    wide = page.text[page.text.index('id="composition"') :]
    wide = wide[: wide.index("</svg>")]
    found = re.findall(r'<a class="marker" href="[^"]+" data-key="(\d+)" data-count="(\d+)"', wide)
    # Every compaction has a marker; markers closer than a tap target are drawn as one.
    assert sum(int(count) for _, count in found) == len(events)
    starts = [0]
    for _, count in found[:-1]:
        starts.append(starts[-1] + int(count))
    assert [int(key) for key, _ in found] == starts
    assert f'data-turns="{len(turns)}"' in page.text
    # The context as the model sees it: every message in context, each with kind and tokens.
    context = store.context("airline").messages
    assert page.text.count('<article class="msg') == len(context) + 1  # and the system prompt
    assert "summary</span>" in page.text and "tokens</span>" in page.text
    # The window part by part, as the chart counts it, coloured by how near the threshold it is.
    latest = store.latest_sample("airline")
    assert latest is not None and 'id="parts"' in page.text
    level = "ok" if latest.total < 0.8 * (CompactionSettings(WINDOW).threshold or 0) else "warn"
    assert f'level-{level}" id="context-total"' in page.text
    assert f"{latest.total:,} tokens of {WINDOW:,}" in page.text

    markers = client.get("/ui/c/airline/chart.json").json()["markers"]
    for number, event in enumerate(events, start=1):
        detail = client.get(f"/ui/c/airline/compactions/{number}")
        assert detail.status_code == 200
        trigger = f'<dd class="trigger-{event.trigger}" id="trigger">{event.trigger}</dd>'
        assert trigger in detail.text
        assert f'<dd id="mode">{event.mode}</dd>' in detail.text
        # The same figures as the chart and its list: the system prompt counted.
        before, after = markers[number - 1]["tokens_before"], markers[number - 1]["tokens_after"]
        assert f'<dd id="tokens">{before:,} → {after:,} (window {WINDOW:,}' in detail.text
        assert 'id="ledger"' in detail.text
        assert ('id="prev"' in detail.text) == (number > 1)
        assert ('id="next"' in detail.text) == (number < len(events))
        if number > 1:  # the summary against the one before
            assert 'id="diff"' in detail.text or "The same summary as before" in detail.text
        originals = re.findall(r'href="/ui/c/airline/m/([^"]+)">original', detail.text)
        assert event.summary_id in originals
        (summary,) = store.get("airline", [event.summary_id])
        tail = summary.metadata["audit"]["kept"]  # the tail kept beside the summary, shown too
        assert all(f"/m/{i}" in detail.text for i in tail)
        assert len(originals) == 1 + event.stats["summarized"] + len(tail)
    # A summarized original opens whole, marked as compacted away.
    gone = [m for m in store.history("airline") if m.id not in {c.id for c in context}]
    opened = client.get(f"/ui/c/airline/m/{gone[0].id}")
    assert opened.status_code == 200 and "compacted away" in opened.text
    assert client.get("/ui/c/airline/compactions/99").status_code == 404
    assert client.get("/ui/c/nobody").status_code == 404
    assert "<h1>Not found</h1>" in client.get("/ui/c/nobody").text


def test_recall_finds_a_compacted_away_original_and_links_into_history(
    replayed: tuple[TestClient, ConversationStore, list[str]],
) -> None:
    client, store, _ = replayed
    word, message_id = compacted_away_term(store, "airline")
    found = client.get("/ui/c/airline/recall", params={"q": word})
    assert found.status_code == 200
    (link,) = re.findall(r'href="(/ui/c/airline/history\?at=\d+#m-[^"]+)"', found.text)
    assert link.endswith(f"#m-{message_id}")
    assert "compacted away</span>" in found.text
    # htmx asks for the hits alone.
    partial = client.get("/ui/c/airline/recall", params={"q": word}, headers={"HX-Request": "1"})
    assert "<html" not in partial.text and link in partial.text.replace("&amp;", "&")
    history = client.get(link.split("#")[0])
    assert f'id="m-{message_id}"' in history.text and 'class="hit"' in history.text
    assert "Nothing matches" in client.get("/ui/c/airline/recall", params={"q": "zqxjv"}).text


def test_pages_run_only_the_packages_own_scripts(
    replayed: tuple[TestClient, ConversationStore, list[str]],
) -> None:
    client, _, _ = replayed
    for path in ("/ui/", "/ui/c/airline", "/ui/c/airline/compactions/1", "/ui/c/airline/recall"):
        page = client.get(path)
        assert page.headers["content-security-policy"] == POLICY
        assert page.headers["x-frame-options"] == "DENY"
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page.text, re.S)
        assert scripts and all(body.strip() == "" for _, body in scripts)
        sources = [re.search(r'src="([^"]+)"', attrs) for attrs, _ in scripts]
        assert all(s and s.group(1).startswith("/ui/static/") for s in sources), path
        assert "http://" not in page.text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in page.text
        for source in sources:
            assert source is not None
            served = client.get(source.group(1))
            assert served.status_code == 200 and len(served.content) > 200
    htmx = client.get("/ui/static/htmx.min.js").text
    assert "4.0.1" in htmx  # the vendored version VENDORED.txt names


@pytest.fixture
def keyed() -> Iterator[tuple[TestClient, MemoryStore]]:
    store = MemoryStore()
    for stored in ("team-a/plan", "team-b/secret"):
        store.append(stored, [])
        store.create(stored)
    app = create_app(store, settings=CompactionSettings(WINDOW), api_keys=KEYS, limits=LIMITS)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, store


def _log_in(client: TestClient, key: str, target: str = "/ui/") -> httpx.Response:
    return client.post(
        "/ui/login",
        content=f"key={key}&next={target}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )


def test_with_keys_the_page_asks_once_and_a_tenant_sees_only_its_own(
    keyed: tuple[TestClient, MemoryStore],
) -> None:
    client, _ = keyed
    asked = client.get("/ui/c/plan", follow_redirects=False)
    assert asked.status_code == 303 and asked.headers["location"] == "/ui/login?next=/ui/c/plan"
    assert 'type="password"' in client.get("/ui/login").text
    refused = client.get("/ui/c/plan/chart.json")
    assert refused.status_code == 401 and "/ui/login" in refused.json()["detail"]
    assert client.get("/ui/c/plan/stream").status_code == 401
    wrong = _log_in(client, "key-of-nobody-0123456789")
    assert wrong.status_code == 401 and "not one this service accepts" in wrong.text
    assert COOKIE not in client.cookies

    done = _log_in(client, KEY_A, "/ui/c/plan")
    assert done.status_code == 303 and done.headers["location"] == "/ui/c/plan"
    cookie = done.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert KEY_A not in cookie  # a session token, not the key
    assert client.get("/ui/c/plan").status_code == 200
    listing = client.get("/ui/").text
    assert "/ui/c/plan" in listing and "secret" not in listing
    assert client.get("/ui/c/secret").status_code == 404  # team-b's, as the API answers
    assert client.get("/ui/c/secret/chart.json").status_code == 404
    # An API client may read the JSON with its bearer key instead.
    bearer = {"Authorization": f"Bearer {KEY_B}"}
    client.cookies.clear()
    assert client.get("/ui/c/secret/chart.json", headers=bearer).status_code == 200
    assert client.get("/ui/c/plan/chart.json", headers=bearer).status_code == 404


def test_logging_in_refuses_other_sites_and_logging_out_ends_the_session(
    keyed: tuple[TestClient, MemoryStore],
) -> None:
    client, _ = keyed
    elsewhere = client.post(
        "/ui/login",
        content=f"key={KEY_A}",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "https://evil.example",
        },
    )
    assert elsewhere.status_code == 403 and COOKIE not in client.cookies
    # A page sent with no-referrer shows up as Origin "null": refused too, and our pages send
    # their origin (same-origin referrer policy) so the login form itself is never refused.
    hidden = client.post(
        "/ui/login",
        content=f"key={KEY_A}",
        headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": "null"},
    )
    assert hidden.status_code == 403
    assert client.get("/ui/login").headers["referrer-policy"] == "same-origin"
    same = client.post(
        "/ui/login",
        content=f"key={KEY_A}",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "http://127.0.0.1",
        },
        follow_redirects=False,
    )
    assert same.status_code == 303
    away = _log_in(client, KEY_A, "https://evil.example/ui/")
    assert away.headers["location"] == "/ui/"
    token = client.cookies[COOKIE]
    assert client.get("/ui/c/plan").status_code == 200
    out = client.post("/ui/logout", follow_redirects=False)
    assert out.status_code == 303
    client.cookies.set(COOKIE, token, path="/ui")  # the old token no longer opens anything
    assert client.get("/ui/c/plan", follow_redirects=False).status_code == 303


def test_without_keys_every_page_is_open_on_loopback() -> None:
    app = create_app(MemoryStore(), settings=CompactionSettings(WINDOW))
    with TestClient(app) as client:
        assert client.get("/ui/login", follow_redirects=False).headers["location"] == "/ui/"
        assert "No conversations yet" in client.get("/ui/").text
        assert client.get("/ui", follow_redirects=False).status_code == 308


def test_the_page_updates_live_from_the_event_stream(tmp_path: Path) -> None:
    """The stream sleeps until a write: with an hour between its looks, only the write's signal
    can wake it (a stream that polled or missed it would hang past the client's timeout)."""
    store = SQLiteStore(tmp_path / "precis.db")
    hourly = ServiceLimits(event_poll_seconds=3600, keepalive_seconds=3600)
    app = create_app(store, settings=CompactionSettings(2000), limits=hourly)
    turns = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: " + "w" * 400}
        for n in range(16)
    ]
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        client.post("/v1/conversations", json={"id": "live"})
        with client.stream("GET", "/ui/c/live/stream") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            posted = client.post("/v1/conversations/live/messages", json={"messages": turns})
            assert posted.status_code == 201
            # What changed, once: the new sample as the chart's JSON, then `now`.
            event, body = _next_event(lines)
            assert event == "turn" and json.loads(body)["turn"] == 1
            assert _next_event(lines) == ("now", "1")
            assert client.post("/v1/conversations/live/compact", json={}).status_code == 200
            event, body = _next_event(lines)
            marker = json.loads(body)
            assert event == "compaction" and (marker["event"], marker["turn"]) == (0, 2)
            event, body = _next_event(lines)
            sample = json.loads(body)
            assert event == "turn" and (sample["turn"], sample["kind"]) == (2, "compaction")
            assert marker["tokens_after"] == sample["total"]
            assert _next_event(lines) == ("now", "2")
    store.close()


def _rest(lines: Iterator[str]) -> list[str]:
    """The lines a stream sends until it ends (it must end: the client's timeout fails it),
    without the keepalive pings the server's ping task may still write up to the close."""
    kept: list[str] = []
    for line in lines:
        if line.startswith(": ping") or (line == "" and (not kept or kept[-1] == "")):
            continue
        kept.append(line)
    return kept


def test_a_stream_whose_store_fails_says_so_and_ends_and_the_service_answers(
    tmp_path: Path,
) -> None:
    """The samples table taken away under a open stream (a real failure of the real file): at
    its next keepalive the stream reads its cursor, says the store failed without the store's
    own words, and ends; the service goes on answering, and once the table is back a new
    stream follows the conversation again."""
    path = tmp_path / "precis.db"
    store = SQLiteStore(path)
    often = ServiceLimits(event_poll_seconds=3600, keepalive_seconds=0.01)
    app = create_app(store, settings=CompactionSettings(2000), limits=often)
    line = [{"role": "user", "content": "hello"}]
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        for cid in ("live", "other"):
            assert client.post("/v1/conversations", json={"id": cid}).status_code == 201
            posted = client.post(f"/v1/conversations/{cid}/messages", json={"messages": line})
            assert posted.status_code == 201
        with client.stream("GET", "/ui/c/live/stream") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            with sqlite3.connect(path) as other:
                other.execute("ALTER TABLE samples RENAME TO samples_away")
            rest = _rest(lines)
        assert rest[-3:] == ["event: failed", f"data: {STORE_FAILED}", ""]
        assert str(path) not in "\n".join(rest) and "samples" not in "\n".join(rest)
        assert app.state.service.streams.open == 0 and app.state.service.changes.watching == 0
        # The service is up: the API answers what does not need the table, health too.
        history = client.get("/v1/conversations/other/history")
        assert history.status_code == 200 and history.json()["messages"][0]["content"] == "hello"
        assert client.get("/healthz").status_code == 200
        # A stream opened meanwhile says the same and ends (the browser retries it later).
        failed = client.get("/ui/c/other/stream")
        assert failed.status_code == 200
        assert _rest(iter(failed.text.splitlines()))[-3:] == [
            "event: failed",
            f"data: {STORE_FAILED}",
            "",
        ]
        with sqlite3.connect(path) as other:
            other.execute("ALTER TABLE samples_away RENAME TO samples")
        with client.stream("GET", "/ui/c/live/stream") as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            posted = client.post("/v1/conversations/live/messages", json={"messages": line})
            assert posted.status_code == 201
            event, body = _next_event(lines)
            assert event == "turn" and json.loads(body)["turn"] == 2
    store.close()


def test_two_tenants_streams_on_one_name_each_get_their_own_changes_only(tmp_path: Path) -> None:
    """Two tenants, each with a conversation named "plan", each with a stream open on it, their
    writes interleaved: a write wakes both streams (they watch a name), but each sends only its
    own conversation's turns and compactions, in order, none twice."""
    store = SQLiteStore(tmp_path / "precis.db")
    hourly = ServiceLimits(event_poll_seconds=3600, keepalive_seconds=3600)
    app = create_app(store, settings=CompactionSettings(2000), api_keys=KEYS, limits=hourly)

    def say(n: int, team: str) -> dict[str, Any]:
        role = "user" if n % 2 == 0 else "assistant"
        return {"messages": [{"role": role, "content": f"{team} says {n} " + "w" * 300}]}

    with (
        serving(app) as url,
        httpx.Client(base_url=url, timeout=30, headers=_bearer(KEY_A)) as a,
        httpx.Client(base_url=url, timeout=30, headers=_bearer(KEY_B)) as b,
    ):
        for client, team, ahead in ((a, "a", 5), (b, "b", 0)):
            assert client.post("/v1/conversations", json={"id": "plan"}).status_code == 201
            for n in range(ahead):  # team a's turns run five ahead of team b's
                posted = client.post("/v1/conversations/plan/messages", json=say(n, team))
                assert posted.status_code == 201
        with a.stream("GET", "/ui/c/plan/stream") as sa, b.stream("GET", "/ui/c/plan/stream") as sb:
            la, lb = sa.iter_lines(), sb.iter_lines()
            assert next(la) == next(lb) == ": stream open"
            a_turn = 5
            for n in range(1, 7):
                # Both written before either stream is read: each must pick its own out.
                assert (
                    a.post("/v1/conversations/plan/messages", json=say(n, "a")).status_code == 201
                )
                assert (
                    b.post("/v1/conversations/plan/messages", json=say(n, "b")).status_code == 201
                )
                a_turn += 1
                for lines, turn in ((la, a_turn), (lb, n)):
                    event, body = _next_event(lines)
                    assert (event, json.loads(body)["turn"]) == ("turn", turn)
                    assert _next_event(lines) == ("now", str(turn))
                if n % 3 == 0:  # team a compacts by hand now and then; team b never
                    compacted = a.post("/v1/conversations/plan/compact", json={})
                    assert compacted.status_code == 200 and compacted.json()["compacted"]
                    a_turn += 1
                    event, body = _next_event(la)
                    marker = json.loads(body)
                    assert event == "compaction" and marker["turn"] == a_turn
                    event, body = _next_event(la)
                    assert event == "turn" and json.loads(body)["kind"] == "compaction"
                    assert _next_event(la) == ("now", str(a_turn))
            # Team b's stream had nothing of team a's to send: its next event is its own turn.
            assert b.post("/v1/conversations/plan/messages", json=say(7, "b")).status_code == 201
            event, body = _next_event(lb)
            assert (event, json.loads(body)["turn"]) == ("turn", 7)
            assert store.latest_sample("team-a/plan").turn == a_turn == 5 + 6 + 2
            assert len(store.events("team-b/plan")) == 0 and len(store.events("team-a/plan")) == 2
    store.close()


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


# The store reads a live stream may make.
STREAM_READS = ("latest_sample", "samples", "events", "context", "marker_rows", "compaction_count")


class CountingStore(SQLiteStore):
    """A real SQLite store that notes each read a stream makes, and says when it made `due`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: list[str] = []
        self.due = 0
        self.done = threading.Event()

    def noted(self, name: str) -> None:
        self.reads.append(name)
        if len(self.reads) >= self.due:
            self.done.set()

    def expect(self, count: int) -> None:
        self.reads, self.due = [], count
        self.done.clear()


def _counting(name: str) -> Any:
    def read(self: CountingStore, *args: Any, **kwargs: Any) -> Any:
        self.noted(name)
        return getattr(SQLiteStore, name)(self, *args, **kwargs)

    return read


for _name in STREAM_READS:
    setattr(CountingStore, _name, _counting(_name))


def test_an_idle_stream_reads_nothing_and_a_turn_sends_only_what_changed(tmp_path: Path) -> None:
    """The stream generator driven directly, with no write happening: parked on its change
    future it makes no store read however many other conversations are signalled; a write sends
    the new sample alone, read from the page's cursor on."""
    from precis.server.deps import Conversation
    from precis.server.ui.pages import _turns
    from precis.stores.samples import Sample

    store = CountingStore(tmp_path / "precis.db")
    long_conversation(store, "long", turns=300)
    hourly = ServiceLimits(event_poll_seconds=3600, keepalive_seconds=3600)
    service = create_app(store, settings=CompactionSettings(4000), limits=hourly).state.service

    async def drive() -> None:
        stream = _turns(service, Conversation("long", None), 600, 300)
        store.expect(2)  # the catch-up after connecting: rows after the cursor (none)
        opened = await anext(stream)
        assert opened.comment == "stream open"
        waiting = asyncio.ensure_future(anext(stream))
        assert await anyio.to_thread.run_sync(store.done.wait, 60)
        assert sorted(store.reads) == ["marker_rows", "samples"]
        store.expect(1)
        for n in range(200):  # writes elsewhere wake other streams, not this one
            service.changes.signal(f"other-{n}")
            await asyncio.sleep(0)
        assert not waiting.done() and store.reads == []
        store.add_sample("long", Sample("append", "t", 3, 4000, 0, 40, 0, 0, 300, 900))
        store.expect(2)
        service.changes.signal("long")
        sent = await waiting
        assert sent.event == "turn" and json.loads(sent.data)["turn"] == 601
        assert sorted(store.reads) == ["marker_rows", "samples"]
        assert (await anext(stream)).event == "now"
        await stream.aclose()

    asyncio.run(drive())
    store.close()


def test_at_a_keepalive_the_stream_reads_its_cursor_alone(tmp_path: Path) -> None:
    """With no signal (another process may write), each keepalive reads where the
    conversation is (two index reads), and no row."""
    from precis.server.deps import Conversation
    from precis.server.ui.pages import _turns

    store = CountingStore(tmp_path / "precis.db")
    long_conversation(store, "long", turns=300)
    often = ServiceLimits(event_poll_seconds=3600, keepalive_seconds=0.001)
    service = create_app(store, settings=CompactionSettings(4000), limits=often).state.service

    async def drive() -> None:
        stream = _turns(service, Conversation("long", None), 600, 300)
        assert (await anext(stream)).comment == "stream open"
        assert (await anext(stream)).comment == "idle"
        for _ in range(5):
            store.expect(0)
            assert (await anext(stream)).comment == "idle"
            assert sorted(store.reads) == ["compaction_count", "latest_sample"]
        await stream.aclose()

    asyncio.run(drive())
    store.close()


def _next_event(lines: Iterator[str]) -> tuple[str, str]:
    event = data = ""
    for line in lines:
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
        elif not line and event:
            return event, data
    raise AssertionError("the stream ended")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _inspect(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PRECIS_")}
    full |= {"PRECIS_HOME": str(home), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "precis.cli", "-c", "airline", "inspect", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
    )


def test_precis_inspect_serves_on_loopback_and_prints_the_url(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with SQLiteStore(home / "precis.db") as store:
        replay(store, "airline", manual_every=30)
    process = _inspect(home, "--port", "0")
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        match = re.fullmatch(r"precis inspector: (http://127\.0\.0\.1:\d+/ui/c/airline)", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")
        page = httpx.get(match.group(1), timeout=30)
        assert page.status_code == 200 and 'id="composition"' in page.text
    finally:
        process.terminate()
        process.wait(30)
    taken = _free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        busy = _inspect(home, "--port", str(taken))
        _, err = busy.communicate(timeout=60)
    assert busy.returncode == 1
    (last,) = err.strip().splitlines()[-1:]
    assert f"port {taken}" in last and "in use" in last and "--port" in last


def test_precis_inspect_with_a_key_says_the_page_asks_for_it(tmp_path: Path) -> None:
    env: dict[str, Any] = {"PRECIS_API_KEY": KEY_A}
    process = _inspect(tmp_path / "home", "--port", "0", env=env)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip().rsplit(" ", 1)[-1]
        assert url.endswith("/ui/")  # no conversation yet: the list
        assert "asks for an API key" in process.stdout.readline()
        asked = httpx.get(url, follow_redirects=False, timeout=30)
        assert asked.status_code == 303 and asked.headers["location"].startswith("/ui/login")
    finally:
        process.terminate()
        process.wait(30)


def test_logout_and_login_refuse_other_sites_and_guessing(
    keyed: tuple[TestClient, MemoryStore],
) -> None:
    from precis.server.ui.auth import MAX_WRONG

    client, _ = keyed
    elsewhere = {"origin": "https://evil.example"}
    assert client.post("/ui/logout", headers=elsewhere).status_code == 403
    assert client.post("/ui/logout", headers={"sec-fetch-site": "cross-site"}).status_code == 403
    for _ in range(MAX_WRONG):
        assert client.post("/ui/login", data={"key": "wrong"}).status_code == 401
    refused = client.post("/ui/login", data={"key": KEY_A})
    assert refused.status_code == 429  # even the right key, until the minute is over
    # A part the page fetches answers JSON, not a page, when it is not there; pages are gzipped.
    missing = client.get("/ui/c/nobody/chart.json", headers={"authorization": f"Bearer {KEY_A}"})
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
    page = client.get("/ui/c/plan", headers={"authorization": f"Bearer {KEY_A}"})
    assert page.status_code == 200 and page.headers.get("content-encoding") == "gzip"


def test_recall_labels_summaries_marks_terms_and_counts(
    replayed: tuple[TestClient, ConversationStore, list[str]],
) -> None:
    client, store, _ = replayed
    summaries = [m for m in store.history("airline") if m.kind == "summary"]
    originals = " ".join(m.content for m in store.history("airline") if m.kind == "message")
    words = re.findall(r"[A-Za-z]{7,}", summaries[0].metadata["summary"])
    word = next(w for w in words if w in originals)
    found = client.get("/ui/c/airline/recall", params={"q": word}).text
    rows = list(re.finditer(r'<li class="hit-row( hit-summary)?">.*?</li>', found, re.S))
    hits = [row.group(1) or "" for row in rows]
    labels = re.findall(r"#\d+ ([^<]+)</a>", found)
    assert any(h for h in hits) and any(label.endswith("summary") for label in labels)
    assert "user" not in [label for label, h in zip(labels, hits, strict=True) if h]
    shown = "".join(row.group(0) for row in rows if row.group(1))  # the summaries' rows
    assert "{&#34;" not in shown and '{"' not in shown and "\\n" not in shown  # no JSON, no \n
    assert f"<mark>{word}</mark>".lower() in found.lower()
    assert re.search(r'id="hit-count">(\d+ match|The \d+ best)', found)
    # Originals only leaves the summaries out, and says so; originals come first anyway.
    assert [bool(h) for h in hits] == sorted(bool(h) for h in hits)
    only = client.get("/ui/c/airline/recall", params={"q": word, "originals": "true"}).text
    assert "hit-summary" not in only and "originals only" in only


def test_the_conversation_list_comes_in_pages() -> None:
    store = MemoryStore()
    for n in range(60):
        store.create(f"c{n:02d}")
    with TestClient(
        create_app(store, settings=CompactionSettings(WINDOW), limits=LIMITS)
    ) as client:
        first = client.get("/ui/").text
        assert first.count("<tr>") - 1 == 50 and 'id="later"' in first
        second = client.get("/ui/", params={"after": 50}).text
        assert second.count("<tr>") - 1 == 10 and 'id="later"' not in second
        assert "Showing 51–60 of 60" in second


def test_a_compaction_committed_between_the_streams_two_reads_is_sent_with_its_turn(
    tmp_path: Path,
) -> None:
    """The stream reads samples, then markers: when a compaction commits between the two, the
    marker is not sent ahead of its own turn (the samples are read again up to it)."""
    store = SQLiteStore(tmp_path / "precis.db")
    session = Session(store, "c", settings=CompactionSettings(2000))
    for n in range(12):
        role = "user" if n % 2 == 0 else "assistant"
        session.append({"role": role, "content": f"turn {n} " + "w" * 300})
    seen = store.latest_sample("c")
    assert seen is not None
    assert session.compact_result(trigger="manual").compacted
    compacted = store.latest_sample("c")
    assert compacted is not None and compacted.turn > seen.turn
    reads: list[int] = []

    class Late:
        """The store, whose first samples read answers as it stood before the compaction."""

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def samples(self, conversation_id: str, *, since: int = 0) -> Any:
            reads.append(since)
            found = store.samples(conversation_id, since=since)
            return [s for s in found if s.turn <= seen.turn] if len(reads) == 1 else found

    late = Late()
    samples, markers = stream_since(SimpleNamespace(store=late), "c", seen.turn, 0)  # type: ignore[arg-type]
    assert [m["turn"] for m in markers] == [compacted.turn]
    assert [s["turn"] for s in samples] == [compacted.turn] and len(reads) == 2
    store.close()


def test_two_tenants_pages_at_once_each_show_their_own_and_a_failing_store_is_said_plainly(
    tmp_path: Path,
) -> None:
    """Two tenants write to and read their own "plan" at once, compacting now and then: each
    page and chart holds only its own words and markers; with the samples table gone, the page
    says the store failed without the store's words, and the service goes on answering."""
    path = tmp_path / "precis.db"
    store = SQLiteStore(path)
    app = create_app(store, settings=CompactionSettings(2000), api_keys=KEYS)

    def say(n: int, team: str) -> dict[str, Any]:
        role = "user" if n % 2 == 0 else "assistant"
        return {"messages": [{"role": role, "content": f"{team}-says-{n} " + "w" * 200}]}

    def work(url: str, key: str, team: str) -> tuple[str, dict[str, Any]]:
        with httpx.Client(base_url=url, timeout=30, headers=_bearer(key)) as client:
            assert client.post("/v1/conversations", json={"id": "plan"}).status_code == 201
            for n in range(12):
                posted = client.post("/v1/conversations/plan/messages", json=say(n, team))
                assert posted.status_code == 201
                if n % 4 == 3:
                    assert client.post("/v1/conversations/plan/compact", json={}).status_code == 200
                page = client.get("/ui/c/plan")
                assert page.status_code == 200
            chart = client.get("/ui/c/plan/chart.json")
            assert chart.status_code == 200
            return page.text, chart.json()

    with serving(app) as url:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            a, b = pool.map(lambda args: work(url, *args), [(KEY_A, "a"), (KEY_B, "b")])
        for (page, chart), mine, theirs in ((a, "a", "b"), (b, "b", "a")):
            assert f"{mine}-says-11" in page and f"{theirs}-says-" not in page
            count = len(store.events(f"team-{mine}/plan"))
            assert len(chart["markers"]) == chart["compactions"] == count >= 1
        with sqlite3.connect(path) as other:
            other.execute("ALTER TABLE samples RENAME TO samples_away")
        with httpx.Client(base_url=url, timeout=30, headers=_bearer(KEY_A)) as client:
            failed = client.get("/ui/c/plan")
            assert failed.status_code >= 400 and STORE_FAILED in failed.text
            assert "samples" not in failed.text and str(path) not in failed.text
            assert client.get("/v1/conversations/plan/history").status_code == 200
    store.close()
