"""What the engine asks its driver to do: the only I/O a compaction ever needs.

The engine's logic yields these and is sent the answers (see `precis.core.steps`); a sync
session answers them with plain calls, an async session without blocking its event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from precis.summarize.base import Summarizer, SummaryRequest


@dataclass(frozen=True, slots=True)
class Call:
    """A blocking call, such as a store read or write; an async driver runs it off its loop."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Summarize:
    """Ask a summarizer for a summary; answered with its text (or its error thrown back)."""

    summarizer: Summarizer
    request: SummaryRequest


@dataclass(frozen=True, slots=True)
class RunCommand:
    """Run a shell hook with JSON on stdin; answered with a `CommandResult` or a failure line."""

    command: str
    payload: Mapping[str, Any]
    timeout: float


@dataclass(frozen=True, slots=True)
class CallHook:
    """Call a Python hook (maybe async) with its context; `HookTimeout` when it overruns."""

    hook: Callable[[Any], Any]
    context: Any
    timeout: float


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A shell hook that ran to its end, kept apart from failures to tell exit codes apart."""

    returncode: int
    stdout: str
    stderr: str


class HookTimeout(Exception):
    """A Python hook outlived its timeout; kept apart from a TimeoutError the hook raised."""


Request: TypeAlias = Call | Summarize | RunCommand | CallHook
