"""precis beside its peers on the shared conversations, with one fake summarizer plugged into all.

Each conversation is replayed message by message. Before every model call (after each message
not followed by a tool result) each system's compaction is consulted exactly as its agent loop
would: precis's `Session.maybe_compact` (again with `guard=False`, for what the guard costs),
LangChain's `SummarizationMiddleware.before_model` and
`trim_messages` (with and without `start_on="human"`), OpenHands' `LLMSummarizingCondenser`. All
summaries come from `fake_summary`, so the systems differ only in what they keep and when.

What the table reports, for the context each system would send (measured with precis's
`TextEstimator` for all, checked with `precis.core.validity.check`): tool-pair violations, the
share of model calls over the window, tokens after a compaction (median, as a share of the
window), the number of compactions, the share of compactions that removed the newest message, and
the median time of one compaction as a ratio to precis's. Under it, per system, that median in
milliseconds and the whole loop: every consult (compacting or not) plus, for precis, every
append, where it scans and counts each message once so that compactions need not.

The peers need their own interpreters (LangChain 1.x; OpenHands SDK wants Python >= 3.12), so
this script re-runs itself under each peer's venv and reads back JSON:

    .venv/bin/python bench/peers.py --setup     # once: make /tmp/peers-lc and /tmp/peers-oh
    .venv/bin/python bench/peers.py [--window 8000] [--json]

PEERS_LC_PYTHON / PEERS_OH_PYTHON point at other interpreters. A peer that cannot run here is
reported as "not run: <reason>" and the others go on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# The repo carries the shared conversations; PRECIS_TRAJECTORIES points at another folder.
TRAJECTORIES = Path(os.environ.get("PRECIS_TRAJECTORIES", ROOT / "tests" / "data" / "trajectories"))
LC_PYTHON = Path(os.environ.get("PEERS_LC_PYTHON", "/tmp/peers-lc/bin/python"))
OH_PYTHON = Path(os.environ.get("PEERS_OH_PYTHON", "/tmp/peers-oh/bin/python"))
# Interpreters the venvs are made from by --setup; LangChain runs on 3.11, OpenHands needs 3.12.
LC_BASE = "/root/.pyenv/versions/3.11.7/bin/python3.11"
OH_BASE = "/root/.pyenv/versions/3.12.1/bin/python3.12"
LC_PACKAGES = ("langchain>=1,<2", "langchain-core>=1,<2", "langgraph-checkpoint-sqlite>=3,<4")
OH_PACKAGES = ("openhands-sdk>=1.58,<1.59",)
PEER_TIMEOUT = 1800.0
# OpenHands' max_size (events before it condenses whatever the tokens), past any conversation.
NO_EVENT_LIMIT = 1_000_000
SUMMARY_PREFIX = "SUMMARY: "
SUMMARY_CHARS = 200
# A compaction that frees less than a fifth of the window is soon followed by another.
SMALL_FREED = 0.2


def fake_summary(evicted_text: str) -> str:
    """The one summarizer every system gets: fixed, deterministic, free, so only policy differs."""
    return SUMMARY_PREFIX + evicted_text[:SUMMARY_CHARS]


# --- What one system did on one conversation ------------------------------------------------------


@dataclass(slots=True)
class Compaction:
    """One compaction: its in-process time, the tokens sent right after, what it dropped, and
    the tokens the same call would have sent without it (the share freed is their difference)."""

    ms: float
    tokens_after: int
    newest_lost: bool
    tokens_before: int = 0
    # precis only: the system prompt, tools, pinned messages and newest turn alone were over the
    # low watermark, so no compaction could free much (the exception to "< 20 %").
    cramped: bool = False


@dataclass(slots=True)
class ConversationRun:
    """One conversation under one system: per model call sizes and violations, and compactions."""

    name: str
    calls: int = 0
    over: int = 0
    violations: int = 0
    violating_calls: int = 0
    empty: int = 0  # calls whose context held nothing but (at most) the system prompt
    consult_ms: list[float] = field(default_factory=list)
    # Time spent handing the system its messages (precis's appends), outside the consults.
    append_ms: list[float] = field(default_factory=list)
    # Per model call, in the agent-shaped loop only: everything from the last call to this
    # one's context in hand (appends, the consult, compactions, the context read; for
    # LangChain with a checkpointer, the graph's turn with its checkpoint written).
    call_ms: list[float] = field(default_factory=list)
    compactions: list[Compaction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    summaries: int = 0  # calls of the summarizer (the fake one every system is given)


@dataclass(slots=True)
class SystemRun:
    """One system over every conversation, or the reason it could not run."""

    system: str
    config: str
    runs: list[ConversationRun] = field(default_factory=list)
    not_run: str | None = None


class Meter:
    """Measures what a system would send with one counter and one validity check for all."""

    def __init__(self, window: int) -> None:
        from precis.core.tokens import TextEstimator

        self.window = window
        self.counter = TextEstimator()

    def sent(self, run: ConversationRun, context: Sequence[Mapping[str, Any]]) -> int:
        """Record one model call's context (OpenAI dicts); returns its tokens."""
        from precis.core.messages import Message
        from precis.core.validity import check

        messages = [Message.from_openai(item, index=i) for i, item in enumerate(context)]
        tokens = sum(self.counter.count(m) for m in messages)
        found = len(check(messages))
        run.calls += 1
        run.over += tokens > self.window
        run.violations += found
        run.violating_calls += found > 0
        run.empty += all(m.role == "system" for m in messages)
        return tokens

    def tokens(self, context: Sequence[Mapping[str, Any]]) -> int:
        """What this context would cost, counted as `sent` counts it, and recorded nowhere."""
        from precis.core.messages import Message

        return sum(
            self.counter.count(Message.from_openai(item, index=i)) for i, item in enumerate(context)
        )


