"""S1's sawtooth: the demo's 17 turns at window 1200, letta's planner vs the floor-aware one.

The agent carries a system prompt and tool definitions (the "floor") in every request. letta's
planner keeps a tail sized against the whole window, so floor + summary + tail lands over the
threshold: the engine falls back to summarizing everything (mode `all`, nothing kept verbatim)
or compacts again within a turn or two. Counting the floor keeps the tail small enough to fit.
"""

from __future__ import annotations

import sys

from precis.cli.demos import DEMO_FACT, DEMO_TURNS
from precis.engine.compactor import CompactionStats
from precis.engine.settings import CompactionSettings
from precis.providers.mock import MockProvider
from precis.session import Session
from precis.session.agent import Agent
from precis.stores.memory import MemoryStore
from precis.summarize.extractive import ExtractiveSummarizer

WINDOW = 1200
SYSTEM_PROMPT = (
    "You are the engineering assistant of a small web team. Answer concisely, cite the files "
    "you rely on, never invent API endpoints, and ask before changing anything in production."
)
# A reply of a real model's length; the mock's default echo is too short to fill a window.
REPLY = (
    "Here is how I would approach it: start with the smallest change that can be measured, "
    "write down the expected effect, ship it behind a flag, watch the dashboard for a day, "
    "and only then widen the rollout to the rest of the users and the other services."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for."}},
                "required": ["query"],
            },
        },
    }
    for name, description in (
        ("search_history", "Search every earlier message, including compacted ones."),
        ("read_file", "Read a file of the repository by path."),
        ("run_tests", "Run the test suite, or the tests matching a pattern."),
    )
]


def replay(reserve_floor: bool) -> list[CompactionStats]:
    """The demo's turns against the mock model; returns every compaction they caused."""
    # S1 has no pinned task; leave it out of both runs so only the planner differs. Both plan
    # as letta does (`low_watermark=None`), one with the floor counted.
    settings = CompactionSettings(
        context_window=WINDOW, reserve_floor=reserve_floor, pin_task=False, low_watermark=None
    )
    session = Session(MemoryStore(), "demo", None, ExtractiveSummarizer(), settings, tools=TOOLS)
    session.set_system_prompt(SYSTEM_PROMPT)
    compactions: list[CompactionStats] = []
    agent = Agent(
        session,
        MockProvider(WINDOW, reply=REPLY),
        on_compaction=compactions.append,
        history_tools=False,
    )
    for text in (DEMO_FACT, *DEMO_TURNS):
        agent.turn(text)
    return compactions


def main() -> int:
    letta = replay(reserve_floor=False)
    floor = replay(reserve_floor=True)
    for name, runs in (("letta planner", letta), ("floor-aware", floor)):
        after = ", ".join(f"{s.context_tokens_after} ({s.mode})" for s in runs)
        print(f"{name:>14}: {len(runs):>2} compactions in 17 turns (tokens after each: {after})")
    fell_back = any(s.mode != "sliding_window" for s in letta)
    held = all(s.mode == "sliding_window" for s in floor)
    return 0 if (fell_back or len(letta) > len(floor)) and held else 1


if __name__ == "__main__":
    sys.exit(main())
