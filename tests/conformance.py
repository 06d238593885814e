"""The data the suite carries in tests/data: letta-code's vectors and real conversations.

Every path is inside the repository. A missing file fails the run naming the path; it never turns
into a skip or an empty parametrization.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from precis.core.messages import Message, messages_from_openai
from precis.eval import load_conversation

DATA = Path(__file__).resolve().parent / "data"
VECTORS = DATA / "conformance" / "letta-vectors.json"
TRAJECTORIES = DATA / "trajectories"
REFERENCES = TRAJECTORIES / "reference_summaries"

_PLACEHOLDER = re.compile(r"^<(\d+) chars of '(.)'>$")


class MissingTestData(RuntimeError):
    """A data file the suite needs is not in tests/data."""


def require(path: Path) -> Path:
    """The path itself, or a failure that names it."""
    if not path.exists():
        raise MissingTestData(f"test data missing: {path}")
    return path


def require_glob(folder: Path, pattern: str, *, at_least: int = 1) -> list[Path]:
    """The sorted matches of a pattern, failing (never empty) when fewer than expected exist."""
    found = sorted(require(folder).glob(pattern))
    if len(found) < at_least:
        raise MissingTestData(f"test data missing: {folder / pattern} matched {len(found)} files")
    return found


TRAJECTORY_FILES = require_glob(TRAJECTORIES, "*.jsonl", at_least=15)
REFERENCE_FILES = require_glob(REFERENCES, "*.json", at_least=3)


def trajectory(name: str) -> Path:
    """One conversation file by its name, which must exist."""
    return require(TRAJECTORIES / name)


@cache
def vectors() -> dict[str, Any]:
    return dict(json.loads(require(VECTORS).read_text(encoding="utf-8")))


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
    """A trajectory file as OpenAI messages (its tool calls spelled the OpenAI way)."""
    return load_conversation(require(path))


@cache
def trajectory_messages(path: Path) -> list[Message]:
    """A trajectory as precis messages, read once per test run."""
    return messages_from_openai(trajectory_as_openai(path))