def load(path: Path) -> list[dict[str, Any]]:
    """A shared conversation as OpenAI dicts, as `precis eval` reads it."""
    from precis.eval import load_conversation

    return load_conversation(path)


def conversations() -> list[Path]:
    """The shared conversations, in a stable order so runs line up."""
    return sorted(TRAJECTORIES.glob("*.jsonl"))


def model_calls(items: Sequence[Mapping[str, Any]]) -> Iterator[int]:
    """Indices after which the agent calls the model: messages not followed by a tool result.

    A leading system prompt alone is no call: there is no conversation to send yet.
    """
    for i in range(len(items)):
        if i == 0 and has_system(items):
            continue
        if i + 1 == len(items) or items[i + 1].get("role") != "tool":
            yield i


def text_of(content: Any) -> str:
    """Content as text; odd shapes as JSON so nothing is silently dropped."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def has_system(items: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the conversation opens with a system prompt, which agents keep apart."""
    return bool(items) and items[0].get("role") == "system" and isinstance(items[0]["content"], str)


# --- precis ---------------------------------------------------------------------------------------


class FixedSummarizer:
    """`fake_summary` as a precis Summarizer: the evicted messages' text in, the summary out."""

    name = "fixed-fake"
    calls = 0

    def summarize(self, request: Any) -> str:
        self.calls += 1
        return fake_summary("\n".join(m.content for m in request.messages))

    async def asummarize(self, request: Any) -> str:
        return self.summarize(request)


def _local_summarizer() -> Any:
    """`FixedSummarizer` as what it is to precis, a `LocalSummarizer` (no I/O): a sync session
    calls it in place, where it bounds a model-backed one by its timeout on a worker thread."""
    from precis.summarize.base import LocalSummarizer

    class Local(FixedSummarizer, LocalSummarizer):
        pass

    return Local()


def _precis_conversation(
    path: Path, window: int, meter: Meter, *, guard: bool = True
) -> ConversationRun:
    from precis.core.errors import CompactionError
    from precis.engine.settings import CompactionSettings
    from precis.session import Session
    from precis.stores.memory import MemoryStore

    items = load(path)
    run = ConversationRun(path.stem)
    summarizer = _local_summarizer()
    session = Session(
        MemoryStore(),
        path.stem,
        summarizer=summarizer,
        settings=CompactionSettings(context_window=window, guard=guard),
    )
    calls = set(model_calls(items))
    newest = ""
    for i, item in enumerate(items):
        start = time.perf_counter()
        if i == 0 and has_system(items):
            session.set_system_prompt(item["content"])
        else:
            (appended,) = session.append(item)
            newest = appended.id
        run.append_ms.append((time.perf_counter() - start) * 1000)
        if i not in calls:
            continue
        before = meter.tokens(session.prompt())
        cramped = _least(session) > (session.settings.target or 0)
        start = time.perf_counter()
        try:
            done = session.maybe_compact()
        except CompactionError as exc:
            run.errors.append(f"message {i}: {exc}")
            done = []
        ms = (time.perf_counter() - start) * 1000
        run.consult_ms.append(ms)
        tokens = meter.sent(run, session.prompt())
        if done:
            kept = {m.id for m in session.context()}
            run.compactions.append(Compaction(ms, tokens, newest not in kept, before, cramped))
    run.summaries = summarizer.calls
    return run


def _precis_loop(path: Path, window: int, meter: Meter, folder: Path | None) -> ConversationRun:
    """The agent-shaped loop alone, timed per model call: append what came since the last
    call, `maybe_compact`, read the prompt to send. In memory, or on a SQLite file in `folder`.
    """
    from precis.core.errors import CompactionError
    from precis.engine.settings import CompactionSettings
    from precis.session import Session
    from precis.stores.memory import MemoryStore
    from precis.stores.sqlite import SQLiteStore

    items = load(path)
    run = ConversationRun(path.stem)
    summarizer = _local_summarizer()
    store = MemoryStore() if folder is None else SQLiteStore(folder / f"{path.stem}.db")
    session = Session(
        store, path.stem, summarizer=summarizer, settings=CompactionSettings(context_window=window)
    )
    calls = set(model_calls(items))
    since = 0.0
    for i, item in enumerate(items):
        start = time.perf_counter()
        if i == 0 and has_system(items):
            session.set_system_prompt(item["content"])
        else:
            session.append(item)
        since += time.perf_counter() - start
        if i not in calls:
            continue
        start = time.perf_counter()
        try:
            done = session.maybe_compact()
        except CompactionError as exc:
            run.errors.append(f"message {i}: {exc}")
            done = []
        sent = session.prompt()
        run.call_ms.append((since + time.perf_counter() - start) * 1000)
        since = 0.0
        tokens = meter.sent(run, sent)
        if done:
            run.compactions.append(Compaction(0.0, tokens, False))
    run.summaries = summarizer.calls
    store.close()
    return run


