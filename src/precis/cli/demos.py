"""The demos' scripts and their runners: S1's fact compacted away and found, S3's red line.

`precis demo` replays them with no model in a throwaway home; bench/sawtooth.py replays S1's turns.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from precis.cli.errors import CliFailure
from precis.cli.render import print_messages, print_recall, report_compaction
from precis.core.messages import Message, ToolCall
from precis.summarize.base import LocalSummarizer

if TYPE_CHECKING:
    from precis.engine.results import CompactionStats
    from precis.engine.settings import CompactionSettings
    from precis.session import Session
    from precis.summarize.base import Summarizer, SummaryRequest

# The choices of `precis demo --scenario`.
Scenario = Literal["recall", "red-line"]

# --- S1: a fact, sixteen unrelated turns, then recall --------------------------------------------

DEMO_WINDOW = 1200
DEMO_FACT = "our database port is 5433, don't use the default 5432"
DEMO_TURNS = (
    "Can you explain how we should structure the REST endpoints for the orders service so "
    "that pagination, filtering by status and sorting by date stay consistent across pages?",
    "What is a sensible way to organise the React components for the checkout flow, given that "
    "the cart, the address form and the payment step each need their own validation rules?",
    "Our CI pipeline takes almost twenty minutes now; which steps would you cache or parallelise "
    "first to bring the feedback loop for pull requests under five minutes again?",
    "How should we store user sessions if we move from a single server to three instances behind "
    "a load balancer, and what happens to people who are logged in during the switch?",
    "Please suggest a naming convention for our feature flags so that product managers can tell "
    "at a glance which team owns a flag and whether it is safe to remove it.",
    "The product images load slowly on mobile connections; what combination of formats, sizes and "
    "lazy loading would you recommend for the catalogue grid and the detail page?",
    "We keep getting merge conflicts in the translation files; how could we split or generate them "
    "so that two people adding strings on the same day do not collide?",
    "What should our error responses look like in the public API so that client developers can "
    "handle validation failures, rate limits and server errors without parsing text?",
    "How would you write integration tests for the email notifications without actually sending "
    "mail, while still checking the rendered subject, recipients and unsubscribe link?",
    "Is it worth adding a message queue for the invoice generation job, or can we keep running it "
    "as a nightly cron task for another year while the customer base doubles?",
    "What logging fields should every request carry so that we can trace one customer's checkout "
    "across the web app, the orders service and the payment provider callbacks?",
    "Our staging environment drifts from production every few weeks; how can we keep configuration "
    "and seed data in sync without copying real customer records into staging?",
    "How should the frontend handle an expired access token in the middle of a form submission, so "
    "that the user does not lose what they typed and does not see a confusing error?",
    "Which accessibility checks should we automate in the pipeline, and which ones still need a "
    "person with a screen reader before we ship a new page to customers?",
    "What is a reasonable plan for upgrading the web framework by two major versions without "
    "freezing feature work for a month or breaking the admin dashboard along the way?",
    "Before the launch next week, which metrics and alerts would you put on the dashboard so that "
    "the on-call engineer notices a failing payment flow within a few minutes?",
)

# --- S3: a red line that must survive every compaction -------------------------------------------

RED_LINE_TASK = "Add a CSV export module for the reports page under src/exporter/."
RED_LINE = "Never touch the legacy/ directory; only add new modules."
RED_LINE_WINDOW = 2000

_FILES = (
    "src/exporter/__init__.py",
    "src/exporter/csv_writer.py",
    "src/exporter/columns.py",
    "src/exporter/formatting.py",
    "src/reports/views.py",
    "src/reports/urls.py",
    "tests/test_csv_writer.py",
    "tests/test_columns.py",
    "tests/test_formatting.py",
    "tests/test_report_views.py",
)


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the scripted agent: what it says and does, and what the tool answers."""

    messages: tuple[Message, ...]


def _tool_output(path: str, step: int) -> str:
    lines = [f"# {path} (step {step})"]
    lines += [
        f"def helper_{step}_{i}(rows):  # formats column {i} of the export" for i in range(24)
    ]
    return "\n".join(lines)


def red_line_steps() -> list[Step]:
    """The task, the red line, then twenty steps of file work that push it out of the window."""
    steps = [
        Step((Message(role="user", content=RED_LINE_TASK),)),
        Step(
            (
                Message(role="assistant", content="I'll start by reading the reports views."),
                Message(role="user", content=f"One rule before you start: {RED_LINE}"),
            )
        ),
    ]
    for n in range(1, 21):
        path = _FILES[n % len(_FILES)]
        action = "write_file" if n % 3 else "read_file"
        call = ToolCall(f"call_{n}", action, json.dumps({"path": path}))
        steps.append(
            Step(
                (
                    Message(
                        role="assistant", content=f"Step {n}: {action} {path}.", tool_calls=(call,)
                    ),
                    Message(role="tool", tool_call_id=call.id, content=_tool_output(path, n)),
                )
            )
        )
    return steps


def red_line_in(context: list[Message]) -> bool:
    """Whether the red line is still in what the model sees, verbatim."""
    return any(RED_LINE in m.content for m in context)


