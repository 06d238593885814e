"""A real small model (Gemma 3 270M) drives compaction: over llama.cpp's OpenAI-compatible server
and in-process. Its summaries are poor; the store must stay right anyway. Run by `make test-llm`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from precis.core.messages import KIND_MESSAGE, KIND_SUMMARY
from precis.core.validity import check
from precis.engine.settings import CompactionSettings
from precis.providers.base import ChatProvider
from precis.session import Session
from precis.session.agent import Agent
from precis.stores.sqlite import SQLiteStore
from precis.summarize.llm import LLMSummarizer

pytestmark = pytest.mark.llm

WINDOW = 1024
SERVER_CTX = 2048
QUESTIONS = [
    "Our service must listen on port 5433, never on the default 5432. Please remember that.",
    "Write one sentence about why database migrations should be reversible.",
    "Name two ways to make a slow web page load faster.",
    "What is a race condition? Answer in two sentences.",
    "Suggest a short name for a command line tool that compacts chat logs.",
    "Explain what a unit test is to a new engineer, briefly.",
    "Give one tip for writing clear commit messages.",
    "Why do people put caches in front of databases?",
    "What does idempotent mean for an HTTP request?",
    "List three things to check before deploying on a Friday.",
    "What is the difference between a process and a thread?",
    "How would you explain a message queue to a product manager?",
    "What is a good default timeout for an outgoing HTTP call, and why?",
    "Why should secrets never be committed to a repository?",
    "Summarise what we discussed about the database port.",
]


@pytest.fixture(scope="module")
def model_path() -> str:
    pytest.importorskip("llama_cpp", reason="make test-llm installs precis[local]")
    from precis.providers.llama import default_model_path

    return default_model_path()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(model_path: str) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, ready when uvicorn says so."""
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model_path,
        "--chat_format",
        "gemma",
        "--n_ctx",
        str(SERVER_CTX),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    server = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=os.environ
    )
    ready = threading.Event()
    log: list[str] = []

    def watch() -> None:
        assert server.stderr is not None
        for line in server.stderr:
            log.append(line)
            if "Uvicorn running on" in line:
                ready.set()
        ready.set()  # the server exited: stop waiting

    threading.Thread(target=watch, daemon=True).start()
    try:
        ready.wait(timeout=300)
        if server.poll() is not None or not any("Uvicorn running on" in x for x in log):
            pytest.fail("llama_cpp.server did not start:\n" + "".join(log[-20:]))
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(timeout=30)


def chat_until_two_compactions(provider: ChatProvider, db: Path) -> Session:
    store = SQLiteStore(db)
    session = Session(
        store,
        "real-model",
        None,
        LLMSummarizer(provider),
        # Compacting from half the window to 30 %: the model's short answers still bring two
        # summaries within the fifteen questions (the default's 85 % may make only one).
        CompactionSettings(
            context_window=WINDOW, summary_timeout=600, soft_watermark=0.5, low_watermark=0.3
        ),
    )
    session.set_system_prompt("You are a concise assistant. Answer in at most three sentences.")
    compactions = []
    agent = Agent(session, provider, on_compaction=compactions.append, history_tools=False)
    for question in QUESTIONS:
        agent.turn(question)
        if len(compactions) >= 2:
            break
    assert len(compactions) >= 2, f"only {len(compactions)} compactions in {len(QUESTIONS)} turns"
    return session


def assert_store_is_sound(session: Session) -> None:
    context = session.context()
    history = session.history()
    assert check(context) == []
    assert [m for m in context if m.kind == KIND_SUMMARY]
    summaries = [m for m in history if m.kind == KIND_SUMMARY]
    assert len(summaries) >= 2 and all(m.metadata["summary"].strip() for m in summaries)
    # A hard-watermark truncation leaves a user-role marker; the user's own turns are messages.
    users = [m.content for m in history if m.role == "user" and m.kind == KIND_MESSAGE]
    assert users == QUESTIONS[: len(users)]  # every original user turn is still in history
    assert len([m for m in history if m.role == "assistant"]) == len(users)
    assert session.recall("5433")  # the evicted constraint is still found
    assert session.tokens() <= WINDOW


def test_openai_provider_against_llama_cpp_server(server_url: str, tmp_path: Path) -> None:
    from precis.providers.openai import OpenAIProvider

    provider = OpenAIProvider(
        "gemma-3-270m",
        base_url=server_url,
        context_window=WINDOW,
        max_tokens=96,
        temperature=0,
        fold_system=True,
    )
    assert_store_is_sound(chat_until_two_compactions(provider, tmp_path / "precis.db"))


def test_llama_cpp_provider_in_process(model_path: str, tmp_path: Path) -> None:
    from precis.providers.llama import LlamaCppProvider

    provider = LlamaCppProvider(model_path, context_window=SERVER_CTX, max_tokens=96)
    assert_store_is_sound(chat_until_two_compactions(provider, tmp_path / "precis.db"))


def test_eval_probes_ask_the_local_model_end_to_end(model_path: str, tmp_path: Path) -> None:
    """`precis eval --facts … --probes` with the local model: each strategy's text, each
    question asked, each reply scored. A 270M model answers few right; the harness is real."""
    import json

    from conformance import TRAJECTORIES
    from run_cli import run_precis

    facts = Path(__file__).parent / "data" / "judge" / "mini-swe-agent__github_issue.json"
    result = run_precis(
        tmp_path / "home",
        "--provider",
        "llama",
        "--model",
        model_path,
        "--context-window",
        str(SERVER_CTX),
        "eval",
        "--facts",
        str(facts),
        "--trajectories",
        str(TRAJECTORIES),
        "--probes",
        "-s",
        "brief+guard",
        "-s",
        "truncation",
        "--json",
    )
    data = json.loads(result.stdout)
    for name in ("brief+guard", "truncation"):
        probes = data["overall"][name]["probes"]
        assert probes["asked"] == 3 and 0 <= probes["correct"] <= 3, probes
    answers = [a for row in data["rows"] for a in row["probes"]["answers"]]
    assert len(answers) == 6 and all(a["reply"].strip() or a.get("error") for a in answers)
    print(json.dumps(data["overall"], indent=1))
