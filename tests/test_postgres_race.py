"""Two real processes compact one PostgreSQL conversation at once: exactly one may commit."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from precis.core.messages import KIND_SUMMARY, Message
from precis.core.validity import check

SRC = Path(__file__).resolve().parents[1] / "src"
CID = "race"
# Seconds a child may take to reach the barrier or to finish, so a hang fails instead of blocking.
STEP_TIMEOUT_S = 60

# Compacts one conversation (argv: url, schema, conversation id, commit_retries). At the barrier
# (summary built and verified, commit not begun) it prints READY and blocks until the parent
# writes "go", so both commits start together; a loser without retries prints VERSION_CONFLICT.
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from precis.engine.compactor import Compactor
    from precis.engine.settings import CompactionSettings
    from precis.core.errors import VersionConflict
    from precis.stores.postgres import PostgresStore
    from precis.summarize.mock import MockSummarizer
    from precis.core.tokens import LettaEstimator
    from precis.session import drive

    gate = ["closed"]

    def progress(step):
        if step == "verified" and gate:  # only the first attempt waits; a retry runs through
            gate.clear()
            print("READY", flush=True)
            if sys.stdin.readline().strip() != "go":
                sys.exit("no go from the parent")

    store = PostgresStore(sys.argv[1], schema=sys.argv[2], max_size=2)
    compactor = Compactor(
        store,
        LettaEstimator(),
        MockSummarizer(),
        CompactionSettings(context_window=2000, commit_retries=int(sys.argv[4])),
        progress=progress,
    )
    try:
        result = drive(compactor.compaction(sys.argv[3]))
    except VersionConflict as exc:
        print(f"VERSION_CONFLICT {exc}", flush=True)
        store.close()
        sys.exit(3)
    print(f"COMMITTED {result.summary.id}", flush=True)
    store.close()
    """
)


def _chat(n: int, chars: int = 200) -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "x" * chars)
        for i in range(n)
    ]


def _readline(child: subprocess.Popen[str]) -> str:
    """One stdout line of a child, or a failure naming its stderr if none comes in time."""
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], STEP_TIMEOUT_S)
    line = child.stdout.readline() if ready else ""
    if not line:
        child.kill()
        _, err = child.communicate()
        pytest.fail(f"child {child.pid} printed nothing within {STEP_TIMEOUT_S}s: {err}")
    return line.strip()


def _race(url: str, schema: str, retries: int) -> list[tuple[str, str, int]]:
    """Start two compacting children, release them together, return (stdout, stderr, code)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, url, schema, CID, str(retries)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    try:
        # Both have read version 0 and built their summary before either may commit.
        assert [_readline(c) for c in children] == ["READY", "READY"]
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        return [(*c.communicate(timeout=STEP_TIMEOUT_S), c.returncode) for c in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_two_processes_compact_at_once_and_exactly_one_commits(
    postgres_url: str, pg_schema: str
) -> None:
    from precis.stores.postgres import PostgresStore

    store = PostgresStore(postgres_url, schema=pg_schema)
    originals = store.append(CID, _chat(60))
    outcomes = _race(postgres_url, pg_schema, retries=0)

    codes = sorted(code for _, _, code in outcomes)
    assert codes == [0, 3], outcomes
    winner = next(out for out, _, code in outcomes if code == 0)
    loser = next(out for out, _, code in outcomes if code == 3)
    assert "VERSION_CONFLICT" in loser and "expected context version 0, found 1" in loser, loser
    (committed_line,) = [line for line in winner.splitlines() if line.startswith("COMMITTED")]
    summary_id = committed_line.split()[1]

    events = store.events(CID)
    assert len(events) == 1 and events[0].summary_id == summary_id
    history = store.history(CID)
    summaries = [m for m in history if m.kind == KIND_SUMMARY]
    assert [m.id for m in summaries] == [summary_id]
    assert len(history) == store.count(CID) == len(originals) + 1
    assert [m.id for m in history[:-1]] == [m.id for m in originals]
    snap = store.context(CID)
    assert snap.version == 1 and snap.compacted
    assert snap.messages[0].id == summary_id
    assert len(snap.messages) < len(originals)
    assert check(snap.messages) == []
    store.close()


def test_the_loser_may_retry_on_the_winners_context(postgres_url: str, pg_schema: str) -> None:
    from precis.stores.postgres import PostgresStore

    store = PostgresStore(postgres_url, schema=pg_schema)
    originals = store.append(CID, _chat(60))
    outcomes = _race(postgres_url, pg_schema, retries=1)

    assert [code for _, _, code in outcomes] == [0, 0], outcomes
    events = store.events(CID)
    assert len(events) == 2
    history = store.history(CID)
    assert [m.id for m in history if m.kind == KIND_SUMMARY] == [e.summary_id for e in events]
    assert len(history) == len(originals) + 2
    snap = store.context(CID)
    assert snap.version == 2 and snap.messages[0].id == events[1].summary_id
    assert check(snap.messages) == []
    store.close()
