"""Hostile input at the service and the CLI: a compaction held inside the summarizer leaves the
service answering; nesting past the limit and lone surrogates are refused with one 422 line
before anything is written, and the CLI import refuses them by line."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import serving
from run_cli import run_precis

from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.stores.sqlite import SQLiteStore
from precis.summarize.base import LocalSummarizer, SummaryRequest

# How long a test waits on an event before calling the run broken (a safety net, not a bound).
STUCK_SECONDS = 30


class HeldSummarizer(LocalSummarizer):
    """A local summarizer (pure computation, as the extractive brief is) that stops inside its
    work until the test releases it: a compaction held at a known point."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self.entered = entered
        self.release = release

    @property
    def name(self) -> str:
        return "held"

    def summarize(self, request: SummaryRequest) -> str:
        self.entered.set()
        assert self.release.wait(STUCK_SECONDS), "the test never released the compaction"
        return "Summary: the user asked for the build to be fixed on port 8080."


def _turns(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build, port 8080."}]
    for i in range(n):
        out += [
            {"role": "user", "content": f"Step {i}: run the tests and tell me what failed."},
            {"role": "assistant", "content": f"Step {i}: 3 tests failed in test_api.py."},
        ]
    return out


def test_the_service_answers_while_a_compaction_is_held_inside_its_summarizer(
    tmp_path: Path,
) -> None:
    entered, release = threading.Event(), threading.Event()
    store = SQLiteStore(tmp_path / "precis.db")
    app = create_app(
        store,
        settings=CompactionSettings(context_window=4000),
        summarizer_factory=lambda: HeldSummarizer(entered, release),
    )
    answers: list[httpx.Response] = []
    with serving(app) as url, httpx.Client(base_url=url, timeout=STUCK_SECONDS) as client:
        assert client.post("/v1/conversations", json={"id": "held"}).status_code == 201
        appended = client.post("/v1/conversations/held/messages", json={"messages": _turns(6)})
        assert appended.status_code == 201, appended.text

        def compact() -> None:
            with httpx.Client(base_url=url, timeout=STUCK_SECONDS) as other:
                answers.append(other.post("/v1/conversations/held/compact", json={}))

        compacting = threading.Thread(target=compact)
        compacting.start()
        try:
            assert entered.wait(STUCK_SECONDS), "the compaction never reached the summarizer"
            # The compaction is inside the summarizer now and stays there until released: the
            # service must still answer (on the loop, it could not until the release).
            health = client.get("/healthz")
            assert health.status_code == 200, health.text
            assert not release.is_set() and compacting.is_alive()
            assert client.get("/v1/conversations/held/context").status_code == 200
        finally:
            release.set()
            compacting.join(STUCK_SECONDS)
    store.close()
    assert [a.status_code for a in answers] == [200], [a.text for a in answers]
    assert answers[0].json()["compacted"] is True


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    store = SQLiteStore(tmp_path / "precis.db")
    app = create_app(store, settings=CompactionSettings(context_window=2000))
    with serving(app) as url, httpx.Client(base_url=url, timeout=STUCK_SECONDS) as c:
        assert c.post("/v1/conversations", json={"id": "h"}).status_code == 201
        yield c
    store.close()


def _deep_call(depth: int) -> dict[str, Any]:
    arguments = "[" * depth + "]" * depth
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
        ],
    }


def _post(client: httpx.Client, messages: list[dict[str, Any]]) -> httpx.Response:
    body = json.dumps({"messages": messages}, ensure_ascii=True)  # "\ud800" as JSON writes it
    return client.post(
        "/v1/conversations/h/messages",
        content=body,
        headers={"content-type": "application/json"},
    )


def test_arguments_nested_past_the_limit_answer_422_and_the_conversation_keeps_working(
    client: httpx.Client,
) -> None:
    assert _post(client, [{"role": "user", "content": "go"}]).status_code == 201
    for depth in (65, 1000, 100_000):
        refused = _post(client, [_deep_call(depth), {"role": "tool", "tool_call_id": "c1"}])
        assert refused.status_code == 422, refused.text
        detail = refused.json()["detail"]
        assert "tool_calls[0].function.arguments nested deeper than 64 levels" in str(detail)
    history = client.get("/v1/conversations/h/history").json()
    assert [m["content"] for m in history["messages"]] == ["go"]
    assert _post(client, [_deep_call(64), {"role": "tool", "tool_call_id": "c1", "content": "x"}])
    for path in ("/context", "/prompt"):
        assert client.get("/v1/conversations/h" + path).status_code == 200
    assert client.post("/v1/conversations/h/compact", json={}).status_code == 200


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "a\ud800b"},
        {"role": "user", "content": [{"type": "text", "text": "\udfff"}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "\ud800", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ],
)
def test_a_lone_surrogate_answers_one_422_line_and_nothing_is_written(
    client: httpx.Client, message: dict[str, Any]
) -> None:
    refused = _post(client, [{"role": "user", "content": "fine"}, message])
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert isinstance(detail, str) and len(detail.splitlines()) == 1
    assert "messages[1]: contains a lone surrogate (U+D" in detail
    assert client.get("/v1/conversations/h/history").json()["messages"] == []
    assert _post(client, [{"role": "user", "content": "fine 😀"}]).status_code == 201


def test_the_cli_import_refuses_a_lone_surrogate_and_deep_arguments_by_line(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    for bad_line, reason in (
        (json.dumps({"role": "user", "content": "\ud800"}), "lone surrogate (U+D800)"),
        (json.dumps(_deep_call(1000)), "arguments nested deeper than 64 levels"),
    ):
        dump = tmp_path / "bad.jsonl"
        dump.write_text(
            json.dumps({"role": "user", "content": "first"}) + "\n" + bad_line + "\n",
            encoding="utf-8",
        )
        result = run_precis(home, "-c", "imp", "import", str(dump), check=False)
        assert result.returncode == 1
        assert "line 2" in result.stderr and reason in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        listed = run_precis(home, "-c", "imp", "history", "--json", check=False)
        assert listed.returncode != 0 or json.loads(listed.stdout) == []
