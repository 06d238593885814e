"""The closing table of issue #29, precis's side: on the 15 shared conversations replayed as
`bench/peers.py` replays them (a consult before every model call, one fixed fake summary), the
default policy frees real room and compacts no more often than LangChain's and OpenHands'."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import peers

# Compactions per 100 model calls of the peers, from their own run in `bench/peers.py --window
# 4000 --window 8000 --window 16000 --window 32000` on 2026-12-06 (langchain 1.x, openhands-sdk
# 1.58; the table in bench/README.md). They do not depend on precis, so they stand as constants.
LANGCHAIN_PER_100 = {4000: 55.3, 8000: 23.4, 16000: 10.6, 32000: 3.2}
OPENHANDS_PER_100 = {4000: 19.0, 8000: 10.2, 16000: 4.9, 32000: 2.7}


def figures(window: int) -> dict[str, float]:
    (system,) = peers.run_precis(window)
    return peers.summarize(system, window)


def assert_room(window: int) -> None:
    row = figures(window)
    assert row["errors"] == [] and row["over_budget_share"] == 0
    # Median freed at least 40 % of the window; none under a fifth of it unless the system
    # prompt, tools, pinned messages and newest turn alone were over the low watermark.
    assert row["freed_median"] >= 0.40, row["freed_median"]
    assert row["freed_small"] == 0
    per_100 = row["compactions_per_100_calls"]
    assert per_100 <= LANGCHAIN_PER_100[window] and per_100 <= OPENHANDS_PER_100[window], per_100


def test_precis_frees_room_and_compacts_no_more_often_than_its_peers_at_4000() -> None:
    """The tightest window of the table, where the system prompt and pinned task weigh most."""
    assert_room(4000)


@pytest.mark.grid
@pytest.mark.parametrize("window", [8000, 16000, 32000])
def test_precis_frees_room_and_compacts_no_more_often_than_its_peers(window: int) -> None:
    assert_room(window)
