"""One digest of what precis does over the peers bench, to show a speed change changed nothing.

Replays the shared conversations as `peers.py` does (precis only, its fake summary) with the
clock and the message ids fixed, and hashes every compaction's stats, every stored context after
a consult (contents and metadata: summaries, ledgers, audits), the prompt sent, the compaction
events and every composition sample, at each window given (default 2000 4000 8000 16000):

    .venv/bin/python bench/peers_digest.py [--window W ...] [--src DIR]

`--src` imports precis from another tree (e.g. an export of main), so two versions are compared
on the same conversations. Prints one digest per window and one over all; equal digests, same
behaviour. The clock and the ids run on from one window to the next, so a window's digest is the
one printed when it comes first: `tests/test_peers_digest.py` holds window 2000's (the window
with the most compactions) to its committed value.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WINDOWS = (2000, 4000, 8000, 16000)


def _plain(value: Any) -> Any:
    """Dataclasses, tuples and mappings as JSON-able data, with a stable order."""
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


@contextmanager
def fixed_clock_and_ids() -> Iterator[None]:
    """A clock that ticks one microsecond per reading and ids that count, both deterministic,
    from their start; the store's own clock and ids are back once the block ends."""
    import datetime as real

    from precis.stores import base

    start = real.datetime(2026, 1, 1, tzinfo=real.UTC)
    ticks = [0]

    class Clock(real.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            ticks[0] += 1
            return start + real.timedelta(microseconds=ticks[0])

    counter = [0]

    def new(self: Any) -> str:
        counter[0] += 1
        return f"msg_{counter[0]:029x}"

    clock, ids = base.datetime, base.MessageIds.new
    base.datetime = Clock  # type: ignore[misc]
    base.MessageIds.new = new  # type: ignore[method-assign]
    try:
        yield
    finally:
        base.datetime = clock  # type: ignore[misc]
        base.MessageIds.new = ids  # type: ignore[method-assign]


def digest(window: int) -> str:
    sys.path.insert(0, str(ROOT / "bench"))
    import peers

    from precis.core.errors import CompactionError
    from precis.engine.settings import CompactionSettings
    from precis.session import Session
    from precis.stores.memory import MemoryStore

    h = hashlib.sha256()

    def feed(tag: str, value: Any) -> None:
        h.update(tag.encode())
        h.update(json.dumps(_plain(value), sort_keys=True, ensure_ascii=False).encode())

    for path in peers.conversations():
        items = peers.load(path)
        store = MemoryStore()
        session = Session(
            store,
            path.stem,
            summarizer=peers.FixedSummarizer(),
            settings=CompactionSettings(context_window=window),
        )
        calls = set(peers.model_calls(items))
        for i, item in enumerate(items):
            if i == 0 and peers.has_system(items):
                session.set_system_prompt(item["content"])
            else:
                session.append(item)
            if i not in calls:
                continue
            try:
                done = session.maybe_compact()
            except CompactionError as exc:
                feed("error", str(exc))
                done = []
            feed("stats", [s.as_dict() for s in done])
            feed("prompt", session.prompt())
            if done:
                feed("context", store.context(path.stem))
        feed("events", store.events(path.stem))
        feed("samples", store.samples(path.stem))
        feed("history", store.history(path.stem))
    return h.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--window", type=int, action="append")
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src.resolve()))
    import precis

    print(f"precis from {Path(precis.__file__).parent}")
    total = hashlib.sha256()
    with fixed_clock_and_ids():
        for window in args.window or WINDOWS:
            one = digest(window)
            total.update(one.encode())
            print(f"window {window}: {one}")
    print(f"all: {total.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
