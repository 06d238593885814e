"""The budget always holds: on every shared conversation at windows 4,000 / 8,000 / 16,000 no
compaction fails, and after each the context is within the soft watermark (the window when the
newest unsplittable turn is larger); a turn too big is shown head+tail; a compaction that
cannot shrink is a no-op that says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conformance import TRAJECTORIES
from run_cli import run_precis

from precis.core.messages import Message, ToolCall
from precis.core.tokens import TextEstimator
from precis.core.validity import check
from precis.engine.results import NO_OP_MODE
from precis.engine.settings import CompactionSettings
from precis.engine.views import fit_turns
from precis.eval import STRATEGIES, budget_cells, run_eval
from precis.session import Session
from precis.stores.memory import MemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

WINDOWS = (4000, 8000, 16000)
CONVERSATIONS = sorted(TRAJECTORIES.glob("*.jsonl"))


def assert_holds(strategies: list[str]) -> None:
    reports = [run_eval(CONVERSATIONS, strategies=strategies, window=w) for w in WINDOWS]
    cells = budget_cells(reports)
    assert len(cells) == len(strategies) * len(WINDOWS)
    for cell in cells:
        assert cell.conversations == 15 and cell.compactions > 0, cell
        assert cell.failed == 0 and cell.over == 0, cell
        assert cell.peak_after is not None and cell.peak_after <= cell.window, cell
    for report in reports:
        for run in report.runs:
            assert run.violations == 0, (run.conversation, run.strategy)
            for c in run.compactions:
                # A summary never takes more than what it replaced: every compaction shrank.
                assert c.mode == NO_OP_MODE or c.tokens_after < c.tokens_before, c


def test_the_default_strategy_holds_the_budget_on_every_conversation_and_window() -> None:
    assert_holds(["extractive+guard"])


@pytest.mark.grid
def test_every_strategy_holds_the_budget_on_every_conversation_and_window() -> None:
    assert_holds([name for name, s in STRATEGIES.items() if s.compacts])


def test_a_parallel_read_bigger_than_its_room_is_shown_head_and_tail() -> None:
    counter = TextEstimator()
    body = "\n".join(f"line {i}: defmodule Spotter.Thing{i} do end" for i in range(600))
    written = json.dumps({"file_path": "lib/big.ex", "content": body})
    calls = (
        ToolCall("r1", "Read", '{"file_path": "a.ex"}'),
        ToolCall("r2", "Read", '{"file_path": "b.ex"}'),
        ToolCall("w1", "Write", written),
    )
    turn = [
        Message(role="user", content="read both and write big.ex", id="u"),
        Message(role="assistant", content="Reading.", id="a", tool_calls=calls),
        Message(role="tool", tool_call_id="r1", content=body, id="t1"),
        Message(role="tool", tool_call_id="r2", content="ok", id="t2"),
        Message(role="tool", tool_call_id="w1", content=body, id="t3"),
    ]
    budget = 1500
    shown = fit_turns(turn, budget_tokens=budget, count=counter.count, head_lines=40, tail_lines=20)
    assert shown[0] is turn[0] and shown[3] is turn[3]  # alone, or short: left whole
    assert sum(counter.count(m) for m in shown[1:]) <= budget
    assert [m.id for m in shown] == [m.id for m in turn] and check(shown) == []
    (read, _, write) = shown[1].tool_calls
    assert read == calls[0]  # short arguments stay
    cut = json.loads(write.arguments)  # still JSON, its long string cut head+tail
    assert cut["file_path"] == "lib/big.ex" and "read_original(a" in cut["content"]
    assert cut["content"].startswith("line 0:") and cut["content"].endswith("Thing599 do end")
    assert "read_original(t1" in shown[2].content


def test_a_short_chat_with_a_fact_per_step_compacts_instead_of_failing() -> None:
    # The README's service example, one more fact per step: the brief was once larger than the
    # span it replaced ("context did not shrink").
    session = Session(MemoryStore(), "a")
    session.set_system_prompt("You help ship the payments service.")
    session.append(
        {"role": "user", "content": "Our staging database listens on port 5433; never use 5432."},
        {"role": "assistant", "content": "Noted: staging is on 5433, and I will not touch 5432."},
    )
    for n in range(1, 9):
        session.append(
            {
                "role": "user",
                "content": f"Step {n}: review the release checklist and check PAY-{100 + n} "
                f"in /srv/pay/step{n}.py.",
            },
            {"role": "assistant", "content": f"Step {n}: the rollback of v1.{n}.0 is missing."},
        )
    result = session.compact_result()
    assert result.compacted, result.reason
    assert result.stats.context_tokens_after < result.stats.context_tokens_before
    assert "never use 5432" in session.prompt()[1]["content"]


def test_a_compaction_that_cannot_shrink_exits_0_and_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = tmp_path / "tiny.jsonl"
    lines = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    source.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    run_precis(home, "import", str(source))
    before = run_precis(home, "context", "--json").stdout
    result = run_precis(home, "compact", "--mode", "all")
    assert result.returncode == 0
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("precis: nothing compacted: nothing makes the context")
    stats = json.loads(result.stdout)
    assert stats["compacted"] is False and stats["mode"] == NO_OP_MODE
    assert run_precis(home, "context", "--json").stdout == before


def test_a_window_too_small_for_its_fixed_part_is_a_no_op_not_an_error() -> None:
    settings = CompactionSettings(context_window=300)
    session = Session(MemoryStore(), "s", None, None, settings)
    session.set_system_prompt("You follow the house style. " * 60)  # alone over the watermark
    session.append(
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi"},
    )
    assert session.maybe_compact() == []  # nothing written, nothing listed
    assert session.events() == []


@pytest.mark.parametrize(
    "name",
    [
        "spotter__258c7280-ae70-4798-800f-63464d01a85d",
        "spotter__4d5611e5-241a-462a-8d15-5122611a9569__subagent-a2898e3",
    ],
)
def test_the_peers_bench_finds_no_failed_compaction(name: str) -> None:
    import peers

    run = peers._precis_conversation(TRAJECTORIES / f"{name}.jsonl", 8000, peers.Meter(8000))
    assert run.errors == [] and run.compactions


def test_a_turn_shown_cut_is_counted_as_shown() -> None:
    # A counter remembers a message by id and content length: the copy whose call arguments
    # were cut must not be taken for the stored message (its count would be the whole file's).
    body = "\n".join(f"line {i}: defmodule Spotter.Thing{i} do end" for i in range(600))
    written = json.dumps({"file_path": "lib/big.ex", "content": body})
    session = Session(MemoryStore(), "w", None, None, CompactionSettings(context_window=4000))
    session.append(
        {"role": "user", "content": "write lib/big.ex"},
        {
            "role": "assistant",
            "content": "Writing it.",
            "tool_calls": [
                {
                    "id": "w1",
                    "type": "function",
                    "function": {"name": "Write", "arguments": written},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "w1", "content": "File created."},
    )
    stored = session.context()[1]
    session.counter.count(stored)  # the stored form is remembered first
    shown = session.view()
    assert shown[1].tool_calls[0].arguments != written and "read_original(" in shown[1].content
    fresh = TextEstimator()
    assert session.tokens() == sum(fresh.count(m) for m in shown) + session.floor_tokens()
    assert session.tokens() < 4000
