"""The drivers: how a sync and an async session perform what the engine asks for.

Everything here does I/O; everything it serves does none. The sync driver calls; the async one
awaits model calls, runs blocking store calls on a worker thread, and bounds every hook and
summary by its timeout, so an agent framework's event loop is never blocked; the threaded one
runs the steps themselves on a worker thread, so their computation does not block it either
(one hop per operation: what `AsyncSession` runs on); the in-place one answers store calls on
the loop, for a store whose calls never wait.
The sync driver bounds a summary by its timeout too, waiting for it on a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import json
import os
import signal
import subprocess
import threading
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from precis.core.errors import ModelTimeout
from precis.core.steps import Steps, arun_steps, run_steps
from precis.engine.requests import (
    Call,
    CommandResult,
    HookTimeout,
    Request,
    RunCommand,
    Summarize,
)
from precis.providers.base import ChatProvider, Completion
from precis.session._behind import AwaitBehind, StartBehind
from precis.summarize.base import LocalSummarizer

T = TypeVar("T")

# How long a killed shell hook's pipes are drained before giving up on them.
KILL_GRACE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Complete:
    """Ask the agent's model for its next reply."""

    provider: ChatProvider
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] | None = None


SessionRequest: TypeAlias = Request | Complete | StartBehind | AwaitBehind


def drive(steps: Steps[SessionRequest, T]) -> T:
    """Drive session logic to its result with plain calls."""
    return run_steps(steps, perform)


async def adrive(steps: Steps[SessionRequest, T]) -> T:
    """Drive session logic to its result without blocking the running event loop."""
    return await arun_steps(steps, aperform)


async def adrive_in_place(steps: Steps[SessionRequest, T]) -> T:
    """Drive session logic on the loop with store calls answered in place: for a store whose
    calls never wait (`MemoryStore`), where a hop to a worker thread would cost more than the
    call; what must be awaited (a model, a hook) is awaited."""
    return await arun_steps(steps, _aperform_in_place)


async def _aperform_in_place(request: SessionRequest) -> Any:
    if isinstance(request, Call):
        return request.fn(*request.args, **request.kwargs)
    return await aperform(request)


async def adrive_in_thread(steps: Steps[SessionRequest, T]) -> T:
    """Drive session logic on a worker thread, so its pure computation (a compaction's scans, a
    view's fitting) never holds the running event loop: store calls and a local summarizer run
    on that thread, what must be awaited (a model, an async hook) is awaited on the loop.

    Cancelled, the logic is abandoned at its next request, like a cancelled `adrive`."""
    loop = asyncio.get_running_loop()
    abandoned = threading.Event()
    awaiting: set[concurrent.futures.Future[Any]] = set()

    def answer(request: SessionRequest) -> Any:
        if abandoned.is_set():
            raise _Abandoned
        if isinstance(request, Call):
            return request.fn(*request.args, **request.kwargs)
        if isinstance(request, Summarize) and isinstance(request.summarizer, LocalSummarizer):
            return request.summarizer.summarize(request.request)
        future = asyncio.run_coroutine_threadsafe(aperform(request), loop)
        awaiting.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise _Abandoned from None
        finally:
            awaiting.discard(future)

    try:
        return await asyncio.to_thread(run_steps, steps, answer)
    except asyncio.CancelledError:
        abandoned.set()
        for future in list(awaiting):
            future.cancel()
        raise


class _Abandoned(BaseException):
    """Thrown into logic whose caller was cancelled: not an `Exception`, so no step handles it
    as a failed request (a fallback, a retry); the logic is closed where it stands."""


def perform(request: SessionRequest) -> Any:
    """Answer one request by calling."""
    if isinstance(request, Call):
        return request.fn(*request.args, **request.kwargs)
    if isinstance(request, Summarize):
        return _summary_within(request)
    if isinstance(request, Complete):
        return request.provider.complete(request.messages, request.tools)
    if isinstance(request, RunCommand):
        return _run_command(request)
    if isinstance(request, StartBehind):  # nothing runs behind a plain call: compact now
        result = drive(request.steps)
        return [result.stats] if result.compacted else []
    if isinstance(request, AwaitBehind):  # no task of this driver's can be running
        return request.behind.take()
    value = request.hook(request.context)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError("an async hook needs an AsyncSession; this Session is sync")
    return value


