"""Scripted sessions that show precis at work without a model: S3's red-line story."""

from __future__ import annotations

import json
from dataclasses import dataclass

from precis.core.messages import Message, ToolCall
from precis.summarize.base import LocalSummarizer, SummaryRequest

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
