"""Each framework's own model summarizes (and, where the framework knows them, counts tokens and
gives the window): no second client. Tried with the frameworks' own test models."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from agents import ModelResponse as SdkResponse
from agents import Usage
from agents.models.interface import Model as SdkModel
from agents.testing.model import assistant_message
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from precis import AsyncSession, Message, Session
from precis.core.errors import InvalidSetting
from precis.engine.results import CompactionResult
from precis.engine.settings import CompactionSettings
from precis.integrations import langchain as lc
from precis.integrations import openai_agents as sdk
from precis.integrations import pydantic_ai as pai
from precis.stores import MemoryStore

ANSWER = "MODEL-SUMMARY: the user is moving billing to PostgreSQL; step 12 is next."
WINDOW = 3000


def _conversation() -> list[Message]:
    out = [Message(role="user", content="Task: move billing from MySQL to PostgreSQL.")]
    for turn in range(24):
        out.append(Message(role="user", content=f"Step {turn}: migrate table t{turn} " * 6))
        out.append(Message(role="assistant", content=f"Done with t{turn}; rows copied. " * 6))
    return out


def _settings() -> CompactionSettings:
    return CompactionSettings(context_window=WINDOW)


def _acompacted(summarizer: Any) -> CompactionResult:
    async def run() -> CompactionResult:
        session = AsyncSession(MemoryStore(), "c", summarizer=summarizer, settings=_settings())
        await session.append(*_conversation())
        return await session.compact_result()

    return asyncio.run(run())


def _compacted(summarizer: Any) -> CompactionResult:
    session = Session(MemoryStore(), "c", summarizer=summarizer, settings=_settings())
    session.append(*_conversation())
    return session.compact_result()


def _check(result: CompactionResult, name: str) -> None:
    assert result.summary is not None and result.stats.fallback is None
    assert ANSWER in result.summary.content
    assert result.summary.metadata["summarizer"] == name


# --- LangChain ----------------------------------------------------------------------------------


class WordCountingModel(GenericFakeChatModel):
    """LangChain's fake chat model with a tokenizer of its own: one token per word."""

    def get_num_tokens(self, text: str) -> int:
        return len(text.split())


def _langchain_model(**fields: Any) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(ANSWER)), **fields)


@pytest.mark.parametrize("compact", [_compacted, _acompacted], ids=["invoke", "ainvoke"])
def test_a_langchain_chat_model_summarizes(compact: Any) -> None:
    summarizer = lc.model_summarizer(_langchain_model())
    _check(compact(summarizer), summarizer.name)
    assert summarizer.name == "langchain:generic-fake-chat-model"


def test_langchain_gives_its_window_and_token_counts() -> None:
    model = WordCountingModel(
        messages=itertools.repeat(AIMessage(ANSWER)), profile={"max_input_tokens": 4000}
    )
    sessions = lc.sessions_for(MemoryStore(), model)
    assert sessions.settings is not None and sessions.settings.context_window == 4000
    assert sessions.counter is not None
    assert sessions.counter.count_text("three plain words") == 3
    message = Message(role="user", content="five words in this message", id="m1")
    assert sessions.counter.count(message) == model.get_num_tokens_from_messages(
        [HumanMessage("five words in this message")]
    )
    # A window the model cannot take is refused; a smaller one is kept.
    with pytest.raises(InvalidSetting, match="context_window: 8,000 is more than the model"):
        lc.sessions_for(MemoryStore(), model, settings=CompactionSettings(context_window=8000))
    smaller = lc.sessions_for(MemoryStore(), model, settings=_settings())
    assert smaller.settings is not None and smaller.settings.context_window == WINDOW
    # A model without a tokenizer of its own (the base class would download one): precis counts.
    assert lc.model_counter(_langchain_model()) is None
    assert lc.model_window(_langchain_model()) is None


# --- pydantic-ai --------------------------------------------------------------------------------


def _pydantic_model(calls: list[int]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(len(messages))
        assert not info.function_tools  # asked directly, not inside an agent run
        return ModelResponse(parts=[TextPart(ANSWER)])

    return FunctionModel(respond, model_name="summarizer", profile={"context_window": 5000})


@pytest.mark.parametrize("compact", [_compacted, _acompacted], ids=["sync", "async"])
def test_a_pydantic_ai_model_summarizes(compact: Any) -> None:
    calls: list[int] = []
    summarizer = pai.model_summarizer(_pydantic_model(calls))
    _check(compact(summarizer), "pydantic-ai:summarizer")
    assert calls


def test_pydantic_ai_gives_its_window() -> None:
    model = _pydantic_model([])
    assert pai.model_window(model) == 5000
    sessions = pai.sessions_for(MemoryStore(), model)
    assert sessions.settings is not None and sessions.settings.context_window == 5000
    assert sessions.summarizer is not None and sessions.summarizer.name == "pydantic-ai:summarizer"
    with pytest.raises(InvalidSetting, match="more than the model accepts"):
        pai.sessions_for(MemoryStore(), model, settings=CompactionSettings(context_window=9000))


# --- the Agents SDK -----------------------------------------------------------------------------


class SummaryModel(SdkModel):
    """An Agents SDK model that answers every request with the summary, and records them."""

    def __init__(self) -> None:
        self.requests: list[tuple[Any, Any]] = []

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        self.requests.append((system_instructions, input))
        return SdkResponse(output=[assistant_message(ANSWER)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_an_agents_sdk_model_summarizes_awaited() -> None:
    model = SummaryModel()
    summarizer = sdk.model_summarizer(model)
    _check(_acompacted(summarizer), "openai-agents:SummaryModel")
    system, items = model.requests[0]
    assert system and all(item["role"] != "system" for item in items)


def test_an_agents_sdk_model_asked_from_plain_code_falls_back_by_name() -> None:
    # The SDK's models are async only: a sync session's compaction falls back, and says why.
    result = _compacted(sdk.model_summarizer(SummaryModel()))
    assert result.stats.fallback == "extractive"
    assert "async only" in (result.stats.fallback_reason or "")
