"""`precis demo`: a scripted session in a throwaway home, to watch precis compact it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from precis.cli import demos
from precis.cli.demos import Scenario


def demo(
    scenario: Annotated[
        Scenario,
        typer.Option(help="recall (S1: a fact compacted away, then found) | red-line (S3)"),
    ] = "recall",
) -> None:
    """Replay a scripted session in a throwaway home and watch precis compact it."""
    with tempfile.TemporaryDirectory(prefix="precis-demo-") as tmp:
        demos.run(scenario, Path(tmp))