async def aperform(request: SessionRequest) -> Any:
    """Answer one request by awaiting, with blocking work off the loop."""
    if isinstance(request, Call):
        if _never_waits(request.fn):  # in memory: no hop to a thread is worth it
            return request.fn(*request.args, **request.kwargs)
        return await asyncio.to_thread(request.fn, *request.args, **request.kwargs)
    if isinstance(request, Summarize):
        return await _summary(request)
    if isinstance(request, Complete):
        return await request.provider.acomplete(request.messages, request.tools)
    if isinstance(request, RunCommand):
        return await _arun_command(request)
    if isinstance(request, StartBehind):
        request.behind.start(adrive_in_thread(request.steps))
        return []
    if isinstance(request, AwaitBehind):
        return await request.behind.wait()
    value = request.hook(request.context)
    if inspect.isawaitable(value):
        return await _await_hook(value, request.timeout)
    return value


def _never_waits(fn: Any) -> bool:
    """Whether this store method may run on the event loop (its store says `waits = False`)."""
    return getattr(getattr(fn, "__self__", None), "waits", True) is False


async def _summary(request: Summarize) -> str:
    """A summary awaited within its timeout; running out is the model's failure, named."""
    timeout = request.request.timeout
    try:
        return await asyncio.wait_for(request.summarizer.asummarize(request.request), timeout)
    except ModelTimeout:
        raise
    except TimeoutError:
        raise _no_answer(request) from None


def _summary_within(request: Summarize) -> Any:
    """A summary within its timeout, as `_summary` bounds it: made on a worker thread, which is
    left to end on its own (its answer unused) when it overruns. One computed without I/O
    (`LocalSummarizer`) is made here, as an async driver makes it on its loop."""
    summarizer, timeout = request.summarizer, request.request.timeout
    if timeout is None or isinstance(summarizer, LocalSummarizer):
        return summarizer.summarize(request.request)
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, summarizer.summarize(request.request)))
        except BaseException as exc:  # handed to the waiting caller
            outcome.append((False, exc))
        finally:
            done.set()

    # With the caller's context variables, as `asyncio.to_thread` passes them (tracing, say).
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(run,), name="precis-summary", daemon=True).start()
    if not done.wait(timeout):
        raise _no_answer(request)
    answered, value = outcome[0]
    if not answered:
        raise value
    return value  # checked by the compaction, as any summarizer's answer is


def _no_answer(request: Summarize) -> ModelTimeout:
    timeout = request.request.timeout
    return ModelTimeout(f"summarizer {request.summarizer.name!r}: no answer within {timeout:g}s")


def completion(answer: Any) -> Completion:
    """The answer to a `Complete`, typed."""
    assert isinstance(answer, Completion)
    return answer


def _payload(request: RunCommand) -> bytes:
    return json.dumps(request.payload, ensure_ascii=False, default=str).encode("utf-8")


def _kill_group(pid: int, kill: Any) -> None:
    """Kill the hook's whole process group, so children it spawned cannot outlive it."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        # The group is already gone; kill the leader directly in case it was not a group leader.
        with contextlib.suppress(ProcessLookupError):
            kill()


def _finished(returncode: int | None, stdout: bytes, stderr: bytes) -> CommandResult:
    return CommandResult(
        returncode=returncode if returncode is not None else -1,
        stdout=stdout.decode("utf-8", errors="replace"),
        stderr=stderr.decode("utf-8", errors="replace"),
    )


def _timed_out(timeout: float) -> str:
    return f"timed out after {timeout:g}s and was killed"


def _run_command(request: RunCommand) -> CommandResult | str:
    """One shell hook, blocking: its result, or a one-line failure."""
    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", request.command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return f"could not start: {exc}"
    try:
        stdout, stderr = process.communicate(_payload(request), timeout=request.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid, process.kill)
        # Drain the pipes and reap the shell so no zombie or open descriptor is left behind.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=KILL_GRACE_SECONDS)
        return _timed_out(request.timeout)
    except BaseException:
        _kill_group(process.pid, process.kill)
        raise
    return _finished(process.returncode, stdout, stderr)


async def _arun_command(request: RunCommand) -> CommandResult | str:
    """One shell hook, awaited: its result, or a one-line failure."""
    try:
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            request.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return f"could not start: {exc}"
    try:
        stdout, stderr = await asyncio.wait_for(
            process.communicate(_payload(request)), request.timeout
        )
    except TimeoutError:
        _kill_group(process.pid, process.kill)
        if process.stdin is not None:
            process.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.communicate(), KILL_GRACE_SECONDS)
        return _timed_out(request.timeout)
    except BaseException:
        _kill_group(process.pid, process.kill)
        raise
    return _finished(process.returncode, stdout, stderr)


async def _await_hook(value: Awaitable[Any], timeout: float) -> Any:
    """An async hook, bounded like a shell hook and cancelled when it overruns."""
    task = asyncio.ensure_future(value)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:
        task.cancel()
        raise
    if not done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise HookTimeout
    return task.result()
