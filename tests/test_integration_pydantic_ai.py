"""A real pydantic-ai agent (its FunctionModel, its tool execution) under PrecisCapability."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import defaultdict, deque
from dataclasses import replace
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
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    _dangling_tool_calls_to_repair,
    _drop_orphaned_tool_results,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import Tool

from precis import AsyncSession, Message
from precis.engine.results import CompactionStats
from precis.integrations import Sessions
from precis.integrations._common import PRECIS_KINDS
from precis.integrations.pydantic_ai import (
    PrecisCapability,
    message_key,
    original,
    precis_history_processor,
    to_precis,
)
from precis.session._behind import Behind
from precis.stores import MemoryStore

# Turns of the scenario a failing summarizer is tried over: enough to pass both watermarks.
FAILING_TURNS = 8


def _check_request(messages: list[ModelMessage], info: AgentInfo, meter: Meter) -> None:
    """pydantic-ai's own repairs must find nothing to do, and the messages must round-trip."""
    assert _drop_orphaned_tool_results(messages) is messages, "an orphan tool return was sent"
    assert _dangling_tool_calls_to_repair(messages, repair_last_response=True) == {}
    dumped = ModelMessagesTypeAdapter.dump_json(messages)
    assert ModelMessagesTypeAdapter.validate_json(dumped) == messages
    tools = [
        {"name": t.name, "description": t.description or "", "parameters": t.parameters_json_schema}
        for t in info.function_tools
    ]
    flat: list[Message] = [m for message in messages for m in to_precis(message)]
    meter.request(flat, info.instructions, tools)


def _scripted_model(meter: Meter, systems: list[str | None] | None = None) -> FunctionModel:
    state = {"step": 0, "in_turn": 0}

    # Async, as the model and the tool below: pydantic-ai runs a sync one on a worker thread,
    # and 200 turns of thread hops made this file wait minutes for a core on a loaded machine.
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _check_request(messages, info, meter)
        if systems is not None:
            systems.append(info.instructions)
        last = messages[-1]
        if any(isinstance(p, UserPromptPart) for p in last.parts):
            state["in_turn"] = 0
        if state["in_turn"] < STEPS_PER_TURN:
            state["in_turn"] += 1
            state["step"] += 1
            step = state["step"]
            meter.tool_turns += 1
            return ModelResponse(
                parts=[
                    TextPart(assistant_text(step)),
                    ToolCallPart("run_step", {"step": step}, tool_call_id=f"call_{step}"),
                ]
            )
        return ModelResponse(
            parts=[TextPart(f"Batch done; {state['step']} steps, legacy/ untouched.")]
        )

    return FunctionModel(respond)


def _run_step() -> Tool[Any]:
    async def run_step(step: int) -> str:
        return tool_output(step)

    return Tool(run_step, description=TOOL_DESCRIPTION)


async def _run(
    agent: Agent[Any, str], conversation: str = "pai", turns: int = USER_TURNS
) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for turn in range(turns):
        result = await agent.run(
            user_text(turn), message_history=history, conversation_id=conversation
        )
        history = result.all_messages()
    return history


def _stored(history: list[Message]) -> dict[str, list[Message]]:
    groups: dict[str, list[Message]] = defaultdict(list)
    for m in history:
        if m.metadata.get("framework_key"):
            groups[m.metadata["framework_key"]].append(m)
    return groups


async def _check_store(session: AsyncSession) -> None:
    history = await session.history()
    steps = STEPS_PER_TURN * USER_TURNS
    assert len([m for m in history if m.role == "tool"]) == steps
    for step in (1, 2, steps // 2, steps):
        hits = await session.recall(ledger(step))
        assert any(ledger(step) in h.snippet for h in hits), step
    assert await session.events(), "a 3,000-token window must have compacted"
    # precis's summaries and markers come back in requests pydantic-ai merges with the next
    # prompt; none is stored again as what the user said.
    copies = [m.id for m in history if m.kind not in PRECIS_KINDS and _written_by_precis(m)]
    assert copies == [], copies[:3]


def _written_by_precis(message: Message) -> bool:
    text = message.content
    return text.startswith('{"type":"system_alert"') or "earlier messages omitted" in text


@pytest.mark.parametrize(
    ("native", "low_watermark"),
    [
        pytest.param(True, 0.5, id="native"),
        pytest.param(True, None, id="native-letta-policy"),
        pytest.param(False, 0.5, id="whole-history"),
    ],
)
def test_a_pydantic_ai_agent_runs_200_tool_turns_in_a_3000_token_window(
    native: bool, low_watermark: float | None
) -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=replace(settings(), low_watermark=low_watermark))
    session = sessions.session("pai")
    agent = Agent(
        _scripted_model(meter),
        instructions=SYSTEM_PROMPT,
        tools=[_run_step()],
        capabilities=[PrecisCapability(sessions, history_tools=True, native=native)],
    )
    messages = asyncio.run(_run(agent))
    meter.assert_ok(min_tool_turns=200)
    print("pydantic-ai (capability):", meter.summary())
    whole = USER_TURNS * (2 * STEPS_PER_TURN + 2)
    stored = _stored(asyncio.run(session.history()))
    if native:  # compacted as pydantic-ai compacts: the summary a CompactionPart, in a request
        assert len(messages) < whole
        parts = [p for m in messages for p in m.parts if isinstance(p, CompactionPart)]
        assert len(parts) == 1 and parts[0].provider_name is None and parts[0].content
        messages = [m for m in messages if parts[0] not in m.parts]
    else:
        assert len(messages) == whole  # the run's history is whole
    for message in messages:
        assert message_key(message) in stored
    asyncio.run(_check_store(session))


