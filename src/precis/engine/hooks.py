"""Pre- and post-compaction hooks (S3): let users steer or veto a compaction without breaking it.

A hook is either a Python callable or a shell command run with ``/bin/sh -c``. Shell hooks follow
Claude Code's convention: a JSON object on stdin, stdout adds summarizer instructions, exit code 2
vetoes (stderr is the reason). A hook that fails or outlives the timeout is reported and ignored;
nothing here ever raises into the compaction that called it. The logic asks for each hook run
(`RunCommand`, `CallHook`); the session's driver performs it.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from precis.core.errors import HookVeto
from precis.core.steps import Steps
from precis.engine.requests import CallHook, CommandResult, HookTimeout, Request, RunCommand

__all__ = [
    "HookContext",
    "HookVeto",
    "Hooks",
    "PostCompactContext",
    "PostHook",
    "PreCompactOutcome",
    "PreHook",
]

_log = logging.getLogger(__name__)

_VETO_EXIT_CODE = 2
_MAX_DETAIL_CHARS = 300
_MAX_NAME_CHARS = 80


@dataclass(frozen=True)
class HookContext:
    """What a pre-compaction hook is told, so it can decide to add instructions or veto."""

    trigger: str
    conversation_id: str
    custom_instructions: str | None = None


@dataclass(frozen=True)
class PostCompactContext:
    """What a post-compaction hook is told, so it can record or forward the result."""

    trigger: str
    conversation_id: str
    stats: Mapping[str, Any]
    summary: str


@dataclass
class PreCompactOutcome:
    """The merged effect of all pre-hooks, so the engine knows whether and how to summarize."""

    instructions: str | None
    vetoed: bool = False
    veto_reason: str | None = None
    reports: list[str] = field(default_factory=list)


PreHook: TypeAlias = str | Callable[[HookContext], str | Awaitable[str | None] | None]
PostHook: TypeAlias = str | Callable[[PostCompactContext], Awaitable[None] | None]


def _hook_name(hook: object) -> str:
    """Names a hook in reports so a user can tell which one misbehaved."""
    if isinstance(hook, str):
        text = " ".join(hook.split())
        if len(text) > _MAX_NAME_CHARS:
            # Keep both ends: the program is at the start, the script's file name at the end.
            half = (_MAX_NAME_CHARS - 1) // 2
            text = text[:half] + "…" + text[-half:]
        return f"`{text}`"
    name = getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None)
    return str(name) if name else repr(hook)


def _one_line(text: str) -> str:
    """Squashes hook output into one bounded line so each report stays one line."""
    flat = " ".join(text.split())
    if len(flat) > _MAX_DETAIL_CHARS:
        flat = flat[: _MAX_DETAIL_CHARS - 1] + "…"
    return flat


def _join_instructions(parts: Sequence[str | None]) -> str | None:
    """Merges the caller's and the hooks' instructions into one block, or None if all are empty."""
    kept = [part.strip() for part in parts if part and part.strip()]
    return "\n\n".join(kept) if kept else None


def _exit_failure(result: CommandResult) -> str:
    """Describes a non-zero exit in one line, naming a signal when the hook was killed by one."""
    if result.returncode < 0:
        try:
            what = f"killed by {signal.Signals(-result.returncode).name}"
        except ValueError:
            what = f"killed by signal {-result.returncode}"
    else:
        what = f"exited with status {result.returncode}"
    detail = _one_line(result.stderr)
    return f"{what}: {detail}" if detail else what


class Hooks:
    """Runs the configured pre- and post-compaction hooks in order, containing every failure."""

    def __init__(
        self,
        pre: Sequence[PreHook] = (),
        post: Sequence[PostHook] = (),
        *,
        timeout: float = 30.0,
    ) -> None:
        """Keeps the hooks immutable so a running compaction sees a fixed list."""
        if not timeout > 0:
            raise ValueError(f"hook timeout must be positive, got {timeout!r}")
        self.pre: tuple[PreHook, ...] = tuple(pre)
        self.post: tuple[PostHook, ...] = tuple(post)
        self.timeout = float(timeout)

    @classmethod
    def from_commands(
        cls,
        pre_commands: Sequence[str],
        post_commands: Sequence[str],
        timeout: float = 30.0,
    ) -> Hooks:
        """Builds shell-only hooks from settings, skipping blank commands a config may leave."""

        def clean(commands: Sequence[str]) -> list[str]:
            """Accepts a lone string as one command rather than as a sequence of characters."""
            items = [commands] if isinstance(commands, str) else list(commands)
            return [command for command in items if command.strip()]

        return cls(clean(pre_commands), clean(post_commands), timeout=timeout)

    def __bool__(self) -> bool:
        """Lets the engine skip hook work entirely when none are configured."""
        return bool(self.pre or self.post)

    def __repr__(self) -> str:
        """Shows the hook names, which is what a user debugging a config needs."""
        pre = ", ".join(_hook_name(hook) for hook in self.pre)
        post = ", ".join(_hook_name(hook) for hook in self.post)
        return f"Hooks(pre=[{pre}], post=[{post}], timeout={self.timeout:g})"

    def pre_steps(self, context: HookContext) -> Steps[Request, PreCompactOutcome]:
        """Runs pre-hooks in order, merging their instructions and stopping at the first veto."""
        added: list[str | None] = [context.custom_instructions]
        reports: list[str] = []
        payload = {
            "hook_event_name": "PreCompact",
            "trigger": context.trigger,
            "conversation": context.conversation_id,
            "custom_instructions": context.custom_instructions,
        }
        for hook in self.pre:
            name = _hook_name(hook)
            if isinstance(hook, str):
                result = yield RunCommand(hook, payload, self.timeout)
                if isinstance(result, str):
                    reports.append(self._report("pre", name, result))
                elif result.returncode == 0:
                    added.append(result.stdout)
                elif result.returncode == _VETO_EXIT_CODE:
                    reason = result.stderr.strip() or f"pre-compact hook {name} vetoed compaction"
                    reports.append(self._report("pre", name, f"vetoed: {_one_line(reason)}"))
                    return PreCompactOutcome(_join_instructions(added), True, reason, reports)
                else:
                    reports.append(self._report("pre", name, _exit_failure(result)))
                continue
            try:
                value: object = yield CallHook(hook, context, self.timeout)
            except HookVeto as veto:
                reason = str(veto).strip() or f"pre-compact hook {name} vetoed compaction"
                reports.append(self._report("pre", name, f"vetoed: {_one_line(reason)}"))
                return PreCompactOutcome(_join_instructions(added), True, reason, reports)
            except HookTimeout:
                reports.append(self._report("pre", name, f"timed out after {self.timeout:g}s"))
                continue
            except Exception as exc:
                reports.append(self._report("pre", name, _exception_detail(exc)))
                continue
            if value is None or isinstance(value, str):
                added.append(value)
            else:
                detail = f"returned {type(value).__name__}, expected str or None"
                reports.append(self._report("pre", name, detail))
        return PreCompactOutcome(_join_instructions(added), False, None, reports)

    def post_steps(self, context: PostCompactContext) -> Steps[Request, list[str]]:
        """Runs post-hooks in order and returns one report line per hook that failed."""
        reports: list[str] = []
        payload = {
            "hook_event_name": "PostCompact",
            "trigger": context.trigger,
            "conversation": context.conversation_id,
            "stats": dict(context.stats),
            "summary": context.summary,
        }
        for hook in self.post:
            name = _hook_name(hook)
            if isinstance(hook, str):
                result = yield RunCommand(hook, payload, self.timeout)
                if isinstance(result, str):
                    reports.append(self._report("post", name, result))
                elif result.returncode != 0:
                    reports.append(self._report("post", name, _exit_failure(result)))
                continue
            try:
                yield CallHook(hook, context, self.timeout)
            except HookTimeout:
                reports.append(self._report("post", name, f"timed out after {self.timeout:g}s"))
            except Exception as exc:
                reports.append(self._report("post", name, _exception_detail(exc)))
        return reports

    @staticmethod
    def _report(stage: str, name: str, detail: str) -> str:
        """Formats and logs one report line, since a failing hook is logged rather than fatal."""
        line = f"{stage}-compact hook {name} {detail}"
        _log.warning("%s", line)
        return line


def _exception_detail(exc: BaseException) -> str:
    """Describes a hook's exception in one line for its report."""
    message = _one_line(str(exc))
    kind = type(exc).__name__
    return f"failed: {kind}: {message}" if message else f"failed: {kind}"