class DroppingSummarizer(LocalSummarizer):
    """The deliberately bad summarizer of S3's story: it forgets everything the user said."""

    def __init__(self) -> None:
        self.last = ""

    @property
    def name(self) -> str:
        return "dropping"

    def describe(self) -> str:
        return "deliberately bad (answers 'Made progress on the exporter.' whatever it is given)"

    def summarize(self, request: SummaryRequest) -> str:
        self.last = "Made progress on the exporter."
        return self.last


# --- Running them --------------------------------------------------------------------------------


def run(scenario: Scenario, home: Path) -> None:
    """Replay one scenario in `home`; a CliFailure if it did not show what it promises."""
    if scenario == "red-line":
        run_red_line_demo(home)
    else:
        run_demo(home)


def _demo_session(home: Path, settings: CompactionSettings, summarizer: Summarizer) -> Session:
    """A session of its own, unaffected by precis.toml or PRECIS_* so the demo always replays."""
    from precis.session import Session
    from precis.stores.sqlite import SQLiteStore

    return Session(SQLiteStore(home / "precis.db"), "demo", None, summarizer, settings)


def run_demo(home: Path) -> None:
    """S1's session in `home`: a fact, 16 unrelated turns, the context, then recall."""
    from precis.engine.settings import CompactionSettings
    from precis.providers.mock import MockProvider
    from precis.session.agent import Agent
    from precis.summarize.extractive import ExtractiveSummarizer

    started = time.perf_counter()
    # S1 pins nothing: the fact must leave the context for recall to have something to find.
    settings = CompactionSettings(context_window=DEMO_WINDOW, pin_task=False)
    session = _demo_session(home, settings, ExtractiveSummarizer())
    try:
        print(f"precis demo — window {DEMO_WINDOW} tokens, mock model, extractive summarizer")
        compactions: list[CompactionStats] = []

        def on_compaction(stats: CompactionStats) -> None:
            compactions.append(stats)
            sys.stdout.flush()
            report_compaction(stats)

        agent = Agent(
            session, MockProvider(DEMO_WINDOW), on_compaction=on_compaction, history_tools=False
        )
        for number, text in enumerate((DEMO_FACT, *DEMO_TURNS), start=1):
            reply, _ = agent.turn(text)
            print(f"turn {number:>2}: {reply}", flush=True)
        print()
        print_messages(session.context(), session, "context", as_json=False)
        print()
        print("$ precis recall 5433")
        found = _demo_recall(session)
        elapsed = time.perf_counter() - started
        print()
        print(
            f"{len(compactions)} compactions, {len(session.history())} messages kept in history, "
            f"original fact {'found' if found else 'NOT found'} ({elapsed:.2f}s)"
        )
        if not found:
            raise CliFailure("the demo's recall did not find the original message")
    finally:
        session.store.close()


def run_red_line_demo(home: Path) -> None:
    """S3's catastrophic-forgetting story with a summarizer that drops everything the user said."""
    from precis.engine.settings import CompactionSettings

    # Summaries from 60 %: each step's outputs would carry the context from 80 % past the hard
    # watermark, whose truncation (down to the low one) leaves the forgetful summarizer no work.
    settings = CompactionSettings(context_window=RED_LINE_WINDOW, soft_watermark=0.6)
    summarizer = DroppingSummarizer()
    session = _demo_session(home, settings, summarizer)
    print(f"precis demo --scenario red-line — window {RED_LINE_WINDOW} tokens")
    print(f"red line: {RED_LINE}")
    print(f"summarizer: {summarizer.describe()}")
    print()
    kept = True
    try:
        for number, step in enumerate(red_line_steps()):
            session.append(*step.messages)
            for stats in session.maybe_compact():
                sys.stdout.flush()
                report_compaction(stats)
                present = red_line_in(session.view())
                kept = kept and present
                where = _red_line_holder(session, RED_LINE)
                wrote = (
                    "no model call"
                    if stats.mode in ("truncate", "mask")
                    else f"the summarizer wrote {summarizer.last!r}"
                )
                print(
                    f"step {number:>2}: {stats.mode} ({wrote}); red line in context: "
                    f"{'yes' if present else 'NO'}, {where}",
                    flush=True,
                )
        print()
        print_messages(session.context(), session, "context", as_json=False)
        events = session.events()
        print()
        print(
            f"{len(events)} compactions; red line present after every one: "
            f"{'yes' if kept and events else 'NO'}"
        )
        if not kept or not events:
            raise CliFailure("the red line did not survive every compaction")
    finally:
        session.store.close()


def _red_line_holder(session: Session, red_line: str) -> str:
    """Which message carries the red line now, for the demo's report."""
    for m in session.context():
        if red_line in m.content:
            if m.kind == "summary":
                return "kept verbatim in the summary by the guard"
            if m.kind == "marker":
                return "carried by the truncation marker"
            return "in an original message still in context"
    return "missing"


def _demo_recall(session: Session) -> bool:
    """Print the recall hits and the original message they lead back to."""
    print_recall(session, "5433", 5)
    for hit in session.recall("5433", 5):
        message = session.store.get(session.conversation_id, [hit.id])[0]
        if message.kind != "summary" and DEMO_FACT in message.content:
            in_context = any(m.id == hit.id for m in session.context())
            print(
                f"original message {message.id} ({'in' if in_context else 'out of'} context): "
                f"{message.content}"
            )
            return True
    return False