def test_the_history_processor_replaces_the_history_and_is_idempotent() -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings())
    session = sessions.session("pai")
    agent = Agent(
        _scripted_model(meter),
        instructions=SYSTEM_PROMPT,
        tools=[_run_step()],
        capabilities=[ProcessHistory(precis_history_processor(sessions))],
    )
    messages = asyncio.run(_run(agent))
    meter.assert_ok(min_tool_turns=200)
    print("pydantic-ai (ProcessHistory):", meter.summary())
    summaries = [
        m for m in messages if (m.metadata or {}).get("precis", {}).get("kind") == "summary"
    ]
    assert len(summaries) == 1 and len(messages) < USER_TURNS * (2 * STEPS_PER_TURN + 2)
    assert any(
        RED_LINE in str(p.content) for m in messages for p in m.parts if hasattr(p, "content")
    )
    assert any(getattr(p, "content", None) == TASK for p in messages[0].parts)
    asyncio.run(_check_store(session))


# --- a real conversation, replayed through pydantic-ai's message types -------------------------


def test_a_real_conversation_replayed_through_pydantic_ai_round_trips_every_message() -> None:
    recorded = replay_conversation()
    task = next(m["content"] for m in recorded if m["role"] == "user")
    meter = Meter(REPLAY_WINDOW, required=(task,))
    replies = deque(m for m in recorded if m["role"] == "assistant")
    calls = {c["id"]: c for m in recorded for c in m.get("tool_calls") or []}
    outputs = {m["tool_call_id"]: m["content"] for m in recorded if m["role"] == "tool"}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _check_request(messages, info, meter)
        m = replies.popleft()
        parts: list[Any] = [TextPart(m["content"])] if m["content"] else []
        for c in m.get("tool_calls") or []:
            fn = c["function"]
            parts.append(
                ToolCallPart(fn["name"], json.loads(fn["arguments"]), tool_call_id=c["id"])
            )
        meter.tool_turns += len(parts) > 1 or not m["content"]
        return ModelResponse(parts=parts)

    def make_tool(name: str) -> Tool[Any]:
        async def answer(ctx: Any, **arguments: Any) -> str:
            return outputs.get(ctx.tool_call_id, "")

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        return Tool.from_schema(
            answer, name=name, description=name, json_schema=schema, takes_ctx=True
        )

    names = sorted({c["function"]["name"] for c in calls.values()})
    sessions = Sessions(MemoryStore(), settings=settings(REPLAY_WINDOW))
    session = sessions.session("replay")
    agent = Agent(
        FunctionModel(respond),
        tools=[make_tool(n) for n in names],
        # The run's history left whole, to compare every tool return with the original's.
        capabilities=[PrecisCapability(sessions, native=False)],
    )

    async def run() -> list[ModelMessage]:
        result = await agent.run(task, conversation_id="replay")
        return result.all_messages()

    messages = asyncio.run(run())
    meter.assert_ok()
    print("pydantic-ai replay:", meter.summary())
    returns = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    assert returns == [m["content"] for m in recorded if m["role"] == "tool"]
    stored = _stored(asyncio.run(session.history()))
    for message in messages:
        group = stored[message_key(message)]
        assert original(group) == message
    assert asyncio.run(session.events()), "the replay must have compacted"


@pytest.mark.parametrize("name", ["search_history", "read_original"])
def test_the_history_tools_are_offered_as_pydantic_ai_tools(name: str) -> None:
    sessions = Sessions(MemoryStore(), settings=settings())
    toolset = PrecisCapability(sessions, history_tools=True).get_toolset()
    assert name in toolset.tools


