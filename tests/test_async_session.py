"""AsyncSession inside a running event loop, and the two faces agreeing with each other.

The model is a real HTTP server on 127.0.0.1 answering like an OpenAI endpoint, reached through
`OpenAIProvider`'s async client; the store is a real SQLite file.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from scripted import ScriptedProvider

from precis.core.messages import KIND_SUMMARY, Message
from precis.core.tokens import LettaEstimator
from precis.core.validity import check
from precis.engine.settings import CompactionSettings
from precis.providers.base import Completion
from precis.providers.openai import OpenAIProvider
from precis.session import Agent, AsyncAgent, AsyncSession, Session
from precis.session._base import BaseSession
from precis.stores.base import ConversationStore
from precis.stores.sqlite import SQLiteStore
from precis.summarize.llm import LLMSummarizer

SUMMARY = "The user set the staging port to 5433 and asked for a release checklist."


@dataclass
class Model:
    """What the HTTP model saw, and the hooks a test uses to hold or release its answer."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    on_request: Callable[[], None] = lambda: None
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def model() -> Iterator[tuple[str, Model]]:
    state = Model()
    state.release.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            state.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            state.on_request()
            # Held until the test's coroutine releases it: only a free event loop can.
            answered = state.release.wait(timeout=20)
            body = {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": SUMMARY if answered else "",
                        },
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()


def turns(n: int) -> list[Message]:
    out = [Message(role="user", content="Our staging database listens on port 5433.")]
    for i in range(n):
        out.append(Message(role="assistant", content=f"step {i}: " + "checked the list. " * 20))
        out.append(Message(role="user", content=f"next {i}: " + "what else is missing? " * 20))
    return out


def test_async_compaction_with_an_async_model_leaves_the_loop_free(
    model: tuple[str, Model], tmp_path: Path
) -> None:
    url, state = model
    provider = OpenAIProvider("m", base_url=url, timeout=30)
    settings = CompactionSettings(context_window=2000)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()
        state.release.clear()
        state.on_request = lambda: loop.call_soon_threadsafe(arrived.set)

        async def release_when_asked() -> None:
            await arrived.wait()  # runs only if the compaction is not blocking the loop
            state.release.set()

        session = AsyncSession(
            SQLiteStore(tmp_path / "precis.db"),
            "a",
            LettaEstimator(),
            LLMSummarizer(provider),
            settings,
        )
        await session.append(*turns(20))
        releaser = asyncio.create_task(release_when_asked())
        result = await session.compact_result()
        await releaser
        context = await session.context()
        assert SUMMARY in result.summary.metadata["summary"]  # the model's answer, guarded
        assert result.summary in context and check(context) == []
        assert len(await session.history()) == 41 + 1  # every original, plus the summary
        assert [e.summary_id for e in await session.events()] == [result.summary.id]

    asyncio.run(main())
    assert len(state.requests) == 1
    assert state.requests[0]["messages"][0]["role"] == "system"


def test_sync_session_and_async_session_compact_alike(tmp_path: Path) -> None:
    settings = CompactionSettings(context_window=2000)
    sync = Session(SQLiteStore(tmp_path / "sync.db"), "c", LettaEstimator(), None, settings)
    sync.append(*turns(20))
    expected = sync.compact()
    sync_prompt = sync.prompt()

    async def main() -> tuple[Any, list[dict[str, Any]]]:
        session = AsyncSession(
            SQLiteStore(tmp_path / "async.db"), "c", LettaEstimator(), None, settings
        )
        await session.append(*turns(20))
        stats = await session.compact()
        return stats, await session.prompt()

    stats, prompt = asyncio.run(main())
    assert stats == expected
    summary = next(m for m in prompt if m["content"].startswith('{"type":"system_alert"'))
    assert (
        json.loads(summary["content"])["message"]
        == json.loads(
            next(m for m in sync_prompt if m["content"].startswith('{"type":"system_alert"'))[
                "content"
            ]
        )["message"]
    )


def test_both_faces_offer_the_one_typed_constructor(tmp_path: Path) -> None:
    # A catch-all (*args, **kwargs) would hide the parameters from editors and type checkers,
    # and let a misspelt keyword through to the base.
    base = inspect.signature(BaseSession)
    assert inspect.signature(Session) == base == inspect.signature(AsyncSession)
    assert "settings" in base.parameters
    with pytest.raises(TypeError, match="setings"):
        Session(SQLiteStore(tmp_path / "typo.db"), "c", setings=CompactionSettings())  # type: ignore[call-arg]


