"""A SQL store's composition samples: one row per turn, each numbered after the latest, under
the conversation's lock (mixed into `SQLStore`, so an append records its sample in its own
transaction)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from precis.stores.dialect import Handle
from precis.stores.rows import SAMPLE_INSERT, SAMPLE_SELECT, sample_from_row, sample_values
from precis.stores.samples import Sample, check_sample, grown, numbered

__all__ = ["SQLSamples"]


class SQLSamples:
    """The sample methods of the store contract, over a SQL store's transactions."""

    _q: Any

    def _transaction(self, *, write: bool) -> AbstractContextManager[Handle]:
        raise NotImplementedError

    def _conversation_row(self, db: Handle, conversation_id: str, *, lock: bool = False) -> Any:
        raise NotImplementedError

    def add_sample(
        self, conversation_id: str, sample: Sample, *, grow: bool = False
    ) -> Sample | None:
        """Record the sample as the next turn, under the conversation's lock."""
        check_sample(conversation_id, sample)
        with self._transaction(write=True) as db:
            compactions = self._conversation_row(db, conversation_id, lock=True).compactions
            latest = self._latest_sample(db, conversation_id)
            if grow:
                if latest is None:
                    return None
                sample = grown(latest, sample)
            return self._insert_sample(db, conversation_id, sample, latest, compactions)

    def _latest_sample(self, db: Handle, conversation_id: str) -> Sample | None:
        row = db.execute(
            self._q(f"{SAMPLE_SELECT} ORDER BY turn DESC LIMIT 1"), (conversation_id,)
        ).fetchone()
        return None if row is None else sample_from_row(row)

    def _insert_sample(
        self,
        db: Handle,
        conversation_id: str,
        sample: Sample,
        latest: Sample | None,
        compactions: int,
    ) -> Sample:
        """Record `sample` as the turn after `latest`."""
        stored = numbered(sample, 1 if latest is None else latest.turn + 1, compactions)
        db.execute(self._q(SAMPLE_INSERT), sample_values(conversation_id, stored))
        return stored

    def samples(self, conversation_id: str, *, since: int = 0) -> list[Sample]:
        """The samples after turn `since`, oldest first."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            rows = db.execute(
                self._q(f"{SAMPLE_SELECT} AND turn > ? ORDER BY turn"), (conversation_id, since)
            ).fetchall()
        return [sample_from_row(row) for row in rows]

    def latest_sample(self, conversation_id: str) -> Sample | None:
        """The newest sample, or None before the first."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            return self._latest_sample(db, conversation_id)
