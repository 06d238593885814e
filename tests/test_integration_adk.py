"""A real Google ADK runner (LlmAgent, its tool flow, a scripted BaseLlm) under PrecisPlugin."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Iterator
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
from google.adk.agents import LlmAgent, RunConfig
from google.adk.agents.run_config import StreamingMode
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools import FunctionTool
from google.genai import types
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

from precis.integrations import Sessions
from precis.integrations.adk import (
    PrecisPlugin,
    _tool_dicts,
    precis_tools,
    read_contents,
    thread_id,
    to_precis,
)
from precis.stores import MemoryStore, open_store

APP = "migration"


def _as_precis(contents: list[types.Content]) -> list[Any]:
    read = read_contents(contents)
    return [
        m
        for content, key, calls, answers in zip(
            contents, read.keys, read.call_ids, read.answer_ids, strict=True
        )
        for m in to_precis(content, key, calls, answers)
    ]


def _text(response: LlmResponse | types.Content) -> str:
    content = response.content if isinstance(response, LlmResponse) else response
    return "".join(p.text or "" for p in (content.parts if content else None) or [])


class ScriptedModel(BaseLlm):
    """ADK's model interface, answered from a script; it measures every request it is sent and,
    streaming, sends each answer's text in two partial chunks before the whole."""

    model: str = "scripted"
    script: Any = None
    meter: Any = None
    systems: Any = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        system = llm_request.config.system_instruction
        assert isinstance(system, str)
        if self.systems is not None:
            self.systems.append(system)
        self.meter.request(_as_precis(llm_request.contents), system, _tool_dicts(llm_request))
        content = next(self.script)
        if stream:
            text = _text(content)
            for half in (text[: len(text) // 2], text[len(text) // 2 :]):
                chunk = types.Content(role="model", parts=[types.Part(text=half)])
                yield LlmResponse(content=chunk, partial=True)
        yield LlmResponse(content=content)


def _script(meter: Meter, turns: int = USER_TURNS) -> Iterator[types.Content]:
    step = 0
    for _ in range(turns):
        for _ in range(STEPS_PER_TURN):
            step += 1
            meter.tool_turns += 1
            call = types.FunctionCall(name="run_step", args={"step": step})
            parts = [types.Part(text=assistant_text(step)), types.Part(function_call=call)]
            yield types.Content(role="model", parts=parts)
        done = f"Batch done; {step} steps so far, legacy/ untouched."
        yield types.Content(role="model", parts=[types.Part(text=done)])


def run_step(step: int) -> str:
    return tool_output(step)


run_step.__doc__ = TOOL_DESCRIPTION


def _runner(
    sessions: Sessions,
    meter: Meter,
    service: BaseSessionService | None = None,
    turns: int = USER_TURNS,
    systems: list[str] | None = None,
    script: Iterator[types.Content] | None = None,
) -> Runner:
    model = ScriptedModel(script=script or _script(meter, turns), meter=meter, systems=systems)
    agent = LlmAgent(
        name="migrator",
        model=model,
        instruction=SYSTEM_PROMPT,
        tools=[FunctionTool(run_step), *precis_tools(sessions)],
    )
    app = App(name=APP, root_agent=agent, plugins=[PrecisPlugin(sessions)])
    return Runner(app=app, session_service=service or InMemorySessionService())


async def _say(runner: Runner, user: str, session_id: str, text: str, **kwargs: Any) -> list[Any]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        event
        async for event in runner.run_async(
            user_id=user, session_id=session_id, new_message=message, **kwargs
        )
    ]


async def _session(runner: Runner, user: str, session_id: str) -> None:
    service = runner.session_service
    if await service.get_session(app_name=APP, user_id=user, session_id=session_id) is None:
        await service.create_session(app_name=APP, user_id=user, session_id=session_id)


def _check_store(plugin_sessions: Sessions, thread: str, steps: int) -> None:
    store = plugin_sessions.store
    conversation = plugin_sessions.conversation_id(thread)
    history = store.history(conversation)
    keys = [m.metadata["framework_key"] for m in history if "framework_key" in m.metadata]
    assert len(keys) == len({(k, m.id) for k, m in zip(keys, history, strict=False)})
    assert len([m for m in history if m.role == "tool"]) == steps
    for step in (1, 2, steps // 2, steps):
        hits = store.recall(conversation, ledger(step), 5)
        assert hits and any(ledger(step) in h.snippet for h in hits), step
    assert store.events(conversation), "a 3,000-token window must have compacted"


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "sse"])
def test_an_adk_runner_keeps_200_tool_turns_in_a_3000_token_window(streaming: bool) -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings(), prefix="adk-")
    runner = _runner(sessions, meter)
    mode = RunConfig(streaming_mode=StreamingMode.SSE if streaming else StreamingMode.NONE)
    partial: list[Any] = []

    async def run() -> list[Any]:
        await _session(runner, "u1", "s1")
        for turn in range(USER_TURNS):
            events = await _say(runner, "u1", "s1", user_text(turn), run_config=mode)
            partial.extend(e for e in events if e.partial)
        return events

    events = asyncio.run(run())
    meter.assert_ok(min_tool_turns=200)
    print(f"adk ({'sse' if streaming else 'plain'}):", meter.summary())
    assert _text(events[-1].content).startswith("Batch done")
    assert bool(partial) is streaming  # the plugin leaves the framework's stream as it is
    _check_store(sessions, thread_id(APP, "u1", "s1", "migrator"), STEPS_PER_TURN * USER_TURNS)