def _least(session: Any) -> int:
    """What stays after any compaction: the system prompt, tools, pinned messages and the newest
    turn, as the session shows them (counted by its own counter, as its target is)."""
    from precis.core.planning import call_groups

    shown = session.view()
    groups = call_groups(shown)
    newest = set(groups[-1]) if groups else set()
    count = session.counter.count
    kept = (m for i, m in enumerate(shown) if m.pinned or i in newest)
    return int(session.floor_tokens()) + sum(count(m) for m in kept)


def run_precis(window: int, *, guard: bool = True) -> list[SystemRun]:
    """precis in this process: `Session.maybe_compact` with default settings at the window; with
    `guard=False`, what proving the facts survived costs beside the rest."""
    meter = Meter(window)
    off = "" if guard else ", guard=False"
    system = SystemRun(
        "precis" if guard else "precis, guard off",
        f"Session.maybe_compact, CompactionSettings(context_window={window}{off})",
    )
    for path in conversations():
        system.runs.append(_precis_conversation(path, window, meter, guard=guard))
    return [system]


# --- LangChain ------------------------------------------------------------------------------------


def _to_langchain(item: Mapping[str, Any], message_id: str) -> Any:
    """One OpenAI dict as a LangChain message, its id remembering where it came from."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    role = item.get("role")
    content = text_of(item.get("content") or "")
    if role == "system":
        return SystemMessage(content=content, id=message_id)
    if role == "user":
        return HumanMessage(content=content, id=message_id)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=item["tool_call_id"], id=message_id)
    calls = []
    for call in item.get("tool_calls") or []:
        raw = call["function"]["arguments"]
        try:
            args = json.loads(raw)
        except ValueError:
            args = {"input": raw}
        if not isinstance(args, dict):
            args = {"input": args}
        calls.append(
            {"name": call["function"]["name"], "args": args, "id": call["id"], "type": "tool_call"}
        )
    return AIMessage(content=content, tool_calls=calls, id=message_id)


def _from_langchain(message: Any, originals: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Back to the original dict; a message the system made itself (a summary) as a user turn."""
    original = originals.get(message.id or "")
    if original is not None:
        return dict(original)
    return {"role": "user", "content": text_of(message.content)}


def _lc_summarize(messages: list[Any]) -> str:
    """`fake_summary` in the shape of LangChain's `summarizer=` hook."""
    return fake_summary("\n".join(text_of(m.content) for m in messages))


def _middleware_conversation(path: Path, window: int, meter: Meter) -> ConversationRun:
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    items = load(path)
    run = ConversationRun(path.stem)

    def summarize(messages: list[Any]) -> str:
        run.summaries += 1
        return _lc_summarize(messages)

    middleware = SummarizationMiddleware(
        FakeListChatModel(responses=["unused: the summarizer hook writes every summary"]),
        trigger=("tokens", window),
        summarizer=summarize,
    )
    originals: dict[str, Mapping[str, Any]] = {}
    system: list[dict[str, Any]] = []
    state: dict[str, list[Any]] = {"messages": []}
    calls = set(model_calls(items))
    for i, item in enumerate(items):
        if i == 0 and has_system(items):
            system = [dict(item)]  # create_agent keeps the system prompt out of the state
        else:
            originals[f"m{i}"] = item
            state["messages"].append(_to_langchain(item, f"m{i}"))
        if i not in calls:
            continue
        before = meter.tokens(system + [_from_langchain(m, originals) for m in state["messages"]])
        start = time.perf_counter()
        update = middleware.before_model(state, None)  # type: ignore[arg-type]
        ms = (time.perf_counter() - start) * 1000
        run.consult_ms.append(ms)
        if update is not None:
            # The first entry is RemoveMessage(REMOVE_ALL_MESSAGES): the rest replaces the state.
            state["messages"] = list(update["messages"][1:])
        sent = system + [_from_langchain(m, originals) for m in state["messages"]]
        tokens = meter.sent(run, sent)
        if update is not None:
            kept = {m.id for m in state["messages"]}
            run.compactions.append(Compaction(ms, tokens, f"m{i}" not in kept, before))
    return run