# --- many users through one agent ---------------------------------------------------------------


def _users_model(seen: list[str], barrier: asyncio.Barrier) -> FunctionModel:
    """Answers by what it is sent (a lookup after a prompt, a reply after its result); every
    call waits for the other user's, so the two users' runs interleave step by step."""
    calls = itertools.count()

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await barrier.wait()
        flat = [m for message in messages for m in to_precis(message)]
        seen.append("\n".join([info.instructions or "", *(m.content for m in flat)]))
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"Noted: {str(last.content)[:60]}")])
        query = str(getattr(last, "content", ""))
        call = ToolCallPart("lookup", {"query": query}, tool_call_id=f"call_{next(calls)}")
        return ModelResponse(parts=[call])

    return FunctionModel(respond)


def _lookup(query: str) -> str:
    """Look a record up."""
    return lookup_output(query)


def test_two_users_through_one_agent_concurrently_never_see_each_others_messages() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings())
    seen: list[str] = []
    histories: dict[str, list[ModelMessage]] = {user: [] for user in USERS}

    async def run() -> None:
        agent = Agent(
            _users_model(seen, asyncio.Barrier(2)),
            instructions="You look records up.",
            tools=[Tool(_lookup, name="lookup")],
            capabilities=[PrecisCapability(sessions, history_tools=True)],
        )

        async def user_runs(user: str) -> None:
            for turn in range(TURNS):
                # No conversation_id: pydantic-ai makes one for the first run and finds it on
                # the message history after.
                result = await agent.run(said_by(user, turn), message_history=histories[user])
                histories[user] = result.all_messages()
                assert result.output.startswith("Noted")

        await asyncio.gather(*(user_runs(user) for user in USERS))

    asyncio.run(run())
    assert assert_one_user_each(seen) == 2 * 2 * TURNS
    # pydantic-ai's compaction merges the leading requests into one it stamps with no conversation.
    conversations = {
        user: {
            m.conversation_id
            for m in histories[user]
            if not any(isinstance(p, CompactionPart) for p in m.parts)
        }
        for user in USERS
    }
    assert all(len(ids) == 1 and None not in ids for ids in conversations.values())
    expected = [sessions.conversation_id(next(iter(ids))) for ids in conversations.values()]
    assert_conversations_apart(sessions.store, expected)


def test_the_history_tools_search_only_the_runs_conversation() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings())
    found: dict[str, str] = {}

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            found[str(last.tool_call_id)] = str(last.content)
            return ModelResponse(parts=[TextPart("done")])
        call_id = f"search_{len(found)}"
        search = ToolCallPart("search_history", {"query": "API key"}, tool_call_id=call_id)
        return ModelResponse(parts=[search])

    agent = Agent(
        FunctionModel(respond), capabilities=[PrecisCapability(sessions, history_tools=True)]
    )

    async def run() -> None:
        for user in USERS:
            await agent.run(said_by(user, 0), conversation_id=user)

    asyncio.run(run())
    assert [users_in(text) for text in found.values()] == [{user} for user in USERS], found


def test_a_processor_keys_its_conversation_by_the_run_too() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings())
    seen: list[str] = []

    async def run() -> None:
        agent = Agent(
            _users_model(seen, asyncio.Barrier(2)),
            tools=[Tool(_lookup, name="lookup")],
            capabilities=[ProcessHistory(precis_history_processor(sessions))],
        )

        async def user_runs(user: str) -> None:
            history: list[ModelMessage] = []
            for turn in range(TURNS):
                result = await agent.run(
                    said_by(user, turn), message_history=history, conversation_id=user
                )
                history = result.all_messages()

        await asyncio.gather(*(user_runs(user) for user in USERS))

    asyncio.run(run())
    assert_one_user_each(seen)
    assert_conversations_apart(sessions.store, list(USERS))


# --- the session's own system prompt compiler, and a summarizer that fails ----------------------


def test_the_sessions_compile_system_prompt_reaches_the_model() -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings(), compile_system_prompt=compile_prompt)
    systems: list[str | None] = []
    agent = Agent(
        _scripted_model(meter, systems),
        instructions=SYSTEM_PROMPT,
        tools=[_run_step()],
        capabilities=[PrecisCapability(sessions)],
    )
    asyncio.run(_run(agent, turns=FAILING_TURNS))
    meter.assert_ok()
    assert systems[0] == SYSTEM_PROMPT
    compiled = [s for s in systems if s and COMPILED in s]
    assert compiled and all(s.startswith(SYSTEM_PROMPT) for s in compiled), systems[-1]


