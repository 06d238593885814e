"""A real LangChain v1 agent (create_agent, its tool node, a fake model) under PrecisMiddleware."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections import defaultdict, deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from agent_scenario import (
    RED_LINE,
    REPLAY_WINDOW,
    STEPS_PER_TURN,
    SYSTEM_PROMPT,
    TASK,
    TOOL_DESCRIPTION,
    USER_TURNS,
    WINDOW,
    Meter,
    assistant_text,
    ledger,
    replay_conversation,
    settings,
    tool_output,
    user_text,
)
from integration_users import (
    COMPILED,
    FAILURES,
    TURNS,
    USERS,
    FailingSummarizer,
    assert_conversations_apart,
    assert_one_user_each,
    compile_prompt,
    failing_settings,
    lookup_output,
    thread_settings,
    users_in,
)
from integration_users import user_text as said_by
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.chat_agent_executor import _validate_chat_history

from precis import Session
from precis.core.errors import InvalidInput
from precis.integrations import Sessions
from precis.integrations.langchain import PrecisMiddleware, original, to_precis
from precis.stores import MemoryStore


class RecordingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, recording each request; it accepts tools as they are."""

    meter: Any = None
    tool_schemas: Any = None
    systems: Any = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tool_schemas = [convert_to_openai_tool(t) for t in tools]
        return self

    def _record(self, messages: list[BaseMessage]) -> None:
        system = [m for m in messages if isinstance(m, SystemMessage)]
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        _validate_chat_history(rest)  # LangChain's own check: every call has its ToolMessage
        if self.systems is not None:
            self.systems.append(str(system[0].text) if system else None)
        self.meter.request(
            [to_precis(m) for m in rest], str(system[0].text) if system else None, self.tool_schemas
        )

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self._record(messages)
        return super()._generate(messages, *args, **kwargs)


def _script(meter: Meter, turns: int = USER_TURNS) -> Iterator[AIMessage]:
    step = 0
    for _ in range(turns):
        for _ in range(STEPS_PER_TURN):
            step += 1
            meter.tool_turns += 1
            call = {"name": "run_step", "args": {"step": step}, "id": f"call_{step}"}
            yield AIMessage(content=assistant_text(step), tool_calls=[call])
        yield AIMessage(content=f"Batch done; {step} steps so far, legacy/ untouched.")


def _run_step_tool() -> BaseTool:
    def run_step(step: int) -> str:
        return tool_output(step)

    return StructuredTool.from_function(run_step, description=TOOL_DESCRIPTION)


def _agent(
    sessions: Sessions,
    meter: Meter,
    destructive: bool,
    turns: int = USER_TURNS,
    systems: list[str | None] | None = None,
) -> Any:
    model = RecordingFakeModel(messages=_script(meter, turns), meter=meter, systems=systems)
    middleware = PrecisMiddleware(sessions, destructive=destructive, history_tools=True)
    return create_agent(
        model,
        [_run_step_tool()],
        system_prompt=SYSTEM_PROMPT,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


CONFIG = {"configurable": {"thread_id": "t1"}, "recursion_limit": 100}
# Turns of the scenario a failing summarizer is tried over: enough to pass both watermarks.
FAILING_TURNS = 8


def _check_store(session: Session, state_messages: list[BaseMessage], destructive: bool) -> None:
    history = session.history()
    stored = {m.metadata.get("framework_key"): m for m in history}
    steps = STEPS_PER_TURN * USER_TURNS
    if not destructive:  # the state keeps every original: each one is stored exactly
        assert len(state_messages) == USER_TURNS * (2 * STEPS_PER_TURN + 2)
        for message in state_messages:
            assert original(stored[message.id]) == message
    tool_results = [m for m in history if m.role == "tool"]
    assert len(tool_results) == steps
    for step in (1, 2, steps // 2, steps):
        hits = session.recall(ledger(step))
        assert hits and any(ledger(step) in h.snippet for h in hits), step
    assert session.events(), "a 3,000-token window must have compacted"


def test_a_langchain_agent_runs_200_tool_turns_in_a_3000_token_window() -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings())
    agent = _agent(sessions, meter, destructive=False)
    for turn in range(USER_TURNS):
        state = agent.invoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
    meter.assert_ok(min_tool_turns=200)
    print("langchain (non-destructive, sync):", meter.summary())
    session = Session(sessions.store, sessions.conversation_id("t1"), settings=settings())
    _check_store(session, state["messages"], destructive=False)


def test_the_destructive_form_replaces_the_state_and_keeps_the_originals_in_the_store() -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings())
    agent = _agent(sessions, meter, destructive=True)

    async def run() -> list[BaseMessage]:
        for turn in range(USER_TURNS):
            state = await agent.ainvoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
        return list(state["messages"])

    messages = asyncio.run(run())
    meter.assert_ok(min_tool_turns=200)
    print("langchain (destructive, async):", meter.summary())
    summaries = [m for m in messages if m.additional_kwargs.get("lc_source") == "summarization"]
    assert len(summaries) == 1 and len(messages) < USER_TURNS * (2 * STEPS_PER_TURN + 2)
    assert messages[0].content == TASK
    assert any(RED_LINE in str(m.content) for m in messages)
    sync = Session(sessions.store, sessions.conversation_id("t1"), settings=settings())
    _check_store(sync, messages, destructive=True)


