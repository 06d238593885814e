"""Which conversations this process just wrote to, so the inspector's live streams wake on a
commit instead of polling the store.

Within one process only: a write by another process (the CLI, another worker) is seen at the
stream's next keepalive, when it looks again.
"""

from __future__ import annotations

import asyncio
import threading

import anyio

__all__ = ["Changes"]


class Changes:
    """Waiters per conversation name; `signal` wakes them all, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}

    def watch(self, name: str) -> asyncio.Future[None]:
        """A future the next `signal(name)` completes; made before reading, so no write between
        the read and the wait is missed."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiting.setdefault(name, set()).add(future)
        return future

    def signal(self, name: str) -> None:
        """Wake every stream watching `name`."""
        with self._lock:
            futures = self._waiting.pop(name, set())
        for future in futures:
            future.get_loop().call_soon_threadsafe(_settle, future)

    async def wait(self, future: asyncio.Future[None], seconds: float) -> bool:
        """Whether the watched conversation changed within `seconds`."""
        with anyio.move_on_after(seconds):
            await asyncio.shield(future)
            return True
        return False

    def drop(self, name: str, future: asyncio.Future[None]) -> None:
        """End a watch (signalled or not), so a closed stream leaves nothing behind."""
        with self._lock:
            waiting = self._waiting.get(name)
            if waiting is not None:
                waiting.discard(future)
                if not waiting:
                    del self._waiting[name]

    @property
    def watching(self) -> int:
        """How many watches are open (a test sees a closed stream leave none behind)."""
        with self._lock:
            return sum(len(w) for w in self._waiting.values())


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
