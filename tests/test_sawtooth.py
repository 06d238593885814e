"""Counting the floor (system prompt + tools + summary) compacts less often than letta's planner."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import sawtooth


def test_floor_aware_planner_compacts_fewer_times_in_the_demo() -> None:
    letta = sawtooth.replay(reserve_floor=False)
    floor = sawtooth.replay(reserve_floor=True)
    assert len(letta) >= 2
    assert len(floor) < len(letta), (len(floor), len(letta))
    assert all(s.mode == "sliding_window" for s in floor)