def _checkpointed_conversation(
    path: Path, window: int, meter: Meter, saver: Any
) -> ConversationRun:
    """The middleware in a LangGraph graph with a checkpointer, as an agent runs it: each model
    call is one turn of the graph, given the messages that came since the last call (added to
    the state by its reducer), the middleware's `before_model` its node, the state checkpointed
    by `saver` at the end of the turn; the state it returns is what the model would be sent."""
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langgraph.graph import END, START, MessagesState, StateGraph

    items = load(path)
    run = ConversationRun(path.stem)

    def summarize(messages: list[Any]) -> str:
        run.summaries += 1
        return _lc_summarize(messages)

    middleware = SummarizationMiddleware(
        FakeListChatModel(responses=["unused: the summarizer hook writes every summary"]),
        trigger=("tokens", window),
        summarizer=summarize,
    )
    compacted = [False]

    def consult(state: Any) -> Any:
        update = middleware.before_model(state, None)
        compacted[0] = update is not None
        return update or {}

    graph = StateGraph(MessagesState)
    graph.add_node("before_model", consult)
    graph.add_edge(START, "before_model")
    graph.add_edge("before_model", END)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": path.stem}}
    originals: dict[str, Mapping[str, Any]] = {}
    system: list[dict[str, Any]] = []
    pending: list[Any] = []
    calls = set(model_calls(items))
    for i, item in enumerate(items):
        if i == 0 and has_system(items):
            system = [dict(item)]
        else:
            originals[f"m{i}"] = item
            pending.append(_to_langchain(item, f"m{i}"))
        if i not in calls:
            continue
        start = time.perf_counter()
        state = app.invoke({"messages": pending}, config)
        run.call_ms.append((time.perf_counter() - start) * 1000)
        pending = []
        tokens = meter.sent(
            run, system + [_from_langchain(m, originals) for m in state["messages"]]
        )
        if compacted[0]:
            run.compactions.append(Compaction(0.0, tokens, False))
    return run


def run_langchain_checkpointed(window: int) -> list[SystemRun]:
    """The middleware with LangGraph's in-memory and SQLite checkpointers, per model call, and
    precis's agent loop in memory and on SQLite beside them."""
    import sqlite3
    import tempfile
    from importlib.metadata import version

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    meter = Meter(window)
    lc = (
        f"langchain {version('langchain')}, langgraph {version('langgraph')}, "
        f"langgraph-checkpoint-sqlite {version('langgraph-checkpoint-sqlite')}"
    )
    memory = SystemRun(
        "LangChain middleware + InMemorySaver", f"{lc}; trigger=('tokens', {window})"
    )
    sqlite = SystemRun(
        "LangChain middleware + SqliteSaver",
        f"{lc}; trigger=('tokens', {window}), a file per conversation",
    )
    config = f"Session, CompactionSettings(context_window={window})"
    ours = SystemRun("precis loop, memory", f"{config}, MemoryStore")
    ours_sqlite = SystemRun(
        "precis loop, SQLite", f"{config}, SQLiteStore (a file per conversation)"
    )
    # precis's loop runs here too, conversation by conversation between LangChain's, so both
    # sides of each ratio are timed in the same minutes of the machine.
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for path in conversations():
            ours.runs.append(_precis_loop(path, window, meter, None))
            memory.runs.append(_checkpointed_conversation(path, window, meter, InMemorySaver()))
            ours_sqlite.runs.append(_precis_loop(path, window, meter, folder))
            connection = sqlite3.connect(folder / f"lg-{path.stem}.db", check_same_thread=False)
            saver = SqliteSaver(connection)
            sqlite.runs.append(_checkpointed_conversation(path, window, meter, saver))
            connection.close()
    return [ours, ours_sqlite, memory, sqlite]


def _trim_conversation(
    path: Path, window: int, meter: Meter, start_on: str | None
) -> ConversationRun:
    from langchain_core.messages.utils import count_tokens_approximately, trim_messages

    items = load(path)
    run = ConversationRun(path.stem)
    originals: dict[str, Mapping[str, Any]] = {}
    history: list[Any] = []
    calls = set(model_calls(items))
    for i, item in enumerate(items):
        originals[f"m{i}"] = item
        history.append(_to_langchain(item, f"m{i}"))
        if i not in calls:
            continue
        start = time.perf_counter()
        trimmed = trim_messages(
            history,
            max_tokens=window,
            token_counter=count_tokens_approximately,
            strategy="last",
            include_system=True,
            start_on=start_on,
        )
        ms = (time.perf_counter() - start) * 1000
        run.consult_ms.append(ms)
        tokens = meter.sent(run, [_from_langchain(m, originals) for m in trimmed])
        if len(trimmed) < len(history):
            kept = {m.id for m in trimmed}
            before = meter.tokens([_from_langchain(m, originals) for m in history])
            run.compactions.append(Compaction(ms, tokens, f"m{i}" not in kept, before))
    return run


def run_langchain(window: int) -> list[SystemRun]:
    """LangChain's middleware and both trim_messages recipes, in the LangChain venv."""
    from importlib.metadata import version

    meter = Meter(window)
    lc = f"langchain {version('langchain')}, langchain-core {version('langchain-core')}"
    middleware = SystemRun(
        "LangChain SummarizationMiddleware",
        f"{lc}; trigger=('tokens', {window}), keep default (20 messages), summarizer hook",
    )
    trim = SystemRun(
        "LangChain trim_messages",
        f"{lc}; max_tokens={window}, strategy='last', include_system=True, approximate counter",
    )
    trim_human = SystemRun("LangChain trim_messages start_on=human", trim.config)
    runners: list[tuple[SystemRun, Callable[[Path], ConversationRun]]] = [
        (middleware, lambda p: _middleware_conversation(p, window, meter)),
        (trim, lambda p: _trim_conversation(p, window, meter, None)),
        (trim_human, lambda p: _trim_conversation(p, window, meter, "human")),
    ]
    for system, runner in runners:
        for path in conversations():
            system.runs.append(runner(path))
    return [middleware, trim, trim_human]


