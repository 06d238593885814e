"""A summarizer that fails never stops the agent: it is asked again a bounded number of times,
then the extractive brief stands in, then truncation; the compaction event records which and
why, and the CLI, the service and the inspector show it. Only a context nothing can make fit
raises, and then nothing is written.

The failing summarizers are scripted (these tests are about how precis handles failure), and a
real OpenAI-compatible HTTP server on 127.0.0.1 answers 503 to the model-backed one.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import serving
from run_cli import run_precis

from precis.core.errors import CompactionError, InvalidSetting, UpstreamError
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message, ToolCall
from precis.core.tokens import LettaEstimator
from precis.core.validity import check
from precis.engine.results import CompactionResult, CompactionStats
from precis.engine.settings import CompactionSettings
from precis.providers.mock import MockProvider
from precis.providers.openai import OpenAIProvider
from precis.server import create_app
from precis.session import Agent, AsyncSession, Session
from precis.stores.base import ConversationStore
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import SQLiteStore
from precis.summarize.base import SummaryRequest
from precis.summarize.llm import LLMSummarizer

DOWN = UpstreamError("model 'm' at http://127.0.0.1:1/v1", "the GPU is busy", 503)
RULE = "Never deploy the billing service on Fridays."
WINDOW = 2000


class Scripted:
    """Answers from its script in turn (an exception is raised, anything else returned), then
    "the model's summary"; counts its calls. Not a `LocalSummarizer`: it stands for a model."""

    def __init__(self, *script: object) -> None:
        self.script = list(script)
        self.calls = 0

    @property
    def name(self) -> str:
        return "flaky"

    def summarize(self, request: SummaryRequest) -> Any:
        self.calls += 1
        step = self.script.pop(0) if self.script else "the model's summary"
        if isinstance(step, BaseException):
            raise step
        return step

    async def asummarize(self, request: SummaryRequest) -> Any:
        return self.summarize(request)


class Down(Scripted):
    """Fails every time with the same error."""

    def __init__(self, error: BaseException = DOWN) -> None:
        super().__init__()
        self.error = error

    def summarize(self, request: SummaryRequest) -> Any:
        self.calls += 1
        raise self.error


class Hanging(Scripted):
    """Never answers: only the summary timeout ends a call (a sync one waits for `release`)."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def summarize(self, request: SummaryRequest) -> Any:
        self.calls += 1
        self.release.wait()
        return "too late"

    async def asummarize(self, request: SummaryRequest) -> Any:
        self.calls += 1
        await asyncio.Event().wait()
        return "too late"


def chat(n: int) -> list[Message]:
    """A red line, then `n` turns of ordinary talk: enough that a compaction summarizes some."""
    turns = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "x" * 200)
        for i in range(n)
    ]
    return [Message(role="user", content=RULE), *turns]


def compacted(
    store: ConversationStore,
    summarizer: Any,
    face: str = "sync",
    settings: CompactionSettings | None = None,
) -> tuple[CompactionResult, list[Message]]:
    """The result of one manual compaction of 31 messages, and the messages appended first."""
    settings = settings or CompactionSettings(context_window=WINDOW)
    if face == "sync":
        session = Session(store, "c", LettaEstimator(), summarizer, settings)
        appended = session.append(*chat(30))
        return session.compact_result(), appended

    async def run() -> tuple[CompactionResult, list[Message]]:
        session = AsyncSession(store, "c", LettaEstimator(), summarizer, settings)
        appended = await session.append(*chat(30))
        return await session.compact_result(), appended

    return asyncio.run(run())


def assert_one_consistent_compaction(
    store: ConversationStore,
    result: CompactionResult,
    appended: list[Message],
    fallback: str | None,
    reason: str | None,
) -> None:
    """Exactly one compaction committed, its event and stats naming the fallback, and no
    message lost: the history is what was appended plus the one summary."""
    assert result.compacted and result.summary is not None
    stats = result.stats
    assert stats.fallback == fallback
    if reason is None:
        assert stats.fallback_reason is None and "fallback" not in stats.as_dict()
    else:
        assert stats.fallback_reason is not None and reason in stats.fallback_reason
    (event,) = store.events("c")
    assert event.summary_id == result.summary.id
    assert dict(event.stats) == stats.as_dict()
    assert [m.id for m in store.history("c")] == [m.id for m in appended] + [result.summary.id]
    context = store.context("c").messages
    assert [m.id for m in context] == [m.id for m in result.context]
    assert check(context) == [] and any(RULE in m.content for m in context)


