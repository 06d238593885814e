"""A model server that fails: one line naming it and what went wrong. A failed chat turn writes
nothing; a failed summary is replaced by the extractive brief, and the compaction says why.

The upstream is a real HTTP server on 127.0.0.1 that answers 500, answers 200 with a body that
is not JSON, holds its answer past the summary timeout, or is not there at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from run_cli import run_precis

from precis.core.errors import ModelError, UpstreamError
from precis.core.messages import Message
from precis.engine.settings import CompactionSettings
from precis.providers.openai import API_KEY_VARIABLES, OpenAIProvider
from precis.server import create_app
from precis.stores.sqlite import SQLiteStore
from precis.summarize.base import SummaryRequest
from precis.summarize.llm import LLMSummarizer

# Events a test waits on: set when a request reaches the slow model.
ARRIVALS: list[threading.Event] = []
TURNS = [
    "Our staging database listens on port 5433; never use 5432.",
    "Review the release checklist for the payments service and list what is missing.",
] * 6


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """Answers by path: /error (500), /garbage (200, not JSON), /html (200, a text/html page),
    /slow (held until the end)."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if self.path.startswith("/slow"):
                for arrived in ARRIVALS:
                    arrived.set()
                release.wait(timeout=30)
            if self.path.startswith("/error"):
                status, body = 500, json.dumps({"error": {"message": "the GPU caught fire"}})
            else:
                status, body = 200, "<html>surprise</html>"
            data = body.encode()
            kind = (
                "text/html; charset=utf-8" if self.path.startswith("/html") else "application/json"
            )
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _urls(upstream: str) -> dict[str, tuple[str, str]]:
    """Each failure: the base URL to use and what the one line must say."""
    return {
        "500": (f"{upstream}/error/v1", "HTTP 500: the GPU caught fire"),
        "garbage": (f"{upstream}/garbage/v1", "unusable answer"),
        "html": (f"{upstream}/html/v1", "HTTP 200: answered with text/html, not JSON"),
        "slow": (f"{upstream}/slow/v1", "no answer within 0.5s"),
        "refused": (f"http://127.0.0.1:{_closed_port()}/v1", "cannot connect"),
    }


def _dump(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


@pytest.mark.parametrize("failure", ["500", "garbage", "html", "slow", "refused"])
def test_the_cli_falls_back_and_says_which_upstream_failed_and_how(
    upstream: str, failure: str, tmp_path: Path
) -> None:
    """The compaction is made by the extractive brief; the line says what failed, and how."""
    base_url, expected = _urls(upstream)[failure]
    home = tmp_path / "home"
    for text in TURNS:
        run_precis(home, "chat", "-p", text)
    history = json.loads(run_precis(home, "history", "--json").stdout)
    options = ["--summarizer", "llm", "--provider", "openai", "--model", "m"]
    result = run_precis(
        home,
        *options,
        "--base-url",
        base_url,
        "compact",
        # Only the held answer may run out of time (the bound counts the SDK's own retries).
        env={"PRECIS_SUMMARY_TIMEOUT": "0.5" if failure == "slow" else "30"},
    )
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("⇣ compacted (manual)")]
    # A held answer is cut off by precis's own bound on the summary, which names the summarizer.
    who = "summarizer 'llm'" if failure == "slow" else f"model 'm' at {base_url}"
    assert f"; the summarizer failed ({who}" in line and expected in line
    assert line.endswith("): the extractive brief stood in")
    stats = json.loads(result.stdout.splitlines()[0])
    assert stats["fallback"] == "extractive" and expected in stats["fallback_reason"]
    after = json.loads(run_precis(home, "history", "--json").stdout)
    assert after[: len(history)] == history and len(after) == len(history) + 1


@pytest.mark.parametrize("failure", ["500", "garbage", "html", "slow"])
def test_the_service_falls_back_and_names_the_failure(
    upstream: str, failure: str, tmp_path: Path
) -> None:
    base_url, expected = _urls(upstream)[failure]
    store = SQLiteStore(tmp_path / "precis.db")
    app = create_app(
        store,
        # Only the held answer may run out of time; the others fail fast (with one SDK retry).
        settings=CompactionSettings(
            context_window=2000, summary_timeout=0.5 if failure == "slow" else 30.0
        ),
        summarizer_factory=lambda: LLMSummarizer(OpenAIProvider("m", base_url=base_url)),
    )
    with TestClient(app) as client:
        client.post("/v1/conversations", json={"id": "c"})
        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t}
            for i, t in enumerate(TURNS)
        ]
        client.post("/v1/conversations/c/messages", json={"messages": messages})
        answer = client.post("/v1/conversations/c/compact", json={})
        assert answer.status_code == 200, answer.text
        stats = answer.json()["stats"]
        assert stats["fallback"] == "extractive" and expected in stats["fallback_reason"]
    (event,) = store.events("c")
    assert event.stats["fallback_reason"] == stats["fallback_reason"]
    assert len(store.history("c")) == len(TURNS) + 1


