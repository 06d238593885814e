"""Compactions show in each framework's own terms, and as one OpenTelemetry span each.

pydantic-ai: its compaction step (`CompactionStartEvent`/`CompactionEndEvent`, a `CompactionPart`,
`result.compactions`). LangChain: a `precis_compaction` custom callback event. Agents SDK: the
public `run_compaction` protocol only, and a warning when a run skips the input filter. Every
framework: one `precis.compaction` span per compaction, under the framework's own span, read
with the OpenTelemetry SDK's in-memory exporter.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any
from uuid import UUID

import pytest
from agent_scenario import SYSTEM_PROMPT, settings, user_text
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, InstrumentationSettings
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import CompactionPart, ModelMessage

from precis.core.errors import InvalidInput
from precis.integrations import Sessions
from precis.integrations._common import UnboundedWindow
from precis.integrations._telemetry import SPAN_NAME
from precis.integrations.langchain import COMPACTION_EVENT, PrecisMiddleware
from precis.integrations.pydantic_ai import PrecisCapability
from precis.stores import MemoryStore
from precis.summarize.base import LocalSummarizer, SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer

# User turns of the scenario (8 tool turns each): enough to compact a 3,000-token window.
TURNS = 6
PRECIS_ATTRIBUTES = {
    "gen_ai.operation.name",
    "gen_ai.conversation.id",
    "precis.compaction.trigger",
    "precis.compaction.mode",
    "precis.compaction.tokens_before",
    "precis.compaction.tokens_after",
    "precis.compaction.facts_kept",
    "precis.compaction.fallback",
}


def _tracing() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _precis_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == SPAN_NAME]


def _check_span(span: ReadableSpan, conversation: str) -> None:
    attributes = dict(span.attributes or {})
    assert attributes.keys() >= PRECIS_ATTRIBUTES, attributes
    assert attributes["gen_ai.conversation.id"] == conversation
    assert attributes["gen_ai.operation.name"] == "compaction"
    before = attributes["precis.compaction.tokens_before"]
    after = attributes["precis.compaction.tokens_after"]
    assert isinstance(before, int) and isinstance(after, int) and after < before
    assert span.end_time is not None and span.start_time is not None
    assert span.start_time <= span.end_time


def trace_lines(exporter: InMemorySpanExporter, first: ReadableSpan) -> list[str]:
    """The spans of the trace `first` is in (each with its parent; precis's with attributes)."""
    assert first.context is not None
    spans = [
        s
        for s in exporter.get_finished_spans()
        if s.context is not None and s.context.trace_id == first.context.trace_id
    ]
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    lines = []
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = names.get(span.parent.span_id, "?") if span.parent is not None else "-"
        lines.append(f"{span.name}  (parent: {parent})")
        if span.name == SPAN_NAME:
            lines += [f"    {k} = {v!r}" for k, v in sorted((span.attributes or {}).items())]
    return lines


# --- pydantic-ai --------------------------------------------------------------------------------


def _pydantic_agent(sessions: Sessions, provider: TracerProvider) -> Agent[None, str]:
    from agent_scenario import WINDOW, Meter
    from test_integration_pydantic_ai import _run_step, _scripted_model

    return Agent(
        _scripted_model(Meter(WINDOW)),
        instructions=SYSTEM_PROMPT,
        tools=[_run_step()],
        capabilities=[
            Instrumentation(settings=InstrumentationSettings(tracer_provider=provider)),
            PrecisCapability(sessions),
        ],
    )


def test_pydantic_ai_sees_each_compaction_as_its_own_with_one_span_under_the_run() -> None:
    provider, exporter = _tracing()
    sessions = Sessions(MemoryStore(), settings=settings(), tracer_provider=provider)
    agent = _pydantic_agent(sessions, provider)

    async def run() -> tuple[list[ModelMessage], list[Any]]:
        history: list[ModelMessage] = []
        records: list[Any] = []
        for turn in range(TURNS):
            result = await agent.run(
                user_text(turn),
                message_history=history,
                conversation_id="pai",
            )
            history = result.all_messages()
            records += result.compactions
        return history, records

    history, records = asyncio.run(run())
    stored = asyncio.run(sessions.session("pai").events())
    assert stored, "a 3,000-token window must have compacted"
    # pydantic-ai's own record of each: precis's handler, the stats it ran, a CompactionPart.
    assert records and all(r.handler == "precis" for r in records)
    assert all(isinstance(r.part, CompactionPart) and r.part.content for r in records)
    listed = [c for r in records for c in r.metadata["precis"]]
    assert len(listed) == len(stored)
    # The records are the ones pydantic-ai's CompactionEndEvents carry.
    assert all(r.reason == "threshold" for r in records)
    assert [p for m in history for p in m.parts if isinstance(p, CompactionPart)] == [
        records[-1].part
    ]
    # One span per compaction the store recorded, each a child of one of pydantic-ai's spans.
    spans = _precis_spans(exporter)
    assert len(spans) == len(stored)
    theirs = {s.context.span_id for s in exporter.get_finished_spans() if s.name != SPAN_NAME}
    for span in spans:
        _check_span(span, "pai")
        assert span.parent is not None and span.parent.span_id in theirs
    print("\n".join(trace_lines(exporter, first=spans[0])))


class _Asked(LocalSummarizer):
    """The extractive brief, remembering the instructions each summary was asked with."""

    def __init__(self) -> None:
        self.instructions: list[str | None] = []

    @property
    def name(self) -> str:
        return "asked"

    def summarize(self, request: SummaryRequest) -> str:
        self.instructions.append(request.instructions)
        return ExtractiveSummarizer().summarize(request)


def test_agent_compact_history_compacts_through_precis_keeping_its_focus() -> None:
    provider, exporter = _tracing()
    asked = _Asked()
    sessions = Sessions(
        MemoryStore(), settings=settings(), tracer_provider=provider, summarizer=asked
    )
    agent = _pydantic_agent(sessions, provider)

    async def run() -> Any:
        history: list[ModelMessage] = []
        for turn in range(2):  # under the window: no compaction of its own
            result = await agent.run(user_text(turn), message_history=history, conversation_id="x")
            history = result.all_messages()
        assert not await sessions.session("x").events()
        return await agent.compact_history(history, conversation_id="x", focus="the tables")

    compacted = asyncio.run(run())
    [record] = compacted.compactions
    assert record.handler == "precis" and record.reason == "manual"
    assert len(asyncio.run(sessions.session("x").events())) == 1
    [span] = _precis_spans(exporter)
    assert dict(span.attributes or {})["precis.compaction.trigger"] == "manual"
    assert asked.instructions and all("the tables" in (i or "") for i in asked.instructions)


# --- LangChain ----------------------------------------------------------------------------------


class _Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.seen.append((name, data))


@pytest.mark.parametrize("sync", [True, False], ids=["invoke", "ainvoke"])
def test_langchain_callbacks_get_a_custom_event_per_compaction(sync: bool) -> None:
    from agent_scenario import WINDOW, Meter
    from test_integration_langchain import RecordingFakeModel, _run_step_tool, _script

    provider, exporter = _tracing()
    sessions = Sessions(MemoryStore(), settings=settings(), tracer_provider=provider)
    meter = Meter(WINDOW)
    model = RecordingFakeModel(messages=_script(meter, TURNS), meter=meter)
    agent = create_agent(
        model,
        [_run_step_tool()],
        system_prompt=SYSTEM_PROMPT,
        middleware=[PrecisMiddleware(sessions)],
        checkpointer=InMemorySaver(),
    )
    handler = _Events()
    config: Any = {"configurable": {"thread_id": "lc"}, "callbacks": [handler]}

    async def arun() -> None:
        for turn in range(TURNS):
            await agent.ainvoke({"messages": [("user", user_text(turn))]}, config)

    if sync:
        for turn in range(TURNS):
            agent.invoke({"messages": [("user", user_text(turn))]}, config)
    else:
        asyncio.run(arun())
    stored = asyncio.run(sessions.session("lc").events())
    assert stored
    compactions = [data for name, data in handler.seen if name == COMPACTION_EVENT]
    assert len(compactions) == len(stored)
    assert all(c["conversation_id"] == "lc" and c["summary_id"] for c in compactions)
    assert [c["trigger"] for c in compactions] == [e.trigger for e in stored]
    spans = _precis_spans(exporter)
    assert len(spans) == len(stored)
    for span in spans:
        _check_span(span, "lc")


# --- the Agents SDK and settings that let a request past the window ----------------------------


def test_sessions_without_a_window_are_warned_about_at_construction() -> None:
    with pytest.warns(UnboundedWindow, match="no context_window"):
        Sessions(MemoryStore())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Sessions(MemoryStore(), settings=settings())


def test_an_agents_sdk_run_without_the_input_filter_is_warned_about() -> None:
    from agent_scenario import WINDOW, Meter
    from agents import Agent as SdkAgent
    from agents import RunConfig, Runner
    from test_integration_openai_agents import FakeModel, _scripted, run_step

    from precis.integrations.openai_agents import PrecisSession

    provider, exporter = _tracing()
    sessions = Sessions(MemoryStore(), settings=settings(), tracer_provider=provider)

    async def run(session: PrecisSession, config: RunConfig | None, turns: int) -> None:
        meter = Meter(WINDOW)
        model = FakeModel(_scripted(meter), meter)
        agent = SdkAgent(name="migrator", instructions=SYSTEM_PROMPT, tools=[run_step], model=model)
        for turn in range(turns):
            await Runner.run(agent, user_text(turn), session=session, run_config=config)

    bare = PrecisSession("bare", sessions)
    with pytest.warns(UnboundedWindow, match="input filter"):
        asyncio.run(run(bare, None, 1))
    filtered = PrecisSession("filtered", sessions)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnboundedWindow)
        asyncio.run(run(filtered, filtered.run_config(), TURNS))
    with pytest.raises(InvalidInput, match="already has a call_model_input_filter"):
        filtered.run_config(RunConfig(call_model_input_filter=bare.input_filter))
    stored = asyncio.run(sessions.session("filtered").events())
    assert stored
    spans = _precis_spans(exporter)
    assert len(spans) == len(stored)
    for span in spans:
        _check_span(span, "filtered")


def test_the_agents_sdk_session_uses_no_private_runner_hook() -> None:
    from precis.integrations.openai_agents import PrecisSession

    private = {"_defer_compaction", "_get_deferred_compaction_response_id"}
    private |= {"_clear_deferred_compaction"}
    assert not private & set(dir(PrecisSession))
