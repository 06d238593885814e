"""The drivers: how a sync and an async session perform what the engine asks for.

Everything here does I/O; everything it serves does none. The sync driver calls; the async one
awaits model calls, makes each store call on the loop when its store can make it without
waiting and on a worker thread otherwise, and bounds every hook and summary by its timeout, so
an agent framework's event loop never waits; the threaded one runs the steps themselves on a
worker thread, so their computation does not hold the loop either (one hop per operation: what
a compaction and the service's sessions run on). The sync driver bounds a summary by its
timeout too, waiting for it on a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
from precis.stores.base import WouldWait
from precis.summarize.base import LocalSummarizer

T = TypeVar("T")

# How long a killed shell hook's pipes are drained before giving up on them.
KILL_GRACE_SECONDS = 5.0
# Seconds a session's own thread waits for its next operation before it ends: the operations of
# a turn come close together; after a longer pause (a model call) the next starts a new thread.
IDLE_SECONDS = 5.0


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


async def adrive(steps: Steps[SessionRequest, T], thread: OwnThread | None = None) -> T:
    """Drive session logic on the running event loop without blocking it: each store call is
    made on the loop when its store can make it without waiting (`without_waiting`: a free
    lock, no other writer, no checkpoint due), otherwise off the loop, on `thread` (the
    session's own) when it is free or else on the loop's executor; what must be awaited (a
    model, a hook) is awaited. No hop is made unless a call would wait."""

    async def answer(request: SessionRequest) -> Any:
        if isinstance(request, Call):
            return await _acall(request, thread)
        return await aperform(request, thread)

    return await arun_steps(steps, answer)


async def adrive_in_thread(steps: Steps[SessionRequest, T], thread: OwnThread | None = None) -> T:
    """Drive session logic on a worker thread, so its pure computation (a compaction's scans, a
    view's fitting) never holds the running event loop: store calls and a local summarizer run
    on that thread, what must be awaited (a model, an async hook) is awaited on the loop. The
    thread is the session's own (`thread`) when it is free, else one of the loop's executor.

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
        if thread is None:
            return await asyncio.to_thread(run_steps, steps, answer)
        return await thread.run(run_steps, steps, answer)
    except asyncio.CancelledError:
        abandoned.set()
        for future in list(awaiting):
            future.cancel()
        raise


class OwnThread:
    """An async session's own worker thread, where its operations hop one after another: the
    same thread each time, so a hop is a queue put and one wake of the loop (no executor future
    chained to an asyncio one, no idle pool thread woken in turn), and the store's connection
    is used where it was last used. An operation that finds it busy (another of the session's
    under way: `gather`, an async hook that reads the session) runs on the loop's default
    executor instead, so none waits for another. The thread ends after `idle` seconds without
    work, or at `close` once its operation is done; the next hop starts another."""

    def __init__(self, idle: float = IDLE_SECONDS) -> None:
        self.idle = idle
        self._lane = _Lane()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on this thread (or, busy, the loop's executor), in the caller's context
        variables as `asyncio.to_thread` passes them."""
        lane = self._lane
        if not lane.free.acquire(blocking=False):
            return await asyncio.to_thread(fn, *args)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        try:
            if lane.thread is None or not lane.thread.is_alive():  # not started, ended, forked
                lane.thread = threading.Thread(
                    target=_serve, args=(lane, self.idle), name="precis-session", daemon=True
                )
                lane.thread.start()
            lane.jobs.put(_Job(loop, future, contextvars.copy_context(), fn, args))
        except BaseException:
            lane.free.release()
            raise
        return await future

    @property
    def alive(self) -> bool:
        """Whether the thread is running (it starts at the first hop)."""
        thread = self._lane.thread
        return thread is not None and thread.is_alive()

    def close(self) -> None:
        """End the thread once the operation it runs (if any) is done; a later hop starts
        another."""
        lane, self._lane = self._lane, _Lane()
        lane.jobs.put(None)


class _Lane:
    """One thread's jobs, and the lock held from a job's hand-over until it has run (so a lock
    taken finds the thread idle, and the thread ends only with no job handed over)."""

    __slots__ = ("free", "jobs", "thread")

    def __init__(self) -> None:
        self.free = threading.Lock()
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None


@dataclass(frozen=True, slots=True)
class _Job:
    """A call to make on a session's thread, and the loop's future that waits for it."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    context: contextvars.Context
    fn: Callable[..., Any]
    args: tuple[Any, ...]

    def run(self, free: threading.Lock) -> None:
        """Make the call, free the thread, and hand the outcome to the loop."""
        outcome: tuple[bool, Any]
        try:
            outcome = (True, self.context.run(self.fn, *self.args))
        except BaseException as exc:  # handed to the awaiting caller
            outcome = (False, exc)
        free.release()
        # A closed loop has nobody waiting for the answer.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(_settle, self.future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    """The outcome of a job, given to its future unless the caller stopped waiting."""
    if future.done():
        return
    answered, value = outcome
    if answered:
        future.set_result(value)
    else:
        future.set_exception(value)


def _serve(lane: _Lane, idle: float) -> None:
    """A session thread's life: run the jobs handed over, end when idle or closed."""
    while True:
        try:
            job = lane.jobs.get(timeout=idle)
        except queue.Empty:
            if not lane.free.acquire(blocking=False):
                continue  # a job is being handed over
            lane.thread = None
            lane.free.release()
            return
        if job is None:
            return
        job.run(lane.free)


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


async def aperform(request: SessionRequest, thread: OwnThread | None = None) -> Any:
    """Answer one request by awaiting, with blocking work off the loop (on `thread`, the
    session's own, when it is free)."""
    if isinstance(request, Call):
        return await _acall(request, thread)
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


async def _acall(request: Call, thread: OwnThread | None) -> Any:
    """A store call made on the loop when its store can make it without waiting; any other
    (refused, or a plain function that may block) off the loop."""
    fn, args, kwargs = request.fn, request.args, request.kwargs
    at_once = getattr(getattr(fn, "__self__", None), "without_waiting", None)
    if at_once is not None:
        try:
            return at_once(fn, *args, **kwargs)
        except WouldWait:
            pass  # nothing was done: made where it may wait
    if thread is not None:
        return await thread.run(functools.partial(fn, *args, **kwargs))
    return await asyncio.to_thread(fn, *args, **kwargs)


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