# --- a real conversation, replayed through LangChain's message types ---------------------------


def _replay_script(recorded: list[dict[str, Any]], meter: Meter) -> Iterator[AIMessage]:
    for m in recorded:
        if m["role"] != "assistant":
            continue
        calls = [
            {
                "name": c["function"]["name"],
                "args": json.loads(c["function"]["arguments"]),
                "id": c["id"],
            }
            for c in m.get("tool_calls") or []
        ]
        meter.tool_turns += bool(calls)
        yield AIMessage(content=m["content"] or "", tool_calls=calls)


def _replay_tools(recorded: list[dict[str, Any]]) -> list[BaseTool]:
    """One tool per recorded name; each answers a call with its recorded output."""
    calls = {c["id"]: c for m in recorded for c in m.get("tool_calls") or []}
    outputs: dict[tuple[str, str], deque[str]] = defaultdict(deque)
    for m in recorded:
        if m["role"] == "tool":
            fn = calls[m["tool_call_id"]]["function"]
            key = (fn["name"], json.dumps(json.loads(fn["arguments"]), sort_keys=True))
            outputs[key].append(m["content"])
    tools: list[BaseTool] = []
    for name in sorted({c["function"]["name"] for c in calls.values()}):

        def answer(_name: str = name, **arguments: Any) -> str:
            queue = outputs[(_name, json.dumps(arguments, sort_keys=True))]
            return queue.popleft() if queue else ""

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        tools.append(
            StructuredTool.from_function(answer, name=name, description=name, args_schema=schema)
        )
    return tools


def test_a_real_conversation_replayed_through_langchain_round_trips_every_message() -> None:
    recorded = replay_conversation()
    task = next(m["content"] for m in recorded if m["role"] == "user")
    meter = Meter(REPLAY_WINDOW, required=(task,))
    sessions = Sessions(MemoryStore(), settings=settings(REPLAY_WINDOW))
    model = RecordingFakeModel(messages=_replay_script(recorded, meter), meter=meter)
    agent = create_agent(model, _replay_tools(recorded), middleware=[PrecisMiddleware(sessions)])
    config = {"configurable": {"thread_id": "replay"}, "recursion_limit": 500}
    state = agent.invoke({"messages": [HumanMessage(task)]}, config)
    meter.assert_ok()
    print("langchain replay:", meter.summary())
    messages = state["messages"]
    assert [m.text for m in messages if isinstance(m, ToolMessage)] == [
        m["content"] for m in recorded if m["role"] == "tool"
    ]
    session = Session(sessions.store, "replay")
    stored = {m.metadata.get("framework_key"): m for m in session.history()}
    for message in messages:
        assert original(stored[message.id]) == message
    assert session.events(), "the replay must have compacted"


@pytest.mark.parametrize("query", ["search_history", "read_original"])
def test_the_history_tools_are_offered_as_langchain_tools(query: str) -> None:
    middleware = PrecisMiddleware(Sessions(MemoryStore(), settings=settings()), history_tools=True)
    assert query in {t.name for t in middleware.tools}


# --- many users through one agent ---------------------------------------------------------------


class UsersModel(BaseChatModel):
    """Answers by what it is sent: a lookup after a user message, a reply after its result.
    Records every request; with a barrier, each call waits for the other user's call, so the
    two users' turns run interleaved step by step."""

    seen: Any = None
    barrier: Any = None
    calls: Any = None

    @property
    def _llm_type(self) -> str:
        return "users-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        self.seen.append("\n".join(str(m.text) for m in messages))
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"Noted: {str(last.text)[:60]}")
        else:
            call = {"name": "lookup", "args": {"query": str(last.text)}, "id": next(self.calls)}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.barrier.wait()
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        await self.barrier.wait()
        return self._reply(messages)


def _lookup_tool() -> BaseTool:
    def lookup(query: str) -> str:
        return lookup_output(query)

    return StructuredTool.from_function(lookup, description="Look a record up.")


def _users_agent(sessions: Sessions, barrier: Any, seen: list[str]) -> Any:
    calls = (f"call_{n}" for n in itertools.count())
    model = UsersModel(seen=seen, barrier=barrier, calls=calls)
    return create_agent(
        model,
        [_lookup_tool()],
        system_prompt="You look records up.",
        middleware=[PrecisMiddleware(sessions, history_tools=True)],
        checkpointer=InMemorySaver(),
    )


