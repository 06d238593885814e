"""The service compacts behind its appends: an append over the soft watermark is answered while
the summary is being made, and what is appended meanwhile stays after the summary, in order.

A real uvicorn server on 127.0.0.1 over a SQLite file; the summarizer is held on an event the
test sets, so the interleaving is chosen, not timed.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
from live_server import serving

from precis.core.messages import KIND_SUMMARY
from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.stores.sqlite import SQLiteStore
from precis.summarize.base import SummaryRequest

# A guard against a hang only: no assertion rests on it.
HANG_GUARD = 60.0
WORDS = "the deploy of service {n} touched files, ports and the release notes " * 6


class HeldAcrossThreads:
    """A summarizer the test thread holds and releases while the server's loop awaits it."""

    name = "held"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def summarize(self, request: SummaryRequest) -> str:
        raise AssertionError("the service awaits asummarize")

    async def asummarize(self, request: SummaryRequest) -> str:
        self.started.set()
        await asyncio.to_thread(self.release.wait, HANG_GUARD)
        return "Summary: the user deployed services and kept the release notes."


def said(start: int, count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"{n}: {WORDS.format(n=n)}"}
        for n in range(start, start + count)
    ]


def test_an_append_is_answered_while_its_compaction_runs_behind(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "precis.db")
    held = HeldAcrossThreads()
    settings = CompactionSettings(
        context_window=2000, soft_watermark=0.5, hard_watermark=0.95, background_compaction=True
    )
    app = create_app(store, settings=settings, summarizer_factory=lambda: held)
    with serving(app) as url, httpx.Client(base_url=url, timeout=HANG_GUARD) as client:
        cid = client.post("/v1/conversations", json={}).json()["id"]
        first = client.post(f"/v1/conversations/{cid}/messages", json={"messages": said(0, 12)})
        assert first.status_code == 201, first.text
        before = [m["id"] for m in first.json()["messages"]]
        assert held.started.wait(HANG_GUARD)
        meanwhile = []
        for n in range(12, 15):  # answered while the summary is held
            answer = client.post(f"/v1/conversations/{cid}/messages", json={"messages": said(n, 1)})
            assert answer.status_code == 201, answer.text
            meanwhile += [m["id"] for m in answer.json()["messages"]]
        assert not held.release.is_set()
        service = app.state.service
        (session,) = service.behind.values()
        task = session.behind.task
        assert task is not None and not task.done()
        held.release.set()
        # The service's shutdown waits for it, on the server's loop.
        asyncio.run_coroutine_threadsafe(service.aclose(), task.get_loop()).result(HANG_GUARD)
        assert task.done() and not session.behind.failures
        context = client.get(f"/v1/conversations/{cid}/context").json()["messages"]
    snapshot = store.context(cid)
    history = store.history(cid)
    store.close()
    # None lost or reordered: every message in the history in the order it was appended.
    assert [m.id for m in history if m.kind != KIND_SUMMARY] == before + meanwhile
    kinds = [m.kind for m in snapshot.messages]
    assert kinds.count(KIND_SUMMARY) == 1
    assert [m.id for m in snapshot.messages[-3:]] == meanwhile
    assert [m["id"] for m in context[-3:]] == meanwhile