def test_each_function_response_is_paired_with_its_call_when_adk_strips_its_ids() -> None:
    call = types.FunctionCall(name="f", args={"a": 1})
    contents = [
        types.Content(role="user", parts=[types.Part(text="go")]),
        types.Content(
            role="model", parts=[types.Part(function_call=call), types.Part(function_call=call)]
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(function_response=types.FunctionResponse(name="f", response={"r": 1})),
                types.Part(function_response=types.FunctionResponse(name="f", response={"r": 2})),
                types.Part(function_response=types.FunctionResponse(name="g", response={"r": 3})),
            ],
        ),
        types.Content(role="user", parts=[types.Part(text="go")]),
        types.Content(
            role="user",
            parts=[types.Part.from_bytes(data=b"\x89PNG" * 5000, mime_type="image/png")],
        ),
    ]
    messages = _as_precis(contents)
    assert messages[-1].images == 1 and messages[-1].content == "[image/png]"  # not its bytes
    messages = messages[:-1]
    calls = [c.id for c in messages[1].tool_calls]
    assert len(set(calls)) == 2
    assert [m.tool_call_id for m in messages[2:4]] == calls
    assert messages[4].metadata.get("orphan_result") and messages[4].role == "user"
    keys = [m.metadata["framework_key"] for m in messages]
    assert keys[0] != keys[-1]  # the same text twice is two contents


def test_a_restarted_runner_over_the_same_stores_goes_on_without_storing_twice(
    tmp_path: Path,
) -> None:
    turns = 6
    meter = Meter(WINDOW)
    script = _script(meter, 2 * turns)  # one model across the restart: the script goes on
    db = str(tmp_path / "adk.db")

    async def run(first: int, last: int) -> None:
        store = open_store(None, home=tmp_path)
        sessions = Sessions(store, settings=settings())
        runner = _runner(sessions, meter, service=SqliteSessionService(db), script=script)
        await _session(runner, "u1", "s1")
        for turn in range(first, last):
            await _say(runner, "u1", "s1", user_text(turn))
        store.close()

    asyncio.run(run(0, turns))
    asyncio.run(run(turns, 2 * turns))  # new stores, sessions, plugin, runner: a new process
    meter.assert_ok(min_tool_turns=2 * turns * STEPS_PER_TURN)
    sessions = Sessions(open_store(None, home=tmp_path))
    history = sessions.store.history(
        sessions.conversation_id(thread_id(APP, "u1", "s1", "migrator"))
    )
    keys = [m.metadata["framework_key"] for m in history if m.metadata.get("framework_key")]
    originals = [m for m in history if m.metadata.get("framework_key")]
    assert len([m for m in originals if m.role == "tool"]) == 2 * turns * STEPS_PER_TURN
    users = [m.content for m in originals if m.role == "user"]
    assert len(users) == len(set(users)) == 2 * turns, users  # each user turn stored once
    assert len(keys) >= 2 * turns * (2 * STEPS_PER_TURN + 1)


# --- many users through one runner --------------------------------------------------------------


class UsersModel(BaseLlm):
    """Answers by what it is sent: a lookup after a user message (a history search when asked),
    a reply after its result; each call waits for the other user's, so turns interleave."""

    model: str = "users"
    seen: Any = None
    barrier: Any = None

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        await self.barrier.wait()
        texts = [m.content for m in _as_precis(llm_request.contents)]
        self.seen.append("\n".join(texts))
        last = llm_request.contents[-1].parts or []
        if any(p.function_response for p in last):
            reply = types.Part(text=f"Noted: {texts[-1][:300]}")
        elif texts[-1].startswith("search:"):
            args = {"query": texts[-1][7:].strip()}
            reply = types.Part(function_call=types.FunctionCall(name="search_history", args=args))
        else:
            call = types.FunctionCall(name="lookup", args={"query": texts[-1]})
            reply = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))


def lookup(query: str) -> str:
    """Look a record up."""
    return lookup_output(query)


def _users_runner(sessions: Sessions, barrier: Any, seen: list[str]) -> Runner:
    agent = LlmAgent(
        name="clerk",
        model=UsersModel(seen=seen, barrier=barrier),
        instruction="You look records up.",
        tools=[FunctionTool(lookup), *precis_tools(sessions)],
    )
    app = App(name=APP, root_agent=agent, plugins=[PrecisPlugin(sessions)])
    return Runner(app=app, session_service=InMemorySessionService())


