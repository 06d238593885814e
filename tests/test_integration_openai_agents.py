"""A real Agents SDK run (Runner, its tool execution, a fake Model) over PrecisSession."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
from agent_scenario import (
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
from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    RunConfig,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.models.chatcmpl_converter import Converter
from agents.models.interface import Model
from agents.run_internal.items import drop_orphan_function_calls
from agents.testing.model import assistant_message, function_call
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
)
from integration_users import user_text as said_by

from precis import Message
from precis.integrations import Sessions
from precis.integrations.openai_agents import PrecisSession, to_precis
from precis.stores import MemoryStore

Respond = Callable[[list[Any]], list[Any]]
# Turns of the scenario a failing summarizer is tried over: enough to pass both watermarks.
FAILING_TURNS = 8
set_tracing_disabled(True)  # no key, no export


class FakeModel(Model):
    """A model that answers from a script and checks each request the SDK's way."""

    def __init__(self, respond: Respond, meter: Meter) -> None:
        self.respond = respond
        self.meter = meter
        self.calls = 0
        self.systems: list[str | None] = []

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        assert drop_orphan_function_calls(items) == items, "a call without its output was sent"
        chat = Converter.items_to_messages(items)  # the SDK's own conversion for chat models
        flat: list[Message] = [Message.from_openai(m) for m in chat if m["role"] != "system"]
        schemas = [
            {"name": t.name, "description": t.description, "parameters": t.params_json_schema}
            for t in tools
            if isinstance(t, FunctionTool)
        ]
        self.meter.request(flat, system_instructions, schemas)
        self.systems.append(system_instructions)
        self.calls += 1
        return ModelResponse(
            output=self.respond(items), usage=Usage(), response_id=f"resp_{self.calls}"
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _scripted(meter: Meter) -> Respond:
    state = {"step": 0, "in_turn": 0}

    def respond(items: list[Any]) -> list[Any]:
        last = items[-1]
        if last.get("role") == "user":
            state["in_turn"] = 0
        if state["in_turn"] < STEPS_PER_TURN:
            state["in_turn"] += 1
            state["step"] += 1
            step = state["step"]
            meter.tool_turns += 1
            return [
                assistant_message(assistant_text(step), item_id=f"msg_{step}"),
                function_call("run_step", {"step": step}, call_id=f"call_{step}"),
            ]
        return [assistant_message(f"Batch done; {state['step']} steps, legacy/ untouched.")]

    return respond


@function_tool(description_override=TOOL_DESCRIPTION)
def run_step(step: int) -> str:
    return tool_output(step)


def test_an_agents_sdk_run_keeps_200_tool_turns_in_a_3000_token_window() -> None:
    meter = Meter(WINDOW)
    session = PrecisSession("sdk", Sessions(MemoryStore(), settings=settings()))
    precis = session.precis
    agent = Agent(
        name="migrator",
        instructions=SYSTEM_PROMPT,
        tools=[run_step],
        model=FakeModel(_scripted(meter), meter),
    )
    config = RunConfig(call_model_input_filter=session.input_filter)

    async def run() -> None:
        for turn in range(USER_TURNS):
            await Runner.run(
                agent, user_text(turn), session=session, run_config=config, max_turns=20
            )

    asyncio.run(run())
    meter.assert_ok(min_tool_turns=200)
    print("openai-agents:", meter.summary())
    history = asyncio.run(precis.history())
    steps = STEPS_PER_TURN * USER_TURNS
    assert len([m for m in history if m.role == "tool"]) == steps
    for step in (1, 2, steps // 2, steps):
        hits = asyncio.run(precis.recall(ledger(step)))
        assert any(ledger(step) in h.snippet for h in hits), step
    assert asyncio.run(precis.events())


def test_pop_item_returns_the_last_item_as_added_and_clear_empties_the_context() -> None:
    session = PrecisSession("sdk", Sessions(MemoryStore(), settings=settings()))
    precis = session.precis
    items: list[Any] = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}],
        },
    ]

    async def run() -> None:
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.pop_item() == items[2]
        assert await session.get_items() == items[:1]  # no reasoning item without its follower
        assert await session.pop_item() == items[1]
        assert await session.pop_item() == items[0]
        assert await session.pop_item() is None
        await session.add_items(items)
        await session.clear_session()
        assert await session.get_items() == []
        assert len(await precis.recall("hello")) == 2  # every original stays searchable

    asyncio.run(run())


