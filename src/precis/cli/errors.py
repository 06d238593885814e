"""How the CLI reports a failure: one line on stderr and an exit code, chosen by the error's class.

`reported()` wraps everything the app parses and runs (see `precis.cli.app`), so commands raise
and never print errors themselves. The text of an error is shown, never read: the class alone
decides the exit code and the label. An error whose class is not here is a bug, and its traceback
is the report.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

import typer

from precis.core.errors import (
    CompactionError,
    InvalidInput,
    InvalidSetting,
    ModelError,
    PrecisError,
    SettingsError,
    StoreError,
    SummarizerError,
)

# 1 for an operation that failed, 2 for a bad invocation (as typer and click use for usage errors).
EXIT_FAILED = 1
EXIT_USAGE = 2
# What a shell reports for a process ended by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130


class CliUsageError(InvalidInput):
    """A bad invocation the CLI finds itself: an option that needs another, a refused address."""


class CliFailure(PrecisError):
    """An operation the CLI finds failed: nothing to compact, a file it cannot read."""


class InterruptedAfterWrite(KeyboardInterrupt):
    """Ctrl-C that came after a command's write committed; the text says what is stored now."""


# The first class of an error's MRO found here gives its exit code and label.
OUTCOMES: Mapping[type[BaseException], tuple[int, str]] = MappingProxyType(
    {
        typer.TyperException: (EXIT_USAGE, "usage"),  # typer's own: a bad option, a bad choice
        CliUsageError: (EXIT_USAGE, "error"),
        SettingsError: (EXIT_USAGE, "invalid setting"),
        InvalidSetting: (EXIT_USAGE, "invalid setting"),
        InvalidInput: (EXIT_USAGE, "invalid input"),
        CompactionError: (EXIT_FAILED, "cannot compact"),
        StoreError: (EXIT_FAILED, "error"),
        ModelError: (EXIT_FAILED, "error"),
        SummarizerError: (EXIT_FAILED, "error"),
        CliFailure: (EXIT_FAILED, "error"),
        PrecisError: (EXIT_FAILED, "error"),
        OSError: (EXIT_FAILED, "error"),
    }
)


def outcome(error: BaseException) -> tuple[int, str] | None:
    """The exit code and one stderr line for an error, or None for one the CLI does not expect."""
    found = next((OUTCOMES[c] for c in type(error).__mro__ if c in OUTCOMES), None)
    if found is None or isinstance(error, BrokenPipeError):  # typer quiets a closed stdout
        return None
    code, label = found
    text = error.format_message() if isinstance(error, typer.TyperException) else str(error)
    line = f"precis: {label}: {' '.join(text.splitlines())}"
    return code, line + _help_hint(error)


def _help_hint(error: BaseException) -> str:
    """Where typer's own usage errors point: the failing command's --help."""
    ctx: Any = getattr(error, "ctx", None)
    path = getattr(ctx, "command_path", None)
    return f" (see '{path} --help')" if isinstance(path, str) and path else ""


@contextmanager
def reported() -> Iterator[None]:
    """Turn an expected error into its one line on stderr and its exit code."""
    try:
        yield
    except KeyboardInterrupt as interrupt:
        # Nothing half-done was committed: a compaction or a turn writes in one transaction; a
        # command whose write had committed says what it stored.
        if isinstance(interrupt, InterruptedAfterWrite):
            print(f"precis: interrupted; {interrupt}", file=sys.stderr)
        else:
            print("precis: interrupted; the store is as it was before this step", file=sys.stderr)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as error:
        found = outcome(error)
        if found is None:
            raise
        code, line = found
        print(line, file=sys.stderr, flush=True)
        raise typer.Exit(code) from None