# --- OpenHands ------------------------------------------------------------------------------------


def _openhands_llms(window: int) -> tuple[Any, Any, list[int]]:
    """A summary LLM that answers with `fake_summary`, the agent's LLM (counts tokens only), and
    how many summaries the first has written so far."""
    from openhands.sdk.llm import LLM, Message, TextContent
    from openhands.sdk.testing import TestLLM

    written = [0]

    class FixedSummaryLLM(TestLLM):  # type: ignore[misc]
        """OpenHands' own scripted LLM, scripted to answer every call with the fake summary."""

        def completion(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            evicted = "\n".join(
                part.text
                for m in messages
                if m.role == "user"
                for part in m.content
                if isinstance(part, TextContent)
            )
            written[0] += 1
            reply = Message(role="assistant", content=[TextContent(text=fake_summary(evicted))])
            self._scripted_responses.append(reply)
            return super().completion(messages, *args, **kwargs)

    summary_llm = FixedSummaryLLM(model="test-model", usage_id="condenser")
    # The agent's LLM only counts tokens for the condenser (litellm, gpt-4o's tokenizer).
    agent_llm = LLM(model="gpt-4o", usage_id="agent")
    return summary_llm, agent_llm, written


def _openhands_events(item: Mapping[str, Any], i: int, actions: dict[str, str]) -> list[Any]:
    """One OpenAI dict as OpenHands events: one ActionEvent per tool call, as its agent logs."""
    from openhands.sdk.event import ActionEvent, MessageEvent, ObservationEvent, SystemPromptEvent
    from openhands.sdk.llm import Message, MessageToolCall, TextContent
    from openhands.sdk.tool.schema import Observation

    class ReplayObservation(Observation):  # type: ignore[misc]
        """A recorded tool output, as text."""

    role = item.get("role")
    text = text_of(item.get("content") or "")
    if role == "system":
        return [SystemPromptEvent(id=f"e{i}", system_prompt=TextContent(text=text), tools=[])]
    if role == "tool":
        call_id = item["tool_call_id"]
        return [
            ObservationEvent(
                id=f"e{i}",
                tool_name=actions.get(call_id + ":name", "tool"),
                tool_call_id=call_id,
                observation=ReplayObservation.from_text(text),
                action_id=actions.get(call_id, f"e{i}"),
            )
        ]
    calls = item.get("tool_calls") or []
    if role == "assistant" and calls:
        events = []
        for j, call in enumerate(calls):
            event_id = f"e{i}.{j}"
            actions[call["id"]] = event_id
            actions[call["id"] + ":name"] = call["function"]["name"]
            events.append(
                ActionEvent(
                    id=event_id,
                    thought=[TextContent(text=text)] if j == 0 and text else [],
                    tool_name=call["function"]["name"],
                    tool_call_id=call["id"],
                    tool_call=MessageToolCall(
                        id=call["id"],
                        name=call["function"]["name"],
                        arguments=call["function"]["arguments"],
                        origin="completion",
                    ),
                    llm_response_id=f"r{i}",
                )
            )
        return events
    source = "user" if role == "user" else "agent"
    message = Message(
        role="user" if role == "user" else "assistant", content=[TextContent(text=text)]
    )
    return [MessageEvent(id=f"e{i}", source=source, llm_message=message)]


def _openhands_dicts(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenHands' outgoing messages as OpenAI dicts: text parts joined, tool calls spelled out."""
    from openhands.sdk.llm import TextContent

    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {
            "role": m.role,
            "content": "".join(p.text for p in m.content if isinstance(p, TextContent)),
        }
        if m.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in m.tool_calls
            ]
        if m.tool_call_id:
            item["tool_call_id"] = m.tool_call_id
        out.append(item)
    return out


def _condenser_conversation(
    path: Path, window: int, meter: Meter, make: Callable[[], Any], agent_llm: Any
) -> ConversationRun:
    from openhands.sdk.context.view import View
    from openhands.sdk.event import Condensation, LLMConvertibleEvent

    items = load(path)
    run = ConversationRun(path.stem)
    condenser = make()
    view = View()
    actions: dict[str, str] = {}
    calls = set(model_calls(items))
    for i, item in enumerate(items):
        events = _openhands_events(item, i, actions)
        for event in events:
            view.append_event(event)  # the conversation state's incrementally kept view
        if i not in calls:
            continue
        newest = events[-1].id
        made: list[Compaction] = []
        # The agent applies a Condensation and asks again on its next step; at most a few.
        result: Any = view
        for _ in range(5):
            before = meter.tokens(
                _openhands_dicts(LLMConvertibleEvent.events_to_messages(list(view.events)))
            )
            start = time.perf_counter()
            try:
                result = condenser.condense(view, agent_llm=agent_llm)
            except Exception as exc:  # NoCondensationAvailableException and kin
                run.errors.append(f"message {i}: {type(exc).__name__}: {exc}")
                result = view
            ms = (time.perf_counter() - start) * 1000
            run.consult_ms.append(ms)
            if not isinstance(result, Condensation):
                break
            view.append_event(result)
            lost = newest in result.forgotten_event_ids or any(c.newest_lost for c in made)
            made.append(Compaction(ms, 0, lost, before))
            result = view
        sent = _openhands_dicts(LLMConvertibleEvent.events_to_messages(list(result.events)))
        tokens = meter.sent(run, sent)
        # Tokens after: what the next condensation of this call started from, or what goes out.
        for j, c in enumerate(made):
            c.tokens_after = made[j + 1].tokens_before if j + 1 < len(made) else tokens
        run.compactions.extend(made)
    return run


def run_openhands(window: int) -> list[SystemRun]:
    """OpenHands' LLMSummarizingCondenser with max_tokens at the window, in its own venv."""
    from importlib.metadata import version

    from openhands.sdk.context.condenser import LLMSummarizingCondenser

    meter = Meter(window)
    summary_llm, agent_llm, written = _openhands_llms(window)

    def make() -> Any:
        # Triggered by tokens at the window, as the others; the event-count trigger (max_size)
        # is set past every conversation's length so that it never fires.
        return LLMSummarizingCondenser(llm=summary_llm, max_tokens=window, max_size=NO_EVENT_LIMIT)

    probe = make()
    system = SystemRun(
        "OpenHands LLMSummarizingCondenser",
        f"openhands-sdk {version('openhands-sdk')}; max_tokens={window}, "
        f"max_size={probe.max_size} events, keep_first={probe.keep_first}, "
        "counted by litellm for gpt-4o",
    )
    for path in conversations():
        start = written[0]
        system.runs.append(_condenser_conversation(path, window, meter, make, agent_llm))
        system.runs[-1].summaries = written[0] - start
    return [system]


# --- Orchestration --------------------------------------------------------------------------------

PEERS: Mapping[str, tuple[Path | None, Callable[[int], list[SystemRun]], tuple[str, ...]]] = {
    "precis": (None, run_precis, ("precis",)),
    "precis-unguarded": (None, partial(run_precis, guard=False), ("precis, guard off",)),
    "langchain": (
        LC_PYTHON,
        run_langchain,
        (
            "LangChain SummarizationMiddleware",
            "LangChain trim_messages",
            "LangChain trim_messages start_on=human",
        ),
    ),
    "langchain-saved": (
        LC_PYTHON,
        run_langchain_checkpointed,
        (
            "precis loop, memory",
            "precis loop, SQLite",
            "LangChain middleware + InMemorySaver",
            "LangChain middleware + SqliteSaver",
        ),
    ),
    "openhands": (OH_PYTHON, run_openhands, ("OpenHands LLMSummarizingCondenser",)),
}


def _from_json(data: Mapping[str, Any]) -> SystemRun:
    """A worker's JSON back into runs, so every system is pooled by the same code."""
    runs = [
        ConversationRun(
            **{k: v for k, v in r.items() if k != "compactions"},
            compactions=[Compaction(**c) for c in r["compactions"]],
        )
        for r in data["runs"]
    ]
    return SystemRun(data["system"], data["config"], runs, data.get("not_run"))


def _peer_env() -> dict[str, str]:
    """The worker sees this tree's precis and no network-bound litellm or banner."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["OPENHANDS_SUPPRESS_BANNER"] = "1"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no network: litellm's bundled model map
    return env


def run_peer(name: str, window: int) -> list[SystemRun]:
    """Run one peer in its interpreter; any failure becomes "not run: <reason>" rows."""
    python, runner, systems = PEERS[name]
    if python is None:
        return runner(window)

    def failed(reason: str) -> list[SystemRun]:
        return [SystemRun(s, "", not_run=reason) for s in systems]

    if not python.exists():
        return failed(f"no interpreter at {python}; run bench/peers.py --setup")
    try:
        done = subprocess.run(
            [str(python), __file__, "--peer", name, "--window", str(window)],
            capture_output=True,
            text=True,
            env=_peer_env(),
            timeout=PEER_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return failed(f"timed out after {PEER_TIMEOUT:.0f} s")
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return failed(f"exit {done.returncode}: {tail[:160]}")
    try:
        return [_from_json(s) for s in json.loads(done.stdout.strip().splitlines()[-1])]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        return failed(f"unreadable output: {exc}")


def _peer_main(name: str, window: int) -> int:
    """Worker side: run one peer here and print its runs as one JSON line."""
    _, runner, systems = PEERS[name]
    try:
        out = runner(window)
    except ImportError as exc:
        out = [SystemRun(s, "", not_run=f"cannot import: {exc}") for s in systems]
    sys.stdout.flush()
    print(json.dumps([asdict(s) for s in out]))
    return 0


def setup(only: Sequence[str] = ()) -> int:
    """Make the peers' venvs under /tmp with their packages and precis (editable)."""
    for name, base, python, packages in (
        ("langchain", LC_BASE, LC_PYTHON, LC_PACKAGES),
        ("langchain-saved", LC_BASE, LC_PYTHON, LC_PACKAGES),
        ("openhands", OH_BASE, OH_PYTHON, OH_PACKAGES),
    ):
        if only and name not in only:
            continue
        venv = python.parent.parent
        if not python.exists():
            subprocess.run([base, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, *packages], check=True)
        subprocess.run([*pip, "-e", str(ROOT)], check=True)
    return 0


# --- Report ---------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float | None:
    """Median, or None for no values: medians resist the odd slow call."""
    return statistics.median(values) if values else None


def summarize(system: SystemRun, window: int) -> dict[str, Any]:
    """One system pooled over every conversation: the numbers the table and --json show."""
    if system.not_run is not None:
        return {"system": system.system, "not_run": system.not_run}
    compactions = [c for r in system.runs for c in r.compactions]
    calls = sum(r.calls for r in system.runs)
    ratios = [c.tokens_after / window for c in compactions]
    freed = sorted((c.tokens_before - c.tokens_after) / window for c in compactions)
    summaries = sum(r.summaries for r in system.runs)
    return {
        "system": system.system,
        "config": system.config,
        "conversations": len(system.runs),
        "model_calls": calls,
        "violations": sum(r.violations for r in system.runs),
        "violating_calls": sum(r.violating_calls for r in system.runs),
        "conversations_with_violations": sum(r.violating_calls > 0 for r in system.runs),
        "over_budget_share": sum(r.over for r in system.runs) / calls if calls else None,
        "empty_context_share": sum(r.empty for r in system.runs) / calls if calls else None,
        "tokens_after_median_ratio": _median(ratios),
        "compactions": len(compactions),
        "compactions_per_100_calls": 100 * len(compactions) / calls if calls else None,
        "summaries": summaries,
        "summaries_per_100_calls": 100 * summaries / calls if calls else None,
        "freed_median": _median(freed),
        "freed_p10": _percentile(freed, 10),
        "freed_min": freed[0] if freed else None,
        # Compactions that freed under a fifth of the window with room to free more.
        "freed_small": sum(
            (c.tokens_before - c.tokens_after) / window < SMALL_FREED and not c.cramped
            for c in compactions
        ),
        "max_compactions_one_conversation": max(
            (len(r.compactions) for r in system.runs), default=0
        ),
        "newest_lost_share": (
            sum(c.newest_lost for c in compactions) / len(compactions) if compactions else None
        ),
        "compaction_ms_median": _median([c.ms for c in compactions]),
        "consult_ms_median": _median([ms for r in system.runs for ms in r.consult_ms]),
        # The whole loop: every consult, compacting or not, and every append (precis stores and
        # scans each message as it comes, so work moved there is counted here too).
        "consult_ms_total": sum(ms for r in system.runs for ms in r.consult_ms),
        "append_ms_total": sum(ms for r in system.runs for ms in r.append_ms),
        # The agent-shaped loop (precis loop rows, LangChain with a checkpointer): per call.
        "call_ms_per_call": (
            sum(ms for r in system.runs for ms in r.call_ms) / calls
            if calls and any(r.call_ms for r in system.runs)
            else None
        ),
        "errors": [e for r in system.runs for e in r.errors][:20],
        "per_conversation": {
            r.name: {
                "calls": r.calls,
                "over": r.over,
                "violations": r.violations,
                "compactions": len(r.compactions),
            }
            for r in system.runs
        },
    }


def _percentile(ordered: Sequence[float], p: float) -> float | None:
    """The p-th percentile of sorted values (nearest rank), or None for no values."""
    if not ordered:
        return None
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


def render_rates(tables: Mapping[int, Sequence[Mapping[str, Any]]]) -> str:
    """Per window and system: compactions and summarizer calls per 100 model calls, and the
    median, 10th percentile and least of the share of the window each compaction freed, and how
    many freed under a fifth of it (precis: unless what must stay was over its low watermark)."""
    headers = (
        "window",
        "system",
        "compactions/100",
        "summaries/100",
        "freed p50",
        "freed p10",
        "freed min",
        "< 20 %",
    )
    table: list[tuple[str, ...]] = []
    for window, rows in tables.items():
        for r in rows:
            if r["system"] in PER_CALL_ONLY:
                continue
            if "not_run" in r:
                table.append((str(window), r["system"], f"not run: {r['not_run']}", *[""] * 5))
                continue
            table.append(
                (
                    str(window),
                    r["system"],
                    _number(r["compactions_per_100_calls"]),
                    _number(r["summaries_per_100_calls"]),
                    _share(r["freed_median"]),
                    _share(r["freed_p10"]),
                    _share(r["freed_min"]),
                    str(r["freed_small"]),
                )
            )
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers)]
    lines = [headers, tuple("-" * w for w in widths), *table]
    return "\n".join(
        "  ".join(
            [
                c.rjust(widths[0]),
                c2.ljust(widths[1]),
                *(x.rjust(w) for x, w in zip(rest, widths[2:], strict=True)),
            ]
        ).rstrip()
        for c, c2, *rest in lines
    )


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _ratio(value: float | None, base: float | None) -> str:
    """A time as a multiple of precis's: absolute times depend on the machine."""
    if value is None or not base:
        return "–"
    return f"{value / base:.2f}×"


