"""The brief's lists are ranked by recency and use: over a long run of compactions, the newest
files and identifiers always make it in, ahead of what earlier summaries kept carrying."""

from __future__ import annotations

import json
import re

from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.extractive import ExtractiveSummarizer

READS = 210


def _call(i: int, name: str, arguments: dict[str, str]) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"{name}{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def _long_run() -> tuple[Session, int, set[str]]:
    """210 file reads, each followed by an order looked up, in a window that compacts often."""
    # letta's policy compacts every few reads: many rounds of the brief carried forward.
    settings = CompactionSettings(context_window=8000, low_watermark=None)
    session = Session(MemoryStore(), "reads", None, ExtractiveSummarizer(), settings)
    session.append({"role": "user", "content": "Review the storage layer module by module."})
    compactions = 0
    for i in range(1, READS + 1):
        body = "\n".join(f"def handler_{i}_{k}():\n    return {k}" for k in range(20))
        session.append(
            _call(i, "read_file", {"path": f"src/app/module_{i:03d}.py"}),
            {"role": "tool", "tool_call_id": f"read_file{i}", "content": body},
            _call(i, "lookup_order", {"order_id": f"ORD-{i:04d}"}),
            {"role": "tool", "tool_call_id": f"lookup_order{i}", "content": "status: shipped"},
        )
        if session.needs_compaction():
            session.compact()
            compactions += 1
    context = session.context()
    kept = "\n".join(c.arguments for m in context if m.kind != "summary" for c in m.tool_calls)
    return session, compactions, set(re.findall(r"module_(\d+)", kept))


def test_after_210_reads_the_brief_names_the_newest_files_and_identifiers() -> None:
    session, compactions, in_view = _long_run()
    assert compactions >= 20
    summary = [m for m in session.context() if m.kind == "summary"][-1]
    text = str(summary.metadata["summary"])
    named = {int(n) for n in re.findall(r"module_(\d+)\.py", text)}
    orders = {int(n) for n in re.findall(r"ORD-(\d+)", text)}
    # The newest files and orders the summary replaced: those read just before what is kept.
    newest = max(n for n in range(1, READS + 1) if f"{n:03d}" not in in_view)
    recent = set(range(newest - 9, newest + 1))
    assert recent <= named, sorted(recent - named)
    assert recent <= orders, sorted(recent - orders)
    # What stays is ranked newest first: the list is read from the newest read.
    files = text.split("## Files read", 1)[1]
    assert f"module_{newest:03d}.py" in files.split(",", 1)[0]