class ThreadRecordingStore:
    """A real SQLite store that records which thread ran each call."""

    def __init__(self, inner: ConversationStore) -> None:
        self.inner = inner
        self.threads: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.threads.add(threading.get_ident())
            return attribute(*args, **kwargs)

        return call


def test_async_session_runs_every_store_call_off_the_loop(tmp_path: Path) -> None:
    store = ThreadRecordingStore(SQLiteStore(tmp_path / "precis.db"))

    async def main() -> int:
        session = AsyncSession(
            store,  # type: ignore[arg-type]
            "c",
            LettaEstimator(),
            None,
            CompactionSettings(context_window=2000),
        )
        await session.append(*turns(20))
        await session.maybe_compact()
        await session.recall("5433")
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert store.threads and loop_thread not in store.threads


def _history_tool_script() -> ScriptedProvider:
    """A model that searches the history once, then answers."""
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_history", "arguments": '{"query": "5433"}'},
            }
        ],
    }
    return ScriptedProvider(Completion(call), "It is 5433.")


@pytest.mark.parametrize("face", ["sync", "async"])
def test_the_agent_answers_history_tool_calls_itself(face: str, tmp_path: Path) -> None:
    provider = _history_tool_script()
    store = SQLiteStore(tmp_path / "precis.db")
    settings = CompactionSettings(context_window=8000)
    store.append("c", turns(2))
    if face == "sync":
        reply, _ = Agent(Session(store, "c", settings=settings), provider).turn("Which port?")
    else:

        async def main() -> str:
            agent = AsyncAgent(AsyncSession(store, "c", settings=settings), provider)
            text, _ = await agent.turn("Which port?")
            return text

        reply = asyncio.run(main())
    assert reply == "It is 5433."
    offered = provider.tools_sent[0]
    assert {t["function"]["name"] for t in offered} == {"search_history", "read_original"}
    result = next(m for m in store.history("c") if m.role == "tool")
    assert result.tool_call_id == "call_1" and "5433" in result.content
    assert "staging database listens on port 5433" in result.content
    assert check(store.context("c").messages) == []
    assert not any(m.kind == KIND_SUMMARY for m in store.history("c"))


ARGS = '{"query": "x"}'


def _calls(*pairs: tuple[str, str]) -> Completion:
    return Completion(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": n, "arguments": '{"query": "x"}'},
                }
                for i, n in pairs
            ],
        }
    )


def test_a_history_call_beside_the_callers_own_call_is_answered_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    session = Session(
        SQLiteStore(tmp_path / "precis.db"), "c", settings=CompactionSettings(context_window=8000)
    )
    session.tools.append(weather)
    provider = ScriptedProvider(_calls(("h1", "search_history"), ("w1", "get_weather")), "ok")
    agent = Agent(session, provider)
    assert agent.turn("weather?") == ("", [])
    # The agent answered its own tool; the caller answers get_weather, and the next turn runs.
    session.append({"role": "tool", "tool_call_id": "w1", "content": "sunny"})
    assert agent.turn("thanks")[0] == "ok"
    assert check(session.context()) == []


def test_the_last_round_offers_no_history_tools_so_the_model_must_answer(
    tmp_path: Path,
) -> None:
    from precis.session.agent import MAX_TOOL_ROUNDS

    searches = [_calls((f"s{i}", "search_history")) for i in range(MAX_TOOL_ROUNDS)]
    provider = ScriptedProvider(*searches, "the answer")
    session = Session(
        SQLiteStore(tmp_path / "precis.db"), "c", settings=CompactionSettings(context_window=8000)
    )
    assert Agent(session, provider).turn("dig")[0] == "the answer"
    assert provider.tools_sent[-1] == [] and provider.tools_sent[0] != []
    assert session.context()[-1].role == "assistant" and check(session.context()) == []


def test_a_turn_too_big_to_compact_still_reaches_the_model_when_it_fits(tmp_path: Path) -> None:
    provider = ScriptedProvider("read it")
    settings = CompactionSettings(context_window=2000, soft_watermark=0.5)
    session = Session(SQLiteStore(tmp_path / "precis.db"), "c", settings=settings)
    reply, compactions = Agent(session, provider, history_tools=False).turn("word " * 1000)
    assert reply == "read it" and compactions == [] and len(provider.sent) == 1
    assert len(session.history()) == 2