def _share(value: float | None) -> str:
    """A share as a percentage, or a dash when nothing was counted."""
    return "–" if value is None else f"{value:.1%}"


def render(rows: Sequence[Mapping[str, Any]], window: int) -> str:
    """The side-by-side table as plain text: one row per system."""
    base = next((r.get("compaction_ms_median") for r in rows if r["system"] == "precis"), None)
    headers = (
        "system",
        "violations (calls/convs)",
        "over budget",
        "after/window",
        "compactions (max/conv)",
        "newest lost",
        "ms/compaction vs precis",
    )
    table: list[tuple[str, ...]] = []
    for r in rows:
        if "not_run" in r:
            table.append((r["system"], f"not run: {r['not_run']}", "", "", "", "", ""))
            continue
        after = r["tokens_after_median_ratio"]
        table.append(
            (
                r["system"],
                f"{r['violations']} ({r['violating_calls']}/{r['conversations_with_violations']})",
                _share(r["over_budget_share"]),
                "–" if after is None else f"{after:.2f}",
                f"{r['compactions']} ({r['max_compactions_one_conversation']})",
                "–" if r["system"] in PER_CALL_ONLY else _share(r["newest_lost_share"]),
                "–" if r["system"] in PER_CALL_ONLY else _ratio(r["compaction_ms_median"], base),
            )
        )
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    calls = next((r["model_calls"] for r in rows if "model_calls" in r), 0)
    out = [
        f"Peers on {len(conversations())} shared conversations, window {window}, "
        f"{calls} model calls, one fake summary (first {SUMMARY_CHARS} chars of the evicted text)",
        line(headers),
        line(["-" * w for w in widths]),
        *(line(row) for row in table),
    ]
    for r in rows:
        if "not_run" in r or r["system"] in PER_CALL_ONLY:
            continue
        median = r["compaction_ms_median"]
        shown = "–" if median is None else f"{median:.3f} ms"
        loop = r["consult_ms_total"] + r["append_ms_total"]
        out.append(
            f"{r['system']}: median {shown} per compaction (this machine); whole loop "
            f"{loop:.1f} ms (consults {r['consult_ms_total']:.1f} + appends "
            f"{r['append_ms_total']:.1f})"
        )
    out.extend(render_per_call(rows))
    for r in rows:
        if r.get("empty_context_share"):
            share = _share(r["empty_context_share"])
            out.append(f"{r['system']}: {share} of model calls sent no message but the system's")
        if r.get("errors"):
            out.append(f"{r['system']}: {len(r['errors'])} errors, first: {r['errors'][0]}")
    return "\n".join(out)


