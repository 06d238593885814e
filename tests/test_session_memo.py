"""No answer crosses sessions: sessions with different counters and settings, side by side over
one conversation, each see what they would alone in a fresh process, within their own budgets.

Each session keeps what it remembers (the views of long outputs, the turns it cut to fit, each
message's facts) on its own `Memo`; a cache keyed without the counter once gave a session with a
1,000-token turn budget a turn cut for another session's counter (1,419 of its tokens).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from precis.core.messages import Message, ToolCall
from precis.core.tokens import LettaEstimator, TextEstimator, TokenCounter
from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.memory import MemoryStore

HERE = Path(__file__).resolve()
CONVERSATION = "shared"

# name: (counter, settings). "text" and "letta" differ only in their counter; both have a turn
# budget of 1,000 tokens ((0.5 x 4,000) / 2, nothing pinned). "narrow" differs in every display
# setting too.
ROOMY = CompactionSettings(context_window=4000, soft_watermark=0.5, pin_task=False)
SESSIONS: dict[str, tuple[Callable[[], TokenCounter], CompactionSettings]] = {
    "text": (TextEstimator, ROOMY),
    "letta": (LettaEstimator, ROOMY),
    "narrow": (
        TextEstimator,
        CompactionSettings(
            context_window=3000,
            soft_watermark=0.5,
            tool_output_max_chars=6000,
            tool_output_head_lines=10,
            tool_output_tail_lines=5,
            pin_task=False,  # what is stored is the same whichever session appends it
        ),
    ),
}


def _log(n: int, lines: int) -> str:
    return "\n".join(
        f"[{n}:{i:04d}] step {i} of the build wrote out/{n}/part_{i}.o ok" for i in range(lines)
    )


def _turns() -> list[list[Message]]:
    """Three turns, each a tool call too big for any of the sessions' budgets."""
    out: list[list[Message]] = []
    for n in range(3):
        code = "\n".join(f"def f{n}_{i}(x):\n    return x * {i}" for i in range(120))
        call = ToolCall(
            f"call_{n}", "write_file", json.dumps({"path": f"src/m{n}.py", "content": code})
        )
        out.append(
            [
                Message(role="user", id=f"u{n}", content=f"Now build part {n} and show the log."),
                Message(role="assistant", id=f"a{n}", content="", tool_calls=(call,)),
                Message(role="tool", id=f"t{n}", tool_call_id=f"call_{n}", content=_log(n, 400)),
            ]
        )
    return out


def _session(name: str, store: MemoryStore) -> Session:
    make_counter, settings = SESSIONS[name]
    return Session(store, CONVERSATION, counter=make_counter(), settings=settings)


def _shown(view: list[Message]) -> list[dict[str, Any]]:
    return [m.to_openai() for m in view]


def _alone(name: str) -> list[list[dict[str, Any]]]:
    """The views one session sees of the conversation, alone: after each turn is appended."""
    store = MemoryStore()
    session = _session(name, store)
    views = []
    for turn in _turns():
        session.append(*turn)
        views.append(_shown(session.view()))
    return views


def _turn_groups(view: list[Message]) -> list[list[Message]]:
    """The view's unsplittable turns: a call with its results, or a lone message."""
    groups: list[list[Message]] = []
    for message in view:
        if message.role == "tool" and groups and groups[-1][0].tool_calls:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def test_sessions_side_by_side_each_see_what_they_would_alone_within_their_budgets() -> None:
    # Each session alone, in a fresh interpreter: no state of this process can reach it.
    done = subprocess.run(
        [sys.executable, str(HERE), *SESSIONS],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    alone: dict[str, list[list[dict[str, Any]]]] = json.loads(done.stdout)
    store = MemoryStore()
    sessions = {name: _session(name, store) for name in SESSIONS}
    writers = list(sessions.values())
    for k, turn in enumerate(_turns()):
        writers[k % len(writers)].append(*turn)  # each turn appended by another session
        # Interleaved: each views the context twice, every other session viewing in between.
        for _ in range(2):
            for name, session in sessions.items():
                view = session.view()
                assert _shown(view) == alone[name][k], (name, k)
                budget = session.turn_budget(view, session.floor_tokens())
                assert budget is not None
                for group in _turn_groups(view):
                    tokens = sum(session.counter.count(m) for m in group)
                    assert tokens <= budget, (name, k, [m.id for m in group], tokens, budget)
    # The turns were cut: the budgets were met by cutting, not by being roomy.
    assert sessions["text"].turn_budget([], 0) == sessions["letta"].turn_budget([], 0) == 1000
    for name in SESSIONS:
        assert any("omitted" in m["content"] for m in alone[name][-1] if m["role"] == "tool"), name


def test_each_session_owns_a_bounded_memo_released_with_it() -> None:
    """Two sessions never share a memo (nor with their compactors' a stranger's), each table
    keeps at most its size, and a session's memo goes with it."""
    import gc
    import weakref

    store = MemoryStore()
    one, two = _session("text", store), _session("letta", store)
    assert one.memo is not two.memo
    assert one.compactor.memo is one.memo and one.compactor.kept.memo is one.memo
    for turn in _turns():
        one.append(*turn)
    one.view()
    assert one.memo.entries() > 0
    assert two.memo.entries() == 0  # the other session read nothing yet
    held = weakref.ref(one.memo)
    del one
    gc.collect()
    assert held() is None


def test_a_memo_table_drops_its_oldest_when_full() -> None:
    from precis.core.memo import Memo, Table

    small: Table[str, int] = Table("small", 2)
    memo = Memo()
    table = memo[small]
    for i, key in enumerate("abcd"):
        assert table.put(key, i) == i
    assert dict(table) == {"c": 2, "d": 3}
    assert memo[small] is table and Memo()[small] is not table


if __name__ == "__main__":
    print(json.dumps({name: _alone(name) for name in sys.argv[1:]}))
