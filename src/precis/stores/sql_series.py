"""The chart's reads (stores/series.py) in SQL, for SQLite and PostgreSQL alike: the samples
thinned by the database (a window function keeps each stretch's lowest and highest), a page of
markers joined to their samples by key, and the markers counted per stretch of turns by the
database, so the service parses no row the page drops.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import Any

from precis.stores.dialect import Handle
from precis.stores.rows import SAMPLE_COLUMNS, sample_from_row
from precis.stores.samples import PARTS, Sample
from precis.stores.series import MarkerBin, MarkerRow, marker_bins_of

__all__ = ["SQLSeries"]

_COLUMNS = "turn, kind, at, version, in_context, context_window, " + ", ".join(SAMPLE_COLUMNS)


def _total(alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return " + ".join(f"{prefix}{part}_tokens" for part in PARTS)


# Stretch of turn t (1-based) among n turns in s stretches: the i with i*n//s <= t-1 < (i+1)*n//s.
_STRETCH = "(turn * {stretches} - 1) / {turns}"
# PostgreSQL: each stretch's lowest and highest total, the earliest turn on a tie.
_THINNED = (
    f"SELECT {_COLUMNS} FROM ("
    f"SELECT {_COLUMNS}, "
    "ROW_NUMBER() OVER (PARTITION BY stretch ORDER BY total, turn) AS low, "
    "ROW_NUMBER() OVER (PARTITION BY stretch ORDER BY total DESC, turn) AS high FROM ("
    f"SELECT {_COLUMNS}, {_STRETCH} AS stretch, {_total()} AS total "
    "FROM samples WHERE conversation_id = ?) AS t) AS r "
    "WHERE low = 1 OR high = 1 ORDER BY turn"
)
# SQLite: one grouped scan per end, its bare columns taken from the row holding the MIN (MAX);
# SQLite's window functions cost four times the scan.
_THINNED_END = (
    f"SELECT {{end}}({_total()}), {_COLUMNS} FROM samples "
    f"WHERE conversation_id = ? GROUP BY {_STRETCH}"
)
_EVENTS = (
    "SELECT row_id, trigger, mode, at, summary_id, {stats} FROM events "
    "WHERE conversation_id = ? ORDER BY row_id LIMIT ? OFFSET ?"
)
# The first compaction sample of each context version in a range, with the totals of it and of
# the turn before it (primary-key lookups from the grouped scan).
_MADE = (
    f"SELECT c.version, c.turn, {_total('a')}, a.system_tokens + a.tools_tokens, {_total('b')} "
    "FROM (SELECT version, MIN(turn) AS turn FROM samples WHERE conversation_id = ? "
    "AND kind = 'compaction' AND version > ? AND version <= ? GROUP BY version) AS c "
    "JOIN samples AS a ON a.conversation_id = ? AND a.turn = c.turn "
    "LEFT JOIN samples AS b ON b.conversation_id = ? AND b.turn = c.turn - 1"
)
# Each event's marker counted per bin of turns and trigger (`series.marker_bins_of`): event i is
# the (i+1)-th row of the conversation's events, placed at the first compaction sample of
# context version i + 1, its tokens that sample's total and the turn before's. Events and
# samples are paired by version in one grouped pass over both (a join of the two derived tables
# would scan one for each row of the other on SQLite); a version lacking either side is left
# out, so the counts fall short and `marker_bins` counts from the rows instead. The bin is
# `series.bin_of` (turns >= 1 here: whole numbers of ours, written in).
_BINS = (
    "SELECT (m.turn - 1) * {bins} / {turns}, m.trigger, COUNT(*), "
    "MIN(m.version) - 1, MAX(m.version) - 1, MIN(m.turn), MAX(m.turn), "
    "CASE WHEN MIN(m.mode) = MAX(m.mode) THEN MIN(m.mode) END, "
    f"MIN({_total('b')}), MAX({_total('b')}), MIN({_total('a')}), MAX({_total('a')}) "
    "FROM (SELECT version, MAX(trigger) AS trigger, MAX(mode) AS mode, MAX(turn) AS turn FROM ("
    "SELECT ROW_NUMBER() OVER (ORDER BY row_id) AS version, trigger, mode, NULL AS turn "
    "FROM events WHERE conversation_id = ? "
    "UNION ALL SELECT version, NULL, NULL, MIN(turn) FROM samples WHERE conversation_id = ? "
    "AND kind = 'compaction' AND version > 0 GROUP BY version) AS u "
    "GROUP BY version HAVING COUNT(*) = 2) AS m "
    "JOIN samples AS a ON a.conversation_id = ? AND a.turn = m.turn "
    "JOIN samples AS b ON b.conversation_id = ? AND b.turn = m.turn - 1 "
    "GROUP BY (m.turn - 1) * {bins} / {turns}, m.trigger"
)
# More rows than any page asks for: LIMIT without a bound, in a form both databases take.
_ALL = 2**62


class SQLSeries:
    """`SeriesReads` for `SQLStore`s (mixed in by SQLiteStore and PostgresStore)."""

    _q: Any
    # Whether the database thins with window functions (PostgreSQL) or grouped scans (SQLite).
    _window_thinning = False

    def _transaction(self, *, write: bool) -> AbstractContextManager[Handle]:
        raise NotImplementedError

    def _conversation_row(self, db: Handle, conversation_id: str, *, lock: bool = False) -> Any:
        raise NotImplementedError

    def thinned_samples(self, conversation_id: str, most: int) -> tuple[int, list[Sample]]:
        """How many samples there are (turns count 1, 2, … without gaps), and at most `most`
        of them: the lowest and the highest of each stretch, chosen by the database."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            row = db.execute(
                self._q("SELECT MAX(turn) FROM samples WHERE conversation_id = ?"),
                (conversation_id,),
            ).fetchone()
            turns = 0 if row is None or row[0] is None else int(row[0])
            if turns <= most:
                query = f"SELECT {_COLUMNS} FROM samples WHERE conversation_id = ? ORDER BY turn"
                rows = db.execute(self._q(query), (conversation_id,)).fetchall()
            else:
                # Two whole numbers of ours, written in: integer division on either database.
                sizes = {"stretches": max(1, most // 2), "turns": turns}
                if self._window_thinning:
                    query = _THINNED.format(**sizes)
                    rows = db.execute(self._q(query), (conversation_id,)).fetchall()
                else:
                    kept: dict[int, Any] = {}
                    for end in ("MIN", "MAX"):
                        query = _THINNED_END.format(end=end, **sizes)
                        for row in db.execute(self._q(query), (conversation_id,)).fetchall():
                            kept.setdefault(int(row[1]), row[1:])
                    rows = [kept[turn] for turn in sorted(kept)]
        return turns, [sample_from_row(r) for r in rows]

    def compaction_count(self, conversation_id: str) -> int:
        """How many compaction events the conversation has (an index count)."""
        with self._transaction(write=False) as db:
            self._conversation_row(db, conversation_id)
            row = db.execute(
                self._q("SELECT COUNT(*) FROM events WHERE conversation_id = ?"),
                (conversation_id,),
            ).fetchone()
        return int(row[0])

    def marker_rows(
        self,
        conversation_id: str,
        *,
        offset: int = 0,
        limit: int | None = None,
        stats: bool = False,
    ) -> list[MarkerRow]:
        """The markers of events `offset` … `offset + limit - 1`: those events' rows, each joined
        by key to the sample its commit made and the one before (see `marker_rows_of`)."""
        count = _ALL if limit is None else max(0, limit)
        cid = conversation_id
        select = self._q(_EVENTS.format(stats="stats" if stats else "NULL"))
        with self._transaction(write=False) as db:
            self._conversation_row(db, cid)
            events = db.execute(select, (cid, count, offset)).fetchall()
            if not events:
                return []
            last = offset + len(events)
            made = {
                int(row[0]): row[1:]
                for row in db.execute(self._q(_MADE), (cid, offset, last, cid, cid)).fetchall()
            }
            return [
                self._marker(db, cid, offset + i + 1, event, made.get(offset + i + 1), stats)
                for i, event in enumerate(events)
            ]

    def marker_bins(self, conversation_id: str, bins: int) -> list[MarkerBin]:
        """The markers counted per bin of turns and trigger by the database (one row per bin
        and trigger). A conversation with an event placed otherwise than at the compaction
        sample it made and the turn before (one made before samples were kept) is counted
        from its every marker, as the rows give it."""
        cid = conversation_id
        with self._transaction(write=False) as db:
            self._conversation_row(db, cid)
            row = db.execute(
                self._q("SELECT MAX(turn) FROM samples WHERE conversation_id = ?"), (cid,)
            ).fetchone()
            turns = 0 if row is None or row[0] is None else int(row[0])
            count = db.execute(
                self._q("SELECT COUNT(*) FROM events WHERE conversation_id = ?"), (cid,)
            ).fetchone()[0]
            found = [
                MarkerBin(
                    int(r[0]),
                    r[1],
                    int(r[2]),
                    int(r[3]),
                    int(r[4]),
                    int(r[5]),
                    int(r[6]),
                    r[7],
                    (int(r[8]), int(r[9])),
                    (int(r[10]), int(r[11])),
                )
                for r in db.execute(
                    self._q(_BINS.format(bins=max(1, bins), turns=max(1, turns))),
                    (cid, cid, cid, cid),
                ).fetchall()
            ]
        if sum(b.count for b in found) == count:
            return sorted(found, key=lambda b: (b.bin, b.first))
        return marker_bins_of(self.marker_rows(cid), turns, bins)

    def _marker(
        self, db: Handle, cid: str, version: int, event: Any, made: Any, stats: bool
    ) -> MarkerRow:
        """A marker from its event row and the samples its commit made (`made`: turn, total,
        floor, total of the turn before); one made before samples were kept, or at the first
        turn, is placed and counted from its stats as `marker_rows_of` does."""
        row_id, trigger, mode, at, summary_id, text = event
        if made is not None and made[3] is not None and text is None:  # the usual marker
            return MarkerRow(version - 1, trigger, mode, at, summary_id, made[0], made[3], made[1])
        turn, after, floor, before = (None, None, 0, None) if made is None else made
        parsed: dict[str, Any] | None = json.loads(text) if text is not None else None
        if turn is None or before is None:
            if parsed is None:
                found = db.execute(
                    self._q("SELECT stats FROM events WHERE row_id = ?"), (row_id,)
                ).fetchone()
                parsed = json.loads(found[0])
            if turn is None:
                turn, floor = self._near(db, cid, version)
                after = _plus(parsed.get("context_tokens_after"), floor)
            before = _plus(parsed.get("context_tokens_before"), int(floor))
        return MarkerRow(
            version - 1,
            trigger,
            mode,
            at,
            summary_id,
            int(turn),
            None if before is None else int(before),
            None if after is None else int(after),
            parsed if stats else None,
        )

    def _near(self, db: Handle, cid: str, version: int) -> tuple[int, int]:
        """The first sample at or after context `version` (else the last): its turn and the
        tokens of its system prompt and tools; (0, 0) without samples."""
        floor = "system_tokens + tools_tokens"
        row = db.execute(
            self._q(
                f"SELECT turn, {floor} FROM samples WHERE conversation_id = ? AND version >= ? "
                "ORDER BY turn LIMIT 1"
            ),
            (cid, version),
        ).fetchone()
        if row is None:
            row = db.execute(
                self._q(
                    f"SELECT turn, {floor} FROM samples WHERE conversation_id = ? "
                    "ORDER BY turn DESC LIMIT 1"
                ),
                (cid,),
            ).fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))


def _plus(value: Any, floor: int) -> int | None:
    return value + floor if isinstance(value, int) else None
