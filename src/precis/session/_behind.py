"""The compaction an async session runs behind its turns: started at the soft watermark, waited
for only at the hard one, committed by compare-and-set over whatever was appended meanwhile.

A session owns at most one such task (`Behind`); its steps ask for it with `StartBehind` and
`AwaitBehind`. The async driver starts or awaits the task; the sync driver runs the compaction
at once (nothing can run behind a plain call) and has nothing to await.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from precis.core.steps import Steps
from precis.engine.results import CompactionResult, CompactionStats

# Failures a session keeps for its caller to read (the oldest are let go; each is logged).
MAX_FAILURES = 16
_log = logging.getLogger("precis.session")


class Behind:
    """One session's background compaction: the task, what it did, and how it failed.

    `compactions` are the stats of background compactions that committed and were not yet
    handed to a turn (`take` hands them over); `failures` the exceptions of those that did not,
    newest last — each also logged, so none is lost.
    """

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.task: asyncio.Task[None] | None = None
        self.compactions: list[CompactionStats] = []
        self.failures: deque[BaseException] = deque(maxlen=MAX_FAILURES)

    @property
    def running(self) -> bool:
        """Whether a compaction is under way behind the turns."""
        return self.task is not None and not self.task.done()

    def start(self, compaction: Coroutine[Any, Any, CompactionResult]) -> None:
        """Run the compaction as this session's task (the caller checked none is running)."""
        if self.running:
            compaction.close()
            raise RuntimeError(f"{self.conversation_id}: a compaction already runs behind")
        self.task = asyncio.get_running_loop().create_task(
            self._run(compaction), name=f"precis-compaction:{self.conversation_id}"
        )

    async def _run(self, compaction: Coroutine[Any, Any, CompactionResult]) -> None:
        try:
            result = await compaction
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed compaction changed nothing: logged and kept
            _log.warning(
                "%s: background compaction failed (%s): %s",
                self.conversation_id,
                type(exc).__name__,
                exc,
                exc_info=True,
            )
            self.failures.append(exc)
            return
        if result.compacted:
            self.compactions.append(result.stats)

    def take(self) -> list[CompactionStats]:
        """The stats of background compactions committed since the last take."""
        done, self.compactions = self.compactions, []
        return done

    async def wait(self) -> list[CompactionStats]:
        """Wait for the running compaction (if any) to end; what committed since the last take."""
        task = self.task
        if task is not None:
            # Shielded: a caller cancelled while waiting leaves the compaction to its owner.
            await asyncio.shield(task)
        return self.take()

    async def aclose(self, *, cancel: bool = False) -> None:
        """End the background compaction: wait for it to commit or fail, or (`cancel`) stop it;
        a cancelled compaction wrote nothing unless its commit had already begun."""
        task, self.task = self.task, None
        if task is None:
            return
        if cancel:
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if not cancel:
                raise


@dataclass(frozen=True, slots=True)
class StartBehind:
    """Start this compaction behind the turn; answered with the stats of what ran now."""

    behind: Behind
    steps: Steps[Any, CompactionResult]


@dataclass(frozen=True, slots=True)
class AwaitBehind:
    """Wait for the compaction running behind (the hard watermark); answered with its stats."""

    behind: Behind
