"""Running `precis` as a test: in-process through typer's CliRunner, or as a real subprocess.

In-process is the default (no interpreter start per call); `subprocess=True` keeps a few tests on
the real console entry, where exit codes and stream handling are the point.
"""

from __future__ import annotations

import contextlib
import os
import subprocess as sp
import sys
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from precis.cli import app

# Settings a developer's shell may carry; each run starts without them.
_CLEARED = (
    "PRECIS_CONTEXT_WINDOW",
    "PRECIS_STORE",
    "PRECIS_SUMMARIZER",
    "PRECIS_PROVIDER",
    "PRECIS_MODEL",
    "PRECIS_BASE_URL",
)


@dataclass(frozen=True)
class Ran:
    """What a run printed and how it exited."""

    returncode: int
    stdout: str
    stderr: str


def run_precis(
    home: Path,
    *args: str,
    check: bool = True,
    stdin: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    clear_all: bool = False,
    subprocess: bool = False,
) -> Ran:
    """Run `precis ARGS` with PRECIS_HOME=home; fail on a traceback, and on exit != 0 if check."""
    cleared = [k for k in os.environ if k.startswith("PRECIS_")] if clear_all else list(_CLEARED)
    extra = {"PRECIS_HOME": str(home), "PYTHONIOENCODING": "utf-8", **(env or {})}
    if subprocess:
        full = {k: v for k, v in os.environ.items() if k not in cleared} | extra
        done = sp.run(
            [sys.executable, "-m", "precis.cli", *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=full,
            cwd=cwd,
            timeout=120,
            input=stdin,
        )
        ran = Ran(done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in ran.stderr, ran.stderr
    else:
        overrides: dict[str, str | None] = {k: None for k in cleared} | dict(extra)
        with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
            result = CliRunner().invoke(
                app, list(args), input=stdin, env=overrides, prog_name="precis"
            )
        error = result.exception
        assert error is None or isinstance(error, SystemExit), repr(error)
        ran = Ran(result.exit_code, result.stdout, result.stderr)
    if check:
        assert ran.returncode == 0, ran.stderr
    return ran
