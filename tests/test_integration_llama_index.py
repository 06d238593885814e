"""A real LlamaIndex FunctionAgent (its workflow, tool calls, a scripted FunctionCallingLLM) with
a PrecisMemory."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_scenario import (
    RED_LINE,
    STEPS_PER_TURN,
    SYSTEM_PROMPT,
    TASK,
    TOOL_DESCRIPTION,
    USER_TURNS,
    WINDOW,
    Meter,
    assistant_text,
    ledger,
    settings,
    tool_output,
    user_text,
)
from integration_users import (
    FAILURES,
    TURNS,
    USERS,
    FailingSummarizer,
    assert_conversations_apart,
    assert_one_user_each,
    failing_settings,
    lookup_output,
    thread_settings,
    users_in,
)
from integration_users import user_text as said_by
from llama_index.core.agent.workflow import AgentStream, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from precis.integrations import Sessions
from precis.integrations.llama_index import (
    PrecisMemory,
    _tool_dicts,
    keyed,
    precis_tools,
    to_precis,
)
from precis.stores import MemoryStore, open_store

# LlamaIndex's workflows look their steps up with `inspect.getmembers` on the pydantic agent.
pytestmark = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecatedSince20",
    "ignore::pydantic.warnings.PydanticDeprecatedSince211",
)

# What one run's own tool steps take: a FunctionAgent sends them besides the memory's view.
RUN_ROOM = 1300


def memory_settings() -> Any:
    return settings(WINDOW - RUN_ROOM)


def _measure(meter: Meter, messages: list[ChatMessage], tools: Any) -> None:
    system = messages[0].content if messages and messages[0].role == MessageRole.SYSTEM else None
    rest = messages[1:] if system is not None else messages
    precis = [to_precis(m, key) for key, m in keyed(rest, {})]
    meter.request(precis, system, _tool_dicts(tools or []))


def _script(meter: Meter, turns: int = USER_TURNS) -> Iterator[ChatMessage]:
    step = 0
    for _ in range(turns):
        for _ in range(STEPS_PER_TURN):
            step += 1
            meter.tool_turns += 1
            call = ToolCallBlock(
                tool_call_id=f"call_{step}", tool_name="run_step", tool_kwargs={"step": step}
            )
            yield ChatMessage(
                role=MessageRole.ASSISTANT, blocks=[TextBlock(text=assistant_text(step)), call]
            )
        yield ChatMessage(
            role=MessageRole.ASSISTANT,
            content=f"Batch done; {step} steps so far, legacy/ untouched.",
        )


def _model(meter: Meter, script: Iterator[ChatMessage], streaming: bool) -> MockFunctionCallingLLM:
    """LlamaIndex's scripted function-calling model: measures each request; streaming, it sends
    each answer's text in two growing chunks before the whole."""

    def answer(messages: list[ChatMessage], **kwargs: Any) -> Any:
        _measure(meter, list(messages), kwargs.get("tools"))
        reply = next(script)
        if not streaming:
            return reply

        async def chunks() -> AsyncIterator[ChatMessage]:
            text = reply.content or ""
            yield ChatMessage(role=MessageRole.ASSISTANT, content=text[: len(text) // 2])
            yield reply

        return chunks()

    return MockFunctionCallingLLM(response_generator=answer, is_chat_model=True)


def run_step(step: int) -> str:
    return tool_output(step)


run_step.__doc__ = TOOL_DESCRIPTION


def _agent(llm: MockFunctionCallingLLM, streaming: bool = False) -> FunctionAgent:
    tools = [FunctionTool.from_defaults(run_step), *precis_tools()]
    return FunctionAgent(tools=tools, llm=llm, system_prompt=SYSTEM_PROMPT, streaming=streaming)


def _memory(sessions: Sessions, session_id: str, agent: FunctionAgent) -> PrecisMemory:
    return PrecisMemory.from_defaults(
        sessions=sessions,
        session_id=session_id,
        system_prompt=SYSTEM_PROMPT,
        tools=[t for t in agent.tools or [] if not isinstance(t, type)],  # type: ignore[misc]
    )


async def _turn(agent: FunctionAgent, text: str, memory: PrecisMemory) -> tuple[str, int]:
    handler = agent.run(user_msg=text, memory=memory, max_iterations=50)
    deltas = 0
    async for event in handler.stream_events():
        if isinstance(event, AgentStream) and event.delta:
            deltas += 1
    result = await handler
    return str(result.response.content), deltas


def _check_store(sessions: Sessions, session_id: str, steps: int) -> None:
    store = sessions.store
    conversation = sessions.conversation_id(session_id)
    history = store.history(conversation)
    assert len([m for m in history if m.role == "tool"]) == steps
    keys = [m.metadata["framework_key"] for m in history if "framework_key" in m.metadata]
    assert len(keys) == len(set(keys))
    for step in (1, 2, steps // 2, steps):
        hits = store.recall(conversation, ledger(step), 5)
        assert hits and any(ledger(step) in h.snippet for h in hits), step
    assert store.events(conversation), "a 3,000-token window must have compacted"


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streaming"])
def test_a_function_agent_keeps_200_tool_turns_in_a_3000_token_window(streaming: bool) -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=memory_settings(), prefix="li-")
    agent = _agent(_model(meter, _script(meter), streaming), streaming)
    memory = _memory(sessions, "s1", agent)

    async def run() -> tuple[list[str], int]:
        answers, streamed = [], 0
        for turn in range(USER_TURNS):
            answer, deltas = await _turn(agent, user_text(turn), memory)
            answers.append(answer)
            streamed += deltas
        return answers, streamed

    answers, streamed = asyncio.run(run())
    meter.assert_ok(min_tool_turns=200)
    print(f"llama-index ({'streaming' if streaming else 'plain'}):", meter.summary())
    assert all(a.startswith("Batch done") for a in answers)
    assert streamed > len(meter.tokens) if streaming else streamed == 0
    _check_store(sessions, "s1", STEPS_PER_TURN * USER_TURNS)
    originals = memory.get_all()
    assert len(originals) == USER_TURNS * (2 * STEPS_PER_TURN + 2)
    assert originals[0].content == TASK


def test_the_memory_works_sync_and_set_stores_only_what_is_new() -> None:
    sessions = Sessions(MemoryStore(), settings=memory_settings())
    memory = PrecisMemory.from_defaults(sessions=sessions, session_id="sync")
    said = [ChatMessage(role="user", content="go"), ChatMessage(role="assistant", content="ok")]
    memory.set(said)
    memory.set([*said, ChatMessage(role="user", content="go")])  # the same text again: new
    memory.put(ChatMessage(role="assistant", content="ok"))
    assert [m.content for m in memory.get()] == ["go", "ok", "go", "ok"]
    assert memory.get_all() == memory.get()
    memory.reset()
    assert memory.get() == [] and len(memory.get_all()) == 4
    call = ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={})
    memory.put_messages(
        [
            ChatMessage(role="assistant", blocks=[call]),
            ChatMessage(role="tool", content="out", additional_kwargs={"tool_call_id": "c1"}),
            ChatMessage(role="tool", content="lost", additional_kwargs={"tool_call_id": "c9"}),
        ]
    )
    stored = memory.session.store.history(memory.session.conversation_id)[-3:]
    assert [m.role for m in stored] == ["assistant", "tool", "user"]  # no call: kept as text
    assert stored[1].tool_call_id == "c1" and stored[0].tool_calls[0].id == "c1"


def test_memories_of_one_session_made_apart_never_store_a_message_twice() -> None:
    sessions = Sessions(MemoryStore(), settings=memory_settings(), max_open=1)
    early = PrecisMemory.from_defaults(sessions=sessions, session_id="alpha")
    early.put(ChatMessage(role="user", content="go"))
    PrecisMemory.from_defaults(sessions=sessions, session_id="bravo").put(
        ChatMessage(role="user", content="hello")
    )  # lets alpha's session go
    late = PrecisMemory.from_defaults(sessions=sessions, session_id="alpha")
    late.put(ChatMessage(role="user", content="go"))
    asyncio.run(early.aput(ChatMessage(role="user", content="go")))
    assert [m.content for m in late.get()] == ["go", "go", "go"]
    history = sessions.store.history("alpha")
    keys = [m.metadata["framework_key"] for m in history]
    assert len(keys) == len(set(keys)) == 3


def test_a_restarted_agent_over_the_same_store_goes_on_without_storing_twice(
    tmp_path: Path,
) -> None:
    turns = 6
    meter = Meter(WINDOW)
    script = _script(meter, 2 * turns)

    async def run(first: int, last: int) -> None:
        store = open_store(None, home=tmp_path)
        sessions = Sessions(store, settings=memory_settings())
        agent = _agent(_model(meter, script, False))
        memory = _memory(sessions, "s1", agent)
        for turn in range(first, last):
            await _turn(agent, user_text(turn), memory)
        store.close()

    asyncio.run(run(0, turns))
    asyncio.run(run(turns, 2 * turns))  # a new store, sessions, memory and agent: a new process
    meter.assert_ok(min_tool_turns=2 * turns * STEPS_PER_TURN)
    sessions = Sessions(open_store(None, home=tmp_path))
    history = sessions.store.history(sessions.conversation_id("s1"))
    originals = [m for m in history if m.metadata.get("framework_key")]
    assert len(originals) == 2 * turns * (2 * STEPS_PER_TURN + 2)
    keys = [m.metadata["framework_key"] for m in originals]
    assert len(keys) == len(set(keys))
    assert sessions.store.events(sessions.conversation_id("s1"))


# --- many users through one agent ---------------------------------------------------------------


def _users_model(seen: list[str], barrier: Any) -> MockFunctionCallingLLM:
    """Answers by what it is sent: a lookup after a user message (a history search when asked),
    a reply after its result; each call waits for the other user's, so turns interleave."""
    calls = (f"call_{n}" for n in itertools.count())

    async def answer(messages: list[ChatMessage], **kwargs: Any) -> AsyncIterator[ChatMessage]:
        await barrier.wait()
        texts = [m.content or "" for m in messages]
        seen.append("\n".join(texts))
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            yield ChatMessage(role=MessageRole.ASSISTANT, content=f"Noted: {texts[-1][:300]}")
            return
        if texts[-1].startswith("search:"):
            name, args = "search_history", {"query": texts[-1][7:].strip()}
        else:
            name, args = "lookup", {"query": texts[-1]}
        block = ToolCallBlock(tool_call_id=next(calls), tool_name=name, tool_kwargs=args)
        yield ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])

    return MockFunctionCallingLLM(response_generator=answer, is_chat_model=True)


