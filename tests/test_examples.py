"""The scripts in examples/ run as they are, with no API key, and show what they promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_there_is_an_example_per_framework() -> None:
    assert {p.stem for p in EXAMPLES} >= {
        "langchain_agent",
        "pydantic_ai_agent",
        "openai_agents_session",
        "adk_agent",
        "llama_index_agent",
    }


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_runs_without_a_key_and_recalls_a_compacted_original(script: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "compactions: 0" not in done.stdout
    assert "audit-0003" in done.stdout.split("recall audit-0003:")[1], done.stdout