# The speed line: precis's loop per model call beside the peer that persists alike.
PER_CALL_PAIRS = (
    ("precis loop, SQLite", "LangChain middleware + SqliteSaver"),
    ("precis loop, memory", "LangChain middleware + InMemorySaver"),
)
# Systems run for their time per model call only: their compactions are counted, not sized or
# timed one by one (the rows above them say what each policy frees).
PER_CALL_ONLY = frozenset(name for pair in PER_CALL_PAIRS for name in pair)


def render_per_call(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Overhead per model call over the replay loop (appends, consult, compactions, the
    context read), precis beside the LangChain agent loop that persists alike, as a ratio
    measured in this run; and precis in memory beside the bare middleware's consults."""
    by_name = {r["system"]: r for r in rows if "not_run" not in r}
    out = []
    for ours, theirs in PER_CALL_PAIRS:
        mine, peer = by_name.get(ours, {}), by_name.get(theirs, {})
        a, b = mine.get("call_ms_per_call"), peer.get("call_ms_per_call")
        if a is None or b is None:
            out.append(f"per model call: {ours} vs {theirs}: not run")
            continue
        out.append(
            f"per model call: {ours} {a:.3f} ms, {theirs} {b:.3f} ms: precis {a / b:.2f}× of it"
        )
    mine, bare = (
        by_name.get("precis loop, memory", {}),
        by_name.get("LangChain SummarizationMiddleware", {}),
    )
    a = mine.get("call_ms_per_call")
    if a is not None and bare.get("model_calls"):
        b = bare["consult_ms_total"] / bare["model_calls"]
        out.append(
            f"per model call: precis loop, memory {a:.3f} ms, LangChain middleware alone (no "
            f"checkpointer, consults only) {b:.3f} ms: precis {a / b:.2f}× of it"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run every peer (or one, as a worker) and print the table or the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--window",
        type=int,
        action="append",
        help="context window in tokens (repeatable: one table each, then the rates of all)",
    )
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--setup", action="store_true", help="make the peers' venvs and exit")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(PEERS),
        help="set up or run only this peer (repeatable; precis, guard on and off, always runs)",
    )
    parser.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    windows: list[int] = args.window or [8000]
    if min(windows) < 1:
        parser.error("--window must be positive")
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    only = tuple(args.only or ())
    if args.setup:
        return setup(only)
    if args.peer:
        return _peer_main(args.peer, windows[0])
    names = [n for n in PEERS if not only or n.startswith("precis") or n in only]
    tables: dict[int, list[dict[str, Any]]] = {}
    for window in windows:
        systems = [s for name in names for s in run_peer(name, window)]
        tables[window] = [summarize(s, window) for s in systems]
        if not args.json:
            print(render(tables[window], window), end="\n\n", flush=True)
    if args.json:
        out = [{"window": w, "systems": rows} for w, rows in tables.items()]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
    else:
        print(render_rates(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
