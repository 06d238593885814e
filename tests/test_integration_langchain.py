"""A real LangChain v1 agent (create_agent, its tool node, a fake model) under PrecisMiddleware."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict, deque
from collections.abc import Iterator
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
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.chat_agent_executor import _validate_chat_history

from precis import Session
from precis.integrations import Sessions
from precis.integrations.langchain import PrecisMiddleware, original, to_precis
from precis.stores import MemoryStore


class RecordingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, recording each request; it accepts tools as they are."""

    meter: Any = None
    tool_schemas: Any = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tool_schemas = [convert_to_openai_tool(t) for t in tools]
        return self

    def _record(self, messages: list[BaseMessage]) -> None:
        system = [m for m in messages if isinstance(m, SystemMessage)]
        rest = [m for m in messages if not isinstance(m, SystemMessage)]
        _validate_chat_history(rest)  # LangChain's own check: every call has its ToolMessage
        self.meter.request(
            [to_precis(m) for m in rest], str(system[0].text) if system else None, self.tool_schemas
        )

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self._record(messages)
        return super()._generate(messages, *args, **kwargs)


def _script(meter: Meter) -> Iterator[AIMessage]:
    step = 0
    for _ in range(USER_TURNS):
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


def _agent(sessions: Sessions, meter: Meter, destructive: bool) -> Any:
    model = RecordingFakeModel(messages=_script(meter), meter=meter)
    middleware = PrecisMiddleware(sessions, destructive=destructive, history_tools=True)
    return create_agent(
        model,
        [_run_step_tool()],
        system_prompt=SYSTEM_PROMPT,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


CONFIG = {"configurable": {"thread_id": "t1"}, "recursion_limit": 100}


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