@pytest.mark.parametrize("how", FAILURES)
def test_a_failing_summarizer_never_stops_the_agent(how: str) -> None:
    meter = Meter(WINDOW, required=(TASK,))
    summarizer = FailingSummarizer(how)
    sessions = Sessions(MemoryStore(), settings=failing_settings(settings()), summarizer=summarizer)
    agent = Agent(
        _scripted_model(meter),
        instructions=SYSTEM_PROMPT,
        tools=[_run_step()],
        # The run's history left whole, to count every answer the agent gave.
        capabilities=[PrecisCapability(sessions, native=False)],
    )
    messages = asyncio.run(_run(agent, turns=FAILING_TURNS))
    answers = [m for m in messages if isinstance(m, ModelResponse) and not m.tool_calls]
    assert len(answers) == FAILING_TURNS and all("Batch done" in a.text for a in answers)
    meter.assert_ok(min_tool_turns=FAILING_TURNS * STEPS_PER_TURN)
    assert summarizer.calls, "the summarizer was never asked"
    history = asyncio.run(sessions.session("pai").history())
    assert len([m for m in history if m.role == "tool"]) == FAILING_TURNS * STEPS_PER_TURN


# --- summaries that take several model calls to come, behind the turns --------------------------


class _PacedMeter(Meter):
    """A meter that tells the paced summarizer of every request."""

    paced: _Paced | None = None

    def request(self, messages: Any, system: str | None, tools: Any) -> None:
        super().request(messages, system, tools)
        if self.paced is not None:
            self.paced.tick()


class _Paced:
    """A model summary that answers only after `calls` more model requests went out, or at once
    when a turn waits for it (the hard watermark): the turns outrun it, as they outrun a slow
    model, chosen by the run's own steps and not by a clock."""

    name = "paced"

    def __init__(self, meter: _PacedMeter, calls: int) -> None:
        self.meter, self.calls = meter, calls
        self.waited = 0
        self.waiting = (
            0  # turns waiting for the summary now: it answers at once, asked before or after
        )
        self.asked = 0
        self.over = False  # the run is over: no request will come, a summary asked answers now
        self._changed: asyncio.Event | None = None

    def tick(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def summarize(self, request: Any) -> str:
        raise AssertionError("an async session awaits asummarize")

    async def asummarize(self, request: Any) -> str:
        self.asked += 1
        start = len(self.meter.tokens)
        self._changed = asyncio.Event()
        while len(self.meter.tokens) < start + self.calls and not (self.waiting or self.over):
            self._changed.clear()
            await self._changed.wait()
        return "The agent migrated the tables so far, one step at a time."


class _Waits(Behind):
    """`Behind` that tells the paced summarizer when a turn waits for it."""

    def __init__(self, conversation_id: str, paced: _Paced) -> None:
        super().__init__(conversation_id)
        self.paced = paced

    async def wait(self) -> list[CompactionStats]:
        self.paced.waited += 1
        self.paced.waiting += 1
        self.paced.tick()
        try:
            return await super().wait()
        finally:
            self.paced.waiting -= 1


@pytest.mark.parametrize("native", [True, False], ids=["native", "whole-history"])
def test_no_request_passes_the_window_while_summaries_run_behind_the_turns(native: bool) -> None:
    meter = _PacedMeter(WINDOW)
    paced = meter.paced = _Paced(meter, calls=6)
    store = MemoryStore()
    sessions = Sessions(store, settings=settings(), summarizer=paced)
    assert sessions.settings is not None and sessions.settings.background_compaction
    session = sessions.session("pai")
    session.behind = _Waits(session.conversation_id, paced)
    agent = Agent(
        _scripted_model(meter),
        instructions=SYSTEM_PROMPT,
        tools=[_run_step()],
        capabilities=[PrecisCapability(sessions, history_tools=True, native=native)],
    )

    async def run() -> None:
        await _run(agent)
        paced.over = True  # closing waits for the summary behind; no more requests will pace it
        paced.tick()
        await sessions.aclose()

    asyncio.run(run())
    meter.assert_ok(min_tool_turns=200)  # every request within the window, the red line in each
    print("pydantic-ai (paced summaries):", meter.summary(), f"{paced.waited} turns waited")
    assert paced.asked and max(meter.tokens) > (settings().threshold or 0)  # turns ran beside one
    # Every summary was the model's own: none timed out into the extractive brief.
    summaries = [m for m in store.history("pai") if m.kind == "summary"]
    assert summaries and all("one step at a time" in m.content for m in summaries)
