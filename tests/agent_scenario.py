"""One long tool-using task for every framework integration, and what each request must satisfy.

Turn 1 states the task, turn 2 a red line; every later user turn asks for another batch of steps,
and the model answers each step with a tool call whose output carries a unique ledger token.
Each model request is measured with precis's own counter (messages, system prompt and tool
definitions), checked for tool pairing, and searched for the task and the red line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance import trajectory, trajectory_as_openai

from precis.core.messages import Message
from precis.core.tokens import TextEstimator
from precis.core.validity import check
from precis.engine.settings import CompactionSettings

WINDOW = 3000
STEPS_PER_TURN = 8
USER_TURNS = 27  # 2 + 25 batches: 200 tool-using model turns, plus one answer per user turn
SYSTEM_PROMPT = "You are a careful migration agent. Work step by step and report each step."
TASK = "Task: move the billing service from MySQL to PostgreSQL, one table per step."
RED_LINE = "Never touch the legacy/ directory; it belongs to the payments team."
TOOL_NAME = "run_step"
TOOL_DESCRIPTION = "Run one numbered step of the migration and return its log."

# The held-out real conversation replayed through every framework: a Claude Code sub-agent with
# parallel tool calls and outputs up to 30k characters.
REPLAY = trajectory("spotter__4d5611e5-241a-462a-8d15-5122611a9569__subagent-a2898e3.jsonl")
REPLAY_WINDOW = 6000


def settings(window: int = WINDOW) -> CompactionSettings:
    # Summaries behind the turns (the default, said here): every request is still measured
    # against the whole window, and a turn waits only at the hard watermark.
    return CompactionSettings(
        context_window=window, tool_output_max_chars=3000, background_compaction=True
    )


def user_text(turn: int) -> str:
    if turn == 0:
        return TASK
    if turn == 1:
        return RED_LINE
    return f"Continue with batch {turn}: the next {STEPS_PER_TURN} tables."


def ledger(step: int) -> str:
    return f"ledger-{step:04d}"


def tool_output(step: int) -> str:
    rows = "\n".join(f"  row {r}: copied {step * 7 + r} records, checksum ok" for r in range(6))
    return f"step {step} finished ({ledger(step)}): table_{step} migrated.\n{rows}"


def assistant_text(step: int) -> str:
    return f"Step {step}: migrating table_{step} next."


def replay_conversation() -> list[dict[str, Any]]:
    return trajectory_as_openai(REPLAY)


@dataclass
class Meter:
    """What every model request looked like, as precis counts it."""

    window: int
    required: Sequence[str] = (TASK, RED_LINE)
    counter: TextEstimator = field(default_factory=TextEstimator)
    tokens: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    tool_turns: int = 0
    stated: set[str] = field(default_factory=set)

    def request(
        self,
        messages: Sequence[Message],
        system: str | None,
        tools: Sequence[Mapping[str, Any]],
    ) -> None:
        n = len(self.tokens)
        total = sum(self.counter.count(m) for m in messages)
        if system:
            total += self.counter.count_text(system)
        if tools:
            total += self.counter.count_text(json.dumps(list(tools)))
        self.tokens.append(total)
        for v in check(messages, allow_pending=False):
            self.problems.append(f"request {n}: {v}")
        text = "\n".join([system or "", *(m.content for m in messages)])
        for needed in self.required:  # required from the first request that states it on
            if needed in text:
                self.stated.add(needed)
            elif needed in self.stated:
                self.problems.append(f"request {n}: {needed[:30]!r} missing")

    def assert_ok(self, *, min_tool_turns: int = 0) -> None:
        assert self.problems == [], self.problems[:5]
        assert self.tokens, "no request was measured"
        assert max(self.tokens) <= self.window, (max(self.tokens), self.window)
        assert self.tool_turns >= min_tool_turns, self.tool_turns
        assert set(self.required) <= self.stated, self.stated

    def summary(self) -> str:
        return (
            f"{len(self.tokens)} requests, {self.tool_turns} tool-using turns, "
            f"max {max(self.tokens)} tokens of a {self.window} window"
        )
