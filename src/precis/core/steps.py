"""Logic that asks for its I/O instead of doing it, and the two loops that answer it.

A piece of sans-IO logic is a generator: it yields a request (read this, ask the model that), is
sent the answer, and returns its result. An exception the request raised is thrown back in at
the yield, so the logic handles it where it asked. `run_steps` answers with plain calls;
`arun_steps` awaits, so the same logic runs in a script and inside any event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from contextlib import closing
from typing import Any, TypeAlias, TypeVar

R = TypeVar("R")
T = TypeVar("T")

# Yields requests of type R, is sent their answers, returns a T.
Steps: TypeAlias = Generator[R, Any, T]


def run_steps(steps: Steps[R, T], perform: Callable[[R], Any]) -> T:
    """Drive `steps` to its result, answering each request with `perform(request)`."""
    answer: Any = None
    error: BaseException | None = None
    with closing(steps):  # a cancelled or failed driver leaves no suspended logic behind
        while True:
            try:
                request = steps.throw(error) if error is not None else steps.send(answer)
            except StopIteration as stop:
                result: T = stop.value
                return result
            try:
                answer, error = perform(request), None
            except Exception as exc:
                answer, error = None, exc


async def arun_steps(steps: Steps[R, T], perform: Callable[[R], Awaitable[Any]]) -> T:
    """Drive `steps` to its result, answering each request with `await perform(request)`."""
    answer: Any = None
    error: BaseException | None = None
    with closing(steps):  # a cancelled or failed driver leaves no suspended logic behind
        while True:
            try:
                request = steps.throw(error) if error is not None else steps.send(answer)
            except StopIteration as stop:
                result: T = stop.value
                return result
            try:
                answer, error = await perform(request), None
            except Exception as exc:
                answer, error = None, exc