def test_calls_and_outputs_pair_by_call_id_for_every_call_type() -> None:
    pairs = [
        ("function_call", {"name": "f", "arguments": "{}"}, "function_call_output"),
        ("custom_tool_call", {"name": "c", "input": "x"}, "custom_tool_call_output"),
        ("shell_call", {"action": {"commands": ["ls"]}}, "shell_call_output"),
        (
            "apply_patch_call",
            {"operation": {"type": "delete_file", "path": "a"}},
            "apply_patch_call_output",
        ),
        ("computer_call", {"action": {"type": "click"}}, "computer_call_output"),
        (
            "local_shell_call",
            {"action": {"type": "exec", "command": ["ls"]}},
            "local_shell_call_output",
        ),
        ("tool_search_call", {"arguments": {"q": "x"}}, "tool_search_output"),
    ]
    items: list[Any] = [{"role": "user", "content": "go"}]
    for n, (call, fields, _) in enumerate(pairs):
        items.append({"type": "reasoning", "id": f"rs_{n}", "summary": []})
        items.append({"type": call, "call_id": f"c{n}", **fields})
    for n, (_, _, output) in enumerate(pairs):
        items.append({"type": output, "call_id": f"c{n}", "output": "ok"})
    messages = to_precis(items)
    assert [m.role for m in messages] == ["user", "assistant", *["tool"] * len(pairs)]
    assert [c.id for c in messages[1].tool_calls] == [f"c{n}" for n in range(len(pairs))]
    assert [m.tool_call_id for m in messages[2:]] == [f"c{n}" for n in range(len(pairs))]


# --- a real conversation, replayed through the SDK's item types ---------------------------------