def lookup(query: str) -> str:
    """Look a record up."""
    return lookup_output(query)


def test_two_users_through_one_agent_concurrently_never_see_each_others_messages() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings())
    seen: list[str] = []
    answers: dict[str, list[str]] = {user: [] for user in USERS}

    async def run() -> None:
        llm = _users_model(seen, asyncio.Barrier(2))
        tools = [FunctionTool.from_defaults(lookup), *precis_tools()]
        agent = FunctionAgent(tools=tools, llm=llm, system_prompt="You look records up.")

        async def user_runs(user: str) -> None:
            memory = PrecisMemory.from_defaults(sessions=sessions, session_id=user)
            for turn in range(TURNS):
                answers[user].append((await _turn(agent, said_by(user, turn), memory))[0])
            answers[user].append((await _turn(agent, "search: API key", memory))[0])

        await asyncio.gather(*(user_runs(user) for user in USERS))

    asyncio.run(run())
    assert assert_one_user_each(seen[: 2 * 2 * TURNS]) == 2 * 2 * TURNS
    for user, said in answers.items():
        assert len(said) == TURNS + 1 and all(x.startswith("Noted") for x in said)
        assert USERS[user] in said[-1] and users_in(said[-1]) == {user}, said[-1]
    assert_conversations_apart(sessions.store, list(USERS))


# --- a summarizer that fails --------------------------------------------------------------------

FAILING_TURNS = 8


@pytest.mark.parametrize("how", FAILURES)
def test_a_failing_summarizer_never_stops_the_agent(how: str) -> None:
    meter = Meter(WINDOW, required=(TASK, RED_LINE))
    summarizer = FailingSummarizer(how)
    base = failing_settings(memory_settings())
    sessions = Sessions(MemoryStore(), settings=base, summarizer=summarizer)
    agent = _agent(_model(meter, _script(meter, FAILING_TURNS), False))
    memory = _memory(sessions, "s1", agent)

    async def run() -> list[str]:
        return [(await _turn(agent, user_text(t), memory))[0] for t in range(FAILING_TURNS)]

    answers = asyncio.run(run())
    assert [a.startswith("Batch done") for a in answers] == [True] * FAILING_TURNS
    meter.assert_ok(min_tool_turns=FAILING_TURNS * STEPS_PER_TURN)
    assert summarizer.calls, "the summarizer was never asked"
    history = sessions.store.history(sessions.conversation_id("s1"))
    assert len([m for m in history if m.role == "tool"]) == FAILING_TURNS * STEPS_PER_TURN