@pytest.mark.parametrize("failure", ["500", "html", "refused"])
def test_a_failed_chat_turn_writes_nothing(upstream: str, failure: str, tmp_path: Path) -> None:
    base_url, expected = _urls(upstream)[failure]
    home = tmp_path / "home"
    run_precis(home, "chat", "-p", TURNS[0])
    history = run_precis(home, "history", "--json").stdout
    for _ in range(3):  # retrying a failed turn must not grow the history either
        result = run_precis(
            home,
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            base_url,
            "chat",
            "-p",
            "and the port again?",
            check=False,
        )
        assert result.returncode == 1 and expected in result.stderr
    assert run_precis(home, "history", "--json").stdout == history


def test_ctrl_c_during_a_summary_stops_it_and_writes_nothing(upstream: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for text in TURNS:
        run_precis(home, "chat", "-p", text)
    history = run_precis(home, "history", "--json").stdout
    arrived = threading.Event()
    ARRIVALS.append(arrived)
    command = [
        sys.executable, "-m", "precis.cli", "--summarizer", "llm", "--provider", "openai",
        "--model", "m", "--base-url", f"{upstream}/slow/v1", "compact",
    ]  # fmt: skip
    env = {**os.environ, "PRECIS_HOME": str(home), "PRECIS_SUMMARY_TIMEOUT": "60"}
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert arrived.wait(timeout=60), "the summary request never reached the model"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert err.strip().splitlines() == [
        "precis: interrupted; the store is as it was before this step"
    ]
    assert run_precis(home, "history", "--json").stdout == history


@pytest.mark.parametrize("face", ["sync", "async"])
def test_an_html_answer_is_a_model_error_in_the_library(upstream: str, face: str) -> None:
    summarizer = LLMSummarizer(OpenAIProvider("m", base_url=f"{upstream}/html/v1"))
    request = SummaryRequest(messages=tuple(_as_messages(TURNS)))
    with pytest.raises(UpstreamError) as caught:
        if face == "sync":
            summarizer.summarize(request)
        else:
            asyncio.run(summarizer.asummarize(request))
    assert caught.value.status == 200
    assert str(caught.value) == (
        f"model 'm' at {upstream}/html/v1: HTTP 200: answered with text/html, not JSON"
    )


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_missing_openai_key_is_one_model_error_in_the_library(
    face: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in API_KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    summarizer = LLMSummarizer(OpenAIProvider("m"))
    request = SummaryRequest(messages=tuple(_as_messages(TURNS)))
    with pytest.raises(ModelError, match="no API key") as caught:
        if face == "sync":
            summarizer.summarize(request)
        else:
            asyncio.run(summarizer.asummarize(request))
    assert "OPENAI_API_KEY" in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_openai_key_is_one_line_from_the_console_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    for text in TURNS:
        run_precis(home, "chat", "-p", text)
    history = run_precis(home, "history", "--json").stdout
    for variable in API_KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    options = ["--summarizer", "llm", "--provider", "openai", "--model", "m"]
    no_key = "model 'm' at https://api.openai.com/v1: no API key (set OPENAI_API_KEY"
    chat = run_precis(home, *options, "chat", "-p", "the port?", check=False, subprocess=True)
    assert chat.returncode == 1, chat.stderr
    (line,) = chat.stderr.strip().splitlines()
    assert line.startswith(f"precis: error: {no_key}")
    assert run_precis(home, "history", "--json").stdout == history
    # A compaction falls back to the extractive brief, and says why, in one line.
    compact = run_precis(home, *options, "compact", subprocess=True)
    (line,) = [x for x in compact.stderr.splitlines() if x.startswith("⇣ compacted (manual)")]
    assert no_key in line and line.endswith("): the extractive brief stood in")


def _as_messages(texts: list[str]) -> list[Message]:
    return [
        Message(id=f"m{i}", role="user" if i % 2 == 0 else "assistant", content=text)
        for i, text in enumerate(texts)
    ]