def _thread(user: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": user}}


def test_two_users_through_one_agent_in_threads_never_see_each_others_messages() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings(), prefix="lc-")
    seen: list[str] = []
    agent = _users_agent(sessions, threading.Barrier(2, timeout=60), seen)
    answers: dict[str, list[str]] = {user: [] for user in USERS}

    def run(user: str) -> None:
        for turn in range(TURNS):
            state = agent.invoke({"messages": [HumanMessage(said_by(user, turn))]}, _thread(user))
            answers[user].append(str(state["messages"][-1].text))

    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(run, user) for user in USERS]:
            done.result()
    assert assert_one_user_each(seen) == 2 * 2 * TURNS
    assert all(len(a) == TURNS and all(x.startswith("Noted") for x in a) for a in answers.values())
    assert_conversations_apart(sessions.store, [f"lc-{u}" for u in USERS])


def test_two_users_through_one_agent_concurrently_never_see_each_others_messages() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings())
    seen: list[str] = []

    async def run() -> None:
        agent = _users_agent(sessions, asyncio.Barrier(2), seen)

        async def user_runs(user: str) -> None:
            for turn in range(TURNS):
                message = HumanMessage(said_by(user, turn))
                await agent.ainvoke({"messages": [message]}, _thread(user))

        await asyncio.gather(*(user_runs(user) for user in USERS))

    asyncio.run(run())
    assert assert_one_user_each(seen) == 2 * 2 * TURNS
    assert_conversations_apart(sessions.store, list(USERS))


def test_the_history_tools_search_only_the_running_threads_conversation() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings())
    agent = _users_agent(sessions, threading.Barrier(1), [])
    for user in USERS:
        agent.invoke({"messages": [HumanMessage(said_by(user, 0))]}, _thread(user))
    search = next(t for t in PrecisMiddleware(sessions, history_tools=True).tools)
    for user, secret in USERS.items():
        found = search.invoke({"query": "API key"}, _thread(user))
        assert secret in found and users_in(found) == {user}, found


def test_a_run_without_a_thread_is_refused_with_one_clear_line() -> None:
    model = UsersModel(seen=[], barrier=threading.Barrier(1), calls=iter(["call_1"]))
    agent = create_agent(
        model, [_lookup_tool()], middleware=[PrecisMiddleware(Sessions(MemoryStore()))]
    )
    with pytest.raises(InvalidInput, match="thread_id"):
        agent.invoke({"messages": [HumanMessage("hello")]})


# --- the session's own system prompt compiler, and a summarizer that fails ----------------------


def test_the_sessions_compile_system_prompt_reaches_the_model() -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings(), compile_system_prompt=compile_prompt)
    systems: list[str | None] = []
    agent = _agent(sessions, meter, destructive=False, turns=FAILING_TURNS, systems=systems)
    for turn in range(FAILING_TURNS):
        agent.invoke({"messages": [HumanMessage(user_text(turn))]}, CONFIG)
    meter.assert_ok()
    assert systems[0] == SYSTEM_PROMPT
    compiled = [s for s in systems if s and COMPILED in s]
    assert compiled and all(s.startswith(SYSTEM_PROMPT) for s in compiled), systems[-1]
    assert Session(sessions.store, "t1").events(), "no compaction made the prompt stale"


@pytest.mark.parametrize("how", FAILURES)
@pytest.mark.parametrize("face", ["invoke", "ainvoke"])
def test_a_failing_summarizer_never_stops_the_agent(how: str, face: str) -> None:
    meter = Meter(WINDOW, required=(TASK,))
    summarizer = FailingSummarizer(how)
    sessions = Sessions(MemoryStore(), settings=failing_settings(settings()), summarizer=summarizer)
    agent = _agent(sessions, meter, destructive=False, turns=FAILING_TURNS)
    answers = []

    async def arun() -> None:
        for turn in range(FAILING_TURNS):
            message = HumanMessage(user_text(turn))
            answers.append((await agent.ainvoke({"messages": [message]}, CONFIG))["messages"][-1])

    if face == "ainvoke":
        asyncio.run(arun())
    else:
        for turn in range(FAILING_TURNS):
            message = HumanMessage(user_text(turn))
            answers.append(agent.invoke({"messages": [message]}, CONFIG)["messages"][-1])
    assert [str(a.text).startswith("Batch done") for a in answers] == [True] * FAILING_TURNS
    meter.assert_ok(min_tool_turns=FAILING_TURNS * STEPS_PER_TURN)
    assert summarizer.calls, "the summarizer was never asked"
    history = Session(sessions.store, "t1").history()
    assert len([m for m in history if m.role == "tool"]) == FAILING_TURNS * STEPS_PER_TURN


def test_a_thread_let_go_past_max_open_goes_on_without_storing_anything_twice() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings(), max_open=1)
    agent = _users_agent(sessions, threading.Barrier(1), [])
    first = sessions.session("alpha")
    for turn in range(3):
        for user in USERS:  # each turn of one user lets the other's session go
            agent.invoke({"messages": [HumanMessage(said_by(user, turn))]}, _thread(user))
    assert sessions.session("alpha") is not first
    for user in USERS:
        history = sessions.store.history(user)
        keys = [m.metadata["framework_key"] for m in history if "framework_key" in m.metadata]
        assert len(keys) == len(set(keys)) == 3 * 4, user
