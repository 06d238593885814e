"""Loads letta-code's conformance vectors from the shared folder beside the repository."""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from precis.evaluation import load_conversation
from precis.messages import Message, messages_from_openai

# The shared folder sits beside the repository; PRECIS_SHARED points elsewhere if it does not.
SHARED = Path(os.environ.get("PRECIS_SHARED", Path(__file__).resolve().parents[2] / "shared"))
VECTORS = SHARED / "conformance" / "letta-vectors.json"
TRAJECTORIES = SHARED / "data" / "trajectories"

_PLACEHOLDER = re.compile(r"^<(\d+) chars of '(.)'>$")


@cache
def vectors() -> dict[str, Any]:
    return dict(json.loads(VECTORS.read_text(encoding="utf-8")))


def expand_placeholders(value: Any) -> Any:
    """The vector file abbreviates long filler text as "<N chars of 'c'>"; spell it out."""
    if isinstance(value, str):
        m = _PLACEHOLDER.match(value)
        return m.group(2) * int(m.group(1)) if m else value
    if isinstance(value, list):
        return [expand_placeholders(v) for v in value]
    if isinstance(value, dict):
        return {k: expand_placeholders(v) for k, v in value.items()}
    return value


def trajectory_as_openai(path: Path) -> list[dict[str, Any]]:
    """A shared trajectory file as OpenAI messages (its tool calls spelled the OpenAI way)."""
    return load_conversation(path)


@cache
def trajectory_messages(path: Path) -> list[Message]:
    """A shared trajectory as precis messages, read once per test run."""
    return messages_from_openai(trajectory_as_openai(path))
