"""The task is the request the agent works on: a worked demonstration of another task that opens
the run (SWE-agent's `--- DEMONSTRATION ---`, a few-shot example) is recognised as one, in its own
message or before the request in the same one, and neither pinned nor briefed as the task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from precis.engine.settings import CompactionSettings
from precis.eval.replay import load_conversation
from precis.facts.demos import is_demonstration, request_part
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.extractive import ExtractiveSummarizer

DATA = Path(__file__).parent / "data" / "trajectories"
DEMO = "SWE-agent__demo_function_calling_replace_from_source__marshmallow-1867"
REAL = "SWE-agent__demo_ctf_crypto__katy"

ISSUE_OPENING = (
    "We're currently solving the following issue within our repository. Here's the issue text:"
)

# (a user turn, the request in it — None when the whole turn is a demonstration)
CASES: list[tuple[str, str | None]] = [
    (
        "Here is a demonstration of how to correctly accomplish this task.\n"
        "--- DEMONSTRATION ---\nISSUE: fix the parser\nDISCUSSION\nls\n"
        "--- END OF DEMONSTRATION ---\nISSUE: the login page returns 500 on empty passwords",
        "ISSUE: the login page returns 500 on empty passwords",
    ),
    (
        "Here is a demonstration of how to correctly accomplish this task.\n"
        "It is included to show you how to correctly use the interface.\n"
        "--- DEMONSTRATION ---\nISSUE: fix the parser\n--- END OF DEMONSTRATION ---\n",
        None,
    ),
    (
        "=== EXAMPLE TRANSCRIPT ===\nuser: add two numbers\nassistant: 4\n"
        "=== END OF EXAMPLE ===\nNow add the retry flag to the uploader.",
        "Now add the retry flag to the uploader.",
    ),
    (
        "Below is an example session with another user.\nuser: rename x\nassistant: done\n"
        "Now, here is your actual task: make the cache expire after an hour.",
        "Now, here is your actual task: make the cache expire after an hour.",
    ),
    ("The following is a worked example of the format.\nQ: 1+1\nA: 2", None),
    (
        "以下是一个示例：\n用户：把 x 改名\n助手：好的\n示例结束\n请把上传器改成失败后重试三次。",
        "请把上传器改成失败后重试三次。",
    ),
    (
        f"{ISSUE_OPENING}\nISSUE:\nTimeDelta rounds down\nDISCUSSION\nLet me look.\n"
        f"{ISSUE_OPENING}\nISSUE:\nThe CSV exporter drops the header row",
        f"{ISSUE_OPENING}\nISSUE:\nThe CSV exporter drops the header row",
    ),
    # Not demonstrations: a request that shows an example, a log whose first line repeats.
    (
        "Here is an example of the failure: `pip install` hangs. Please fix the installer.",
        "Here is an example of the failure: `pip install` hangs. Please fix the installer.",
    ),
    (
        "Traceback (most recent call last):\n  File a.py\nKeyError\n"
        "Traceback (most recent call last):\n  File b.py\nValueError\nwhy does this fail?",
        "Traceback (most recent call last):\n  File a.py\nKeyError\n"
        "Traceback (most recent call last):\n  File b.py\nValueError\nwhy does this fail?",
    ),
    (
        "Add an example to the README showing the --json flag.",
        "Add an example to the README showing the --json flag.",
    ),
    ("Give the demonstration page a dark theme.", "Give the demonstration page a dark theme."),
]


@pytest.mark.parametrize(("text", "request_text"), CASES)
def test_the_request_beside_a_demonstration(text: str, request_text: str | None) -> None:
    assert request_part(text) == request_text
    assert is_demonstration(text) is (request_text is None)


def _demonstration_text() -> str:
    """A real run rendered as SWE-agent renders a demonstration: the transcript in banners."""
    items = load_conversation(DATA / f"{DEMO}.jsonl")
    turns = [
        f"{item['role']}: {item['content']}"
        for item in items[1:12]
        if isinstance(item.get("content"), str) and item["content"].strip()
    ]
    return (
        "Here is a demonstration of how to correctly accomplish this task.\n"
        "It is included to show you how to correctly use the interface.\n"
        "You do not need to follow exactly what is done in the demonstration.\n"
        "--- DEMONSTRATION ---\n" + "\n".join(turns) + "\n--- END OF DEMONSTRATION ---\n"
    )


def _real_run() -> tuple[str, list[dict[str, Any]]]:
    items = load_conversation(DATA / f"{REAL}.jsonl")
    return str(items[0]["content"]), [dict(i) for i in items[1:24]]


def _brief_task(session: Session) -> str:
    result = session.compact_result("all")
    assert result.summary is not None
    text = str(result.summary.metadata["summary"])
    return text.split("## Task", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("together", [False, True])
def test_a_real_run_after_a_real_demonstration_keeps_its_own_task(together: bool) -> None:
    """The katy CTF run opened by the marshmallow run as its demonstration: the pinned task and
    the brief's Task are katy's, in a message of its own or after the demonstration's banner."""
    system, items = _real_run()
    demo = _demonstration_text()
    assert "TimeDelta" in demo and is_demonstration(demo)
    request = items[0]
    if together:
        items[0] = {**request, "content": demo + request["content"]}
    else:
        items.insert(0, {"role": "user", "content": demo})
    settings = CompactionSettings(context_window=1_000_000, clip_chars=60_000, pin_task=True)
    session = Session(MemoryStore(), json.dumps(together), None, ExtractiveSummarizer(), settings)
    session.set_system_prompt(system)
    session.append(*items)
    task = session.task()
    assert task is not None and "Katy" in task
    assert together or "TimeDelta" not in task
    brief_task = _brief_task(session)
    assert "Katy" in brief_task and "TimeDelta" not in brief_task


def test_without_a_pinned_task_the_brief_skips_the_demonstration() -> None:
    system, items = _real_run()
    items.insert(0, {"role": "user", "content": _demonstration_text()})
    settings = CompactionSettings(context_window=1_000_000, clip_chars=3000, pin_task=False)
    session = Session(MemoryStore(), "unpinned", None, ExtractiveSummarizer(), settings)
    session.set_system_prompt(system)
    session.append(*items)
    brief_task = _brief_task(session)
    assert "Katy" in brief_task and "TimeDelta" not in brief_task


def test_the_shared_runs_have_no_demonstration_in_their_requests() -> None:
    """Every shared conversation's first request is its own task, as written."""
    for path in sorted(DATA.glob("*.jsonl")):
        items = load_conversation(path)
        first = next(i for i in items if i.get("role") == "user")
        content = first["content"]
        if isinstance(content, str):
            assert request_part(content) == content.strip(), path.name