def test_two_users_through_one_runner_concurrently_never_see_each_others_messages() -> None:
    sessions = Sessions(MemoryStore(), settings=thread_settings())
    seen: list[str] = []
    answers: dict[str, list[str]] = {user: [] for user in USERS}

    async def run() -> None:
        runner = _users_runner(sessions, asyncio.Barrier(2), seen)

        async def user_runs(user: str) -> None:
            await _session(runner, user, "chat")  # the same session id for both users
            for turn in range(TURNS):
                events = await _say(runner, user, "chat", said_by(user, turn))
                answers[user].append(_text(events[-1].content))
            events = await _say(runner, user, "chat", "search: API key")  # the history tool
            answers[user].append(_text(events[-1].content))

        await asyncio.gather(*(user_runs(user) for user in USERS))

    asyncio.run(run())
    assert assert_one_user_each(seen[: 2 * 2 * TURNS]) == 2 * 2 * TURNS
    for user, said in answers.items():
        assert len(said) == TURNS + 1 and all(x.startswith("Noted") for x in said)
        assert USERS[user] in said[-1] and users_in(said[-1]) == {user}, said[-1]
    threads = [sessions.conversation_id(thread_id(APP, user, "chat", "clerk")) for user in USERS]
    assert_conversations_apart(sessions.store, threads)


# --- the session's own system prompt compiler, and a summarizer that fails ----------------------

FAILING_TURNS = 8


def test_the_sessions_compile_system_prompt_reaches_the_model() -> None:
    meter = Meter(WINDOW)
    sessions = Sessions(MemoryStore(), settings=settings(), compile_system_prompt=compile_prompt)
    systems: list[str] = []
    runner = _runner(sessions, meter, turns=FAILING_TURNS, systems=systems)

    async def run() -> None:
        await _session(runner, "u1", "s1")
        for turn in range(FAILING_TURNS):
            await _say(runner, "u1", "s1", user_text(turn))

    asyncio.run(run())
    meter.assert_ok()
    assert COMPILED not in systems[0]
    compiled = [s for s in systems if COMPILED in s]
    assert compiled and all(s.startswith(SYSTEM_PROMPT) for s in compiled), systems[-1]


@pytest.mark.parametrize("how", FAILURES)
@pytest.mark.parametrize("face", ["run", "run_async"])
def test_a_failing_summarizer_never_stops_the_agent(how: str, face: str) -> None:
    meter = Meter(WINDOW, required=(TASK, RED_LINE))
    summarizer = FailingSummarizer(how)
    sessions = Sessions(MemoryStore(), settings=failing_settings(settings()), summarizer=summarizer)
    runner = _runner(sessions, meter, turns=FAILING_TURNS)
    answers: list[str] = []

    async def run() -> None:
        for turn in range(FAILING_TURNS):
            events = await _say(runner, "u1", "s1", user_text(turn))
            answers.append(_text(events[-1].content))

    asyncio.run(_session(runner, "u1", "s1"))
    if face == "run_async":
        asyncio.run(run())
    else:  # ADK's plain-call face: the runner drives its loop on a thread of its own
        for turn in range(FAILING_TURNS):
            message = types.Content(role="user", parts=[types.Part(text=user_text(turn))])
            events = list(runner.run(user_id="u1", session_id="s1", new_message=message))
            answers.append(_text(events[-1].content))
    assert [a.startswith("Batch done") for a in answers] == [True] * FAILING_TURNS
    meter.assert_ok(min_tool_turns=FAILING_TURNS * STEPS_PER_TURN)
    assert summarizer.calls, "the summarizer was never asked"
    conversation = sessions.conversation_id(thread_id(APP, "u1", "s1", "migrator"))
    history = sessions.store.history(conversation)
    assert len([m for m in history if m.role == "tool"]) == FAILING_TURNS * STEPS_PER_TURN


def test_one_plugin_names_each_agent_of_an_adk_session_by_app_user_id_and_agent() -> None:
    plugin = PrecisPlugin(Sessions(MemoryStore()))
    names = list(itertools.product(["a", "b"], ["u", "v"], ["s", "t"], ["x", "y"]))
    assert len({plugin.session(*name).conversation_id for name in names}) == 16


def test_an_agent_that_sends_only_its_own_turn_is_left_alone() -> None:
    meter = Meter(WINDOW, required=())
    sessions = Sessions(MemoryStore(), settings=settings())
    runner = _runner(sessions, meter, turns=2)
    agent = runner.app.root_agent if runner.app else None
    assert isinstance(agent, LlmAgent)
    agent.include_contents = "none"

    async def run() -> None:
        await _session(runner, "u1", "s1")
        for turn in range(2):
            await _say(runner, "u1", "s1", user_text(turn))

    asyncio.run(run())
    assert meter.tokens and sessions.store.conversations() == []