# --- the engine, on every store and both faces ----------------------------------------------


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_summarizer_answering_503_is_asked_again_then_the_extractive_brief_stands_in(
    any_store: ConversationStore, face: str
) -> None:
    summarizer = Down()
    result, appended = compacted(any_store, summarizer, face)
    assert summarizer.calls == 3  # summary_retries=2 by default
    assert_one_consistent_compaction(
        any_store, result, appended, "extractive", "model 'm' at http://127.0.0.1:1/v1: HTTP 503"
    )
    assert result.summary is not None and result.summary.kind == KIND_SUMMARY
    assert result.summary.metadata["summarizer"] == "extractive"
    assert result.summary.metadata["stats"]["fallback"] == "extractive"


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_summarizer_that_times_out_is_not_asked_again(face: str, tmp_path: Path) -> None:
    release = threading.Event()
    store = SQLiteStore(tmp_path / "precis.db")
    summarizer = Hanging(release)
    settings = CompactionSettings(context_window=WINDOW, summary_timeout=0.05)
    try:
        result, appended = compacted(store, summarizer, face, settings)
    finally:
        release.set()  # the sync call left waiting on its worker thread ends now
    assert summarizer.calls == 1  # the time allowed was spent: asking again only waits again
    reason = "summarizer 'flaky': no answer within 0.05s"
    assert_one_consistent_compaction(store, result, appended, "extractive", reason)


@pytest.mark.parametrize("answer", ["", "  \n ", None, 42])
def test_a_blank_or_garbage_answer_is_a_failure(answer: object) -> None:
    store = MemoryStore()
    summarizer = Scripted(answer, answer, answer)
    result, appended = compacted(store, summarizer)
    assert summarizer.calls == 3
    reason = "the summarizer returned an empty answer"
    assert_one_consistent_compaction(store, result, appended, "extractive", reason)


