"""Two users through one agent object, and summarizers that fail, for every framework's tests.

Each user's messages carry the user's name and secret; a request or a conversation that holds
another user's marker is cross-talk. The failing summarizers stand for a summarizer model that
is down (503), hangs past `summary_timeout`, or answers nothing usable.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import replace

from agent_scenario import settings

from precis.core.errors import ModelTimeout, UpstreamError
from precis.engine.settings import CompactionSettings
from precis.stores.base import ConversationStore
from precis.summarize.base import SummaryRequest

USERS = {"alpha": "sk-alpha-1111", "bravo": "sk-bravo-2222"}
TURNS = 8
# Small enough that each user's conversation compacts within TURNS turns.
THREAD_WINDOW = 1500
FILLER = " ".join(f"field{i}=ok" for i in range(90))
COMPILED = "[compiled by the session after a compaction]"


def thread_settings() -> CompactionSettings:
    return settings(THREAD_WINDOW)


def user_text(user: str, turn: int) -> str:
    return f"I am {user}; my API key is {USERS[user]}. Question {turn}: check record {turn}."


def lookup_output(query: str) -> str:
    """A tool's answer: it repeats what it was asked (the user's markers with it), at length."""
    return f"record lookup for [{query}]: {FILLER}"


def users_in(text: str) -> set[str]:
    """The users whose name or secret the text holds."""
    return {user for user, secret in USERS.items() if user in text or secret in text}


def assert_one_user_each(requests: Iterable[str]) -> int:
    """Every request holds exactly one user's markers; returns how many were checked."""
    n = 0
    for n, text in enumerate(requests, 1):
        assert len(users_in(text)) == 1, f"request {n} holds {sorted(users_in(text))}"
    assert n, "no request was recorded"
    return n


def assert_conversations_apart(store: ConversationStore, expected: Iterable[str]) -> None:
    """One conversation per user, each holding that user's messages and no other's."""
    ids = sorted(expected)
    assert store.conversations() == ids
    for conversation_id in ids:
        history = store.history(conversation_id)
        owners = set().union(*(users_in(m.content) for m in history))
        assert len(owners) == 1, (conversation_id, owners)
        assert store.events(conversation_id), f"{conversation_id} never compacted"


def compile_prompt(text: str, context: list[object]) -> str:
    """A system prompt compiler: marks the prompt, so a test sees it reached the model."""
    return f"{text}\n{COMPILED} ({len(context)} messages)"


class FailingSummarizer:
    """A summarizer model that fails: `raises` (a 503), `hangs` (never answers; the session's
    summary timeout ends the wait) or `garbage` (answers with nothing usable)."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.calls = 0

    @property
    def name(self) -> str:
        return f"failing-{self.how}"

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        if self.how == "raises":
            raise UpstreamError("summarizer", "service unavailable", 503)
        if self.how == "hangs":
            # A blocking client bounded by its own timeout, as the LLM summarizer's HTTP call is.
            threading.Event().wait(request.timeout)
            raise ModelTimeout(f"summarizer: no answer within {request.timeout}s")
        return ""

    async def asummarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        if self.how == "raises":
            raise UpstreamError("summarizer", "service unavailable", 503)
        if self.how == "hangs":
            await asyncio.Event().wait()  # never set: the async driver's timeout ends it
        return ""


FAILURES = ("raises", "hangs", "garbage")


def failing_settings(base: CompactionSettings) -> CompactionSettings:
    """The scenario's settings with a summary timeout short enough to run out at once."""
    return replace(base, summary_timeout=0.05)
