"""The inspector's server time at scale: a 22,500-message conversation with 2,500 compactions
(written straight to a SQLite store), each page timed in-process over a warm service.

    .venv/bin/python bench/inspector_scale.py [--rounds N]

Prints each page's size (raw and gzipped) and its median and worst time over the rounds; the
budget is 200 ms per page and 300 KB per page (the browser test holds the size).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from inspector_data import long_conversation  # noqa: E402

from precis import CompactionSettings  # noqa: E402
from precis.server import create_app  # noqa: E402
from precis.stores import SQLiteStore  # noqa: E402

PAGES = ("/ui/c/long", "/ui/c/long/chart", "/ui/c/long/context", "/ui/c/long/compactions/2500")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as home:
        store = SQLiteStore(Path(home) / "precis.db")
        long_conversation(store, "long")
        print(f"{store.count('long'):,} messages, {len(store.events('long')):,} compactions")
        with TestClient(create_app(store, settings=CompactionSettings(8000))) as client:
            for path in PAGES:
                raw = client.get(path, headers={"accept-encoding": "identity"})
                zipped = client.get(path)
                times = []
                for _ in range(rounds):
                    start = time.perf_counter()
                    client.get(path, headers={"accept-encoding": "identity"})
                    times.append((time.perf_counter() - start) * 1000)
                gzipped = int(zipped.headers.get("content-length", len(zipped.content)))
                print(
                    f"{path:32} {raw.status_code} {len(raw.content) / 1000:7.1f} KB raw "
                    f"{gzipped / 1000:6.1f} KB gzip "
                    f"median {statistics.median(times):5.0f} ms, worst {max(times):5.0f} ms"
                )
        store.close()


if __name__ == "__main__":
    main()