@pytest.mark.parametrize("face", ["sync", "async"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_summarizer_that_fails_once_then_answers_needs_no_fallback(
    face: str, kind: str, tmp_path: Path
) -> None:
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "precis.db")
    summarizer = Scripted(DOWN)
    result, appended = compacted(store, summarizer, face)
    assert summarizer.calls == 2
    assert_one_consistent_compaction(store, result, appended, None, None)
    assert result.summary is not None and result.summary.metadata["summarizer"] == "flaky"
    assert result.summary.metadata["summary"].startswith("the model's summary")
    assert "fallback" not in result.summary.metadata["stats"]


@pytest.mark.parametrize("retries", [0, 1, 5])
def test_summary_retries_bounds_the_calls(retries: int) -> None:
    summarizer = Down()
    settings = CompactionSettings(context_window=WINDOW, summary_retries=retries)
    result, _ = compacted(MemoryStore(), summarizer, settings=settings)
    assert summarizer.calls == retries + 1 and result.stats.fallback == "extractive"


def test_summary_retries_is_a_setting_like_the_others(tmp_path: Path) -> None:
    with pytest.raises(InvalidSetting, match="summary_retries: must be >= 0"):
        CompactionSettings(summary_retries=-1)
    shown = run_precis(tmp_path, "config", "--json", env={"PRECIS_SUMMARY_RETRIES": "4"}).stdout
    assert json.loads(shown)["summary_retries"]["value"] == 4


def test_an_error_that_is_not_precis_own_is_named_by_its_class() -> None:
    summarizer = Down(RuntimeError("connection reset\nby peer"))
    result, _ = compacted(MemoryStore(), summarizer)
    assert result.stats.fallback_reason == "RuntimeError: connection reset by peer"


def test_when_no_brief_fits_truncation_stands_in(any_store: ConversationStore) -> None:
    settings = CompactionSettings(context_window=WINDOW, soft_watermark=0.05)
    result, appended = compacted(any_store, Down(), settings=settings)
    assert_one_consistent_compaction(any_store, result, appended, "truncation", "HTTP 503")
    assert result.stats.mode == "truncate" and result.summary is not None
    assert result.summary.kind == KIND_MARKER


def test_a_context_nothing_shrinks_writes_nothing_and_names_the_failure() -> None:
    store = MemoryStore()
    session = Session(store, "c", LettaEstimator(), Down(), CompactionSettings(WINDOW))
    session.append(*[Message(role=r, content="ok") for r in ("user", "assistant") * 3])
    result = session.compact_result()
    assert not result.compacted and store.events("c") == []
    assert "the summarizer failed: model 'm' at http://127.0.0.1:1/v1: HTTP 503" in result.reason


def test_only_a_context_nothing_can_make_fit_raises_and_writes_nothing() -> None:
    """No window (so no truncation), no guard and the smallest clip: the brief cannot hold the
    long red line verbatim, so nothing acceptable exists."""
    store = MemoryStore()
    rule = "Never deploy on Fridays, and never " + " or ".join(f"touch t{i}" for i in range(40))
    settings = CompactionSettings(guard=False, clip_chars=1, pin_task=False)
    session = Session(store, "c", LettaEstimator(), Down(), settings)
    session.append(Message(role="user", content=rule), *chat(30))
    before = (store.context("c"), store.history("c"))
    with pytest.raises(CompactionError, match=r"the summarizer failed: model 'm'.*HTTP 503"):
        session.compact()
    assert (store.context("c"), store.history("c")) == before and store.events("c") == []


def test_an_agent_turn_is_answered_while_the_summarizer_is_down(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "precis.db")
    session = Session(store, "c", None, Down(), CompactionSettings(context_window=WINDOW))
    seen: list[CompactionStats] = []
    agent = Agent(session, MockProvider(WINDOW), on_compaction=seen.append)
    for i in range(40):
        reply, _ = agent.turn(f"question {i}: " + "w " * 60)
        assert reply.startswith(f"Noted: question {i}:")
    assert seen and {s.fallback for s in seen} == {"extractive"}
    assert len(store.events("c")) == len(seen)
    assert len(store.history("c")) == 80 + len(seen)  # every turn kept, one summary each


def test_absorb_uses_the_extractive_brief_when_the_child_summarizer_fails() -> None:
    parent = Session(MemoryStore(), "parent", LettaEstimator(), None, CompactionSettings(8000))
    parent.append(Message(role="user", content="Find why the export is slow."))
    parent.append(Message(role="assistant", tool_calls=(ToolCall("task_1", "sub_agent", "{}"),)))
    child = Session(MemoryStore(), "child", LettaEstimator(), Down(), CompactionSettings(8000))
    child.append(Message(role="user", content="Profile csv_writer.py; never edit legacy/."))
    child.append(Message(role="assistant", content="The writer re-opens the file per row."))
    result = parent.absorb(child, "task_1")
    assert result.tool_call_id == "task_1" and "never edit legacy/" in result.content


# --- a real model server answering 503 ------------------------------------------------------


@pytest.fixture(scope="module")
def busy_model() -> Iterator[tuple[str, list[str]]]:
    """An OpenAI-compatible server on 127.0.0.1 that answers every chat request 503, telling the
    SDK not to retry on its own (so the count is precis's), and the paths it was asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            asked.append(self.path)
            body = json.dumps({"error": {"message": "the model is overloaded"}}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-should-retry", "false")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", asked
    finally:
        server.shutdown()


BUSY = "HTTP 503: the model is overloaded"


@pytest.mark.parametrize("face", ["sync", "async"])
def test_the_llm_summarizer_against_a_503_server_falls_back(
    busy_model: tuple[str, list[str]], face: str, tmp_path: Path
) -> None:
    url, asked = busy_model
    asked.clear()
    store = SQLiteStore(tmp_path / "precis.db")
    summarizer = LLMSummarizer(OpenAIProvider("m", base_url=url))
    result, appended = compacted(store, summarizer, face)
    assert asked == ["/v1/chat/completions"] * 3
    reason = f"model 'm' at {url}: {BUSY}"
    assert_one_consistent_compaction(store, result, appended, "extractive", reason)


def test_the_cli_shows_the_fallback_on_compact_and_in_events(
    busy_model: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, _ = busy_model
    home = tmp_path / "home"
    for i in range(8):
        run_precis(home, "chat", "-p", f"{RULE} Question {i}: " + "more words " * 30)
    history = json.loads(run_precis(home, "history", "--json").stdout)
    llm = ["--summarizer", "llm", "--provider", "openai", "--model", "m", "--base-url", url]
    ran = run_precis(home, *llm, "compact")
    (line,) = [x for x in ran.stderr.splitlines() if x.startswith("⇣ compacted (manual)")]
    said = f"the summarizer failed (model 'm' at {url}: {BUSY}): the extractive brief stood in"
    assert line.endswith(f"; {said}")
    stats = json.loads(ran.stdout.splitlines()[0])
    assert stats["fallback"] == "extractive" and BUSY in stats["fallback_reason"]
    after = json.loads(run_precis(home, "history", "--json").stdout)
    assert [m["id"] for m in after[: len(history)]] == [m["id"] for m in history]
    assert len(after) == len(history) + 1  # the summary; no message lost
    (event,) = json.loads(run_precis(home, "events", "--json").stdout)
    assert event["index"] == 0 and event["trigger"] == "manual"
    assert event["stats"] == stats
    table = run_precis(home, "events").stdout
    assert "compactions: 1" in table
    # The fallback column, folded over as many lines as it needs.
    cells = [row.split("│")[-2].strip() for row in table.splitlines() if row.startswith("│")]
    assert " ".join(cells) == said


def test_the_service_and_the_inspector_show_the_fallback(
    busy_model: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, _ = busy_model
    store = SQLiteStore(tmp_path / "precis.db")
    app = create_app(
        store,
        settings=CompactionSettings(context_window=WINDOW),
        summarizer_factory=lambda: LLMSummarizer(OpenAIProvider("m", base_url=url)),
    )
    messages = [m.to_openai() for m in chat(30)]
    with serving(app) as base, httpx.Client(base_url=base, timeout=60) as client:
        assert client.post("/v1/conversations", json={"id": "c"}).status_code == 201
        posted = client.post("/v1/conversations/c/messages", json={"messages": messages})
        assert posted.status_code == 201, posted.text
        answer = client.post("/v1/conversations/c/compact", json={})
        assert answer.status_code == 200, answer.text
        stats = answer.json()["stats"]
        assert stats["fallback"] == "extractive" and BUSY in stats["fallback_reason"]
        (event,) = client.get("/v1/conversations/c/events").json()["events"]
        assert event["stats"]["fallback"] == "extractive"
        assert event["stats"]["fallback_reason"] == stats["fallback_reason"]
        page = client.get("/ui/c/c/compactions/1")
        assert page.status_code == 200
        shown = page.text.split('id="fallback">', 1)[1].split("</dd>", 1)[0]
        assert BUSY in shown and "the extractive brief stood in" in shown
        listing = client.get("/ui/c/c").text
        assert "the summarizer failed: extractive stood in" in listing
        assert client.get("/ui/c/c/chart.json").json()["markers"][0]["fallback"] == "extractive"
    assert len(store.history("c")) == 31 + 1 and check(store.context("c").messages) == []


def test_a_compaction_the_summarizer_made_shows_no_fallback(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "precis.db")
    app = create_app(store, settings=CompactionSettings(context_window=WINDOW))
    messages = [m.to_openai() for m in chat(30)]
    with serving(app) as base, httpx.Client(base_url=base, timeout=60) as client:
        client.post("/v1/conversations", json={"id": "c"})
        client.post("/v1/conversations/c/messages", json={"messages": messages})
        answer = client.post("/v1/conversations/c/compact", json={})
        assert answer.status_code == 200 and "fallback" not in answer.json()["stats"]
        (event,) = client.get("/v1/conversations/c/events").json()["events"]
        assert "fallback" not in event["stats"]
        assert 'id="fallback"' not in client.get("/ui/c/c/compactions/1").text