def test_a_real_conversation_replayed_through_the_agents_sdk_round_trips_every_item() -> None:
    recorded = replay_conversation()
    task = next(m["content"] for m in recorded if m["role"] == "user")
    meter = Meter(REPLAY_WINDOW, required=(task,))
    replies = deque(m for m in recorded if m["role"] == "assistant")
    outputs = {m["tool_call_id"]: m["content"] for m in recorded if m["role"] == "tool"}
    names = sorted({c["function"]["name"] for m in recorded for c in m.get("tool_calls") or []})

    def respond(items: list[Any]) -> list[Any]:
        m = replies.popleft()
        out: list[Any] = (
            [assistant_message(m["content"], item_id=f"msg_{len(replies)}")] if m["content"] else []
        )
        for c in m.get("tool_calls") or []:
            out.append(
                function_call(c["function"]["name"], c["function"]["arguments"], call_id=c["id"])
            )
        meter.tool_turns += bool(m.get("tool_calls"))
        return out

    def make_tool(name: str) -> FunctionTool:
        async def invoke(ctx: Any, arguments: str) -> str:
            return outputs.get(ctx.tool_call_id, "")

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        return FunctionTool(
            name=name,
            description=name,
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    session = PrecisSession("replay", Sessions(MemoryStore(), settings=settings(REPLAY_WINDOW)))
    precis = session.precis
    agent = Agent(
        name="replay", tools=[make_tool(n) for n in names], model=FakeModel(respond, meter)
    )
    config = RunConfig(call_model_input_filter=session.input_filter)

    async def run() -> Any:
        return await Runner.run(agent, task, session=session, run_config=config, max_turns=200)

    result = asyncio.run(run())
    meter.assert_ok()
    print("openai-agents replay:", meter.summary())
    produced = [i.to_input_item() for i in result.new_items]
    stored = [
        item for m in asyncio.run(precis.history()) for item in m.metadata.get("framework_raw", [])
    ]
    assert stored[0] == {"content": task, "role": "user"}
    assert [json.dumps(i, sort_keys=True) for i in stored[1:]] == [
        json.dumps(
            dict(i) if isinstance(i, dict) else i.model_dump(exclude_unset=True), sort_keys=True
        )
        for i in produced
    ]
    assert [i["output"] for i in stored if i.get("type") == "function_call_output"] == [
        m["content"] for m in recorded if m["role"] == "tool"
    ]
    assert asyncio.run(precis.events()), "the replay must have compacted"


# --- many users through one agent ---------------------------------------------------------------


class UsersModel(Model):
    """Answers by what it is sent (a lookup after a user message, a reply after its output);
    every call waits for the other user's, so the two users' runs interleave step by step."""

    def __init__(self, barrier: asyncio.Barrier) -> None:
        self.barrier = barrier
        self.seen: list[str] = []
        self.ids = itertools.count()

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        await self.barrier.wait()
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        texts = [m.content for m in to_precis(items)]
        self.seen.append("\n".join([system_instructions or "", *texts]))
        n = next(self.ids)
        last = items[-1]
        if last.get("type") == "function_call_output":
            output = [assistant_message(f"Noted: {str(last['output'])[:60]}")]
        else:
            query = str(last.get("content"))
            output = [function_call("lookup", {"query": query}, call_id=f"call_{n}")]
        return ModelResponse(output=output, usage=Usage(), response_id=f"resp_{n}")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def lookup(query: str) -> str:
    """Look a record up."""
    return lookup_output(query)


def test_two_users_through_one_agent_concurrently_never_see_each_others_messages() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings(), prefix="sdk-")

    async def run() -> list[str]:
        model = UsersModel(asyncio.Barrier(2))
        agent = Agent(
            name="clerk", instructions="You look records up.", tools=[lookup], model=model
        )

        async def user_runs(user: str) -> None:
            for turn in range(TURNS):
                session = PrecisSession(user, sessions)  # one per request, as a service makes
                config = RunConfig(call_model_input_filter=session.input_filter)
                result = await Runner.run(
                    agent, said_by(user, turn), session=session, run_config=config
                )
                assert str(result.final_output).startswith("Noted")

        await asyncio.gather(*(user_runs(user) for user in USERS))
        return model.seen

    seen = asyncio.run(run())
    assert assert_one_user_each(seen) == 2 * 2 * TURNS
    assert_conversations_apart(sessions.store, [f"sdk-{u}" for u in USERS])


# --- the session's own system prompt compiler, and a summarizer that fails ----------------------


def _run_scenario(sessions: Sessions, meter: Meter, turns: int) -> FakeModel:
    model = FakeModel(_scripted(meter), meter)
    agent = Agent(name="migrator", instructions=SYSTEM_PROMPT, tools=[run_step], model=model)

    async def run() -> None:
        for turn in range(turns):
            session = PrecisSession("sdk", sessions)
            config = RunConfig(call_model_input_filter=session.input_filter)
            result = await Runner.run(
                agent, user_text(turn), session=session, run_config=config, max_turns=20
            )
            assert str(result.final_output).startswith("Batch done")

    asyncio.run(run())
    return model


def test_the_sessions_compile_system_prompt_reaches_the_model() -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings(), compile_system_prompt=compile_prompt)
    systems = _run_scenario(sessions, meter, FAILING_TURNS).systems
    meter.assert_ok()
    assert systems[0] == SYSTEM_PROMPT
    compiled = [s for s in systems if s and COMPILED in s]
    assert compiled and all(s.startswith(SYSTEM_PROMPT) for s in compiled), systems[-1]


@pytest.mark.parametrize("how", FAILURES)
def test_a_failing_summarizer_never_stops_the_agent(how: str) -> None:
    meter = Meter(WINDOW, required=(TASK,))
    summarizer = FailingSummarizer(how)
    sessions = Sessions(MemoryStore(), settings=failing_settings(settings()), summarizer=summarizer)
    _run_scenario(sessions, meter, FAILING_TURNS)
    meter.assert_ok(min_tool_turns=FAILING_TURNS * STEPS_PER_TURN)
    assert summarizer.calls, "the summarizer was never asked"
    history = asyncio.run(sessions.session("sdk").history())
    assert len([m for m in history if m.role == "tool"]) == FAILING_TURNS * STEPS_PER_TURN
