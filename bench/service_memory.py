"""One `precis serve` worker's memory as the conversations it has served grow: flat or not.

Starts one real worker (`python -m precis.cli serve` on 127.0.0.1, over a fresh SQLite file or
a PostgreSQL schema) and drives it over HTTP with whole turns batched into each append (the
API's own batch: one request, many messages), compacting when the reported tokens near the
window, as an agent would; so 10,000 conversations of 200 messages take some 100,000 appends,
not 2,000,000. The worker's RSS (VmRSS in /proc) is read at each checkpoint.

    .venv/bin/python bench/service_memory.py [--conversations 10000] [--messages 200]
        [--checkpoints 1000,5000,10000] [--database-url URL] [--tree PATH]

`--tree` runs the worker from another checkout's `src` (the same bench against an older commit).
Exit status 0 when every message sent was acknowledged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_load import (  # a sibling script, not a package
    HEALTH_TIMEOUT_S,
    WINDOW,
    Conversation,
    Worker,
    _interrupt,
    _turn,
    free_ports,
    reset_schema,
    tree_python,
    worker_env,
)

REQUEST_TIMEOUT_S = 60.0
# Compact once the context the service reports passes this share of the window.
COMPACT_AT = 0.75


@dataclass
class Tally:
    """What was sent and acknowledged, so the run can say nothing was dropped."""

    appends: int = 0
    messages: int = 0
    acknowledged: int = 0
    compactions: int = 0
    failures: int = 0


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """The process's resident set (or one part of it: RssAnon, RssFile), from /proc (Linux).

    Over SQLite the resident set counts the pages of the database file it reads through its
    memory map (RssFile), which grow with what is stored, not with what the worker keeps."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for pid {pid}")


def batches(conv: Conversation, messages: int, batch: int) -> list[list[dict[str, Any]]]:
    """About `messages` messages as appends of whole turns, each at least `batch` long."""
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    sent = 0
    while sent < messages:
        for request in _turn(conv):
            current += request
            sent += len(request)
        if len(current) >= batch or sent >= messages:
            out.append(current)
            current = []
    return out


async def serve_one(
    client: httpx.AsyncClient, base: str, conv: Conversation, args: argparse.Namespace, tally: Tally
) -> None:
    """Create, append every batch, compact near the window."""
    created = await client.post(f"{base}/v1/conversations", json={"id": conv.id})
    if created.status_code != 201:
        tally.failures += 1
        return
    path = f"{base}/v1/conversations/{conv.id}"
    for messages in batches(conv, args.messages, args.batch):
        response = await client.post(f"{path}/messages", json={"messages": messages})
        tally.appends += 1
        tally.messages += len(messages)
        if response.status_code != 201:
            tally.failures += 1
            continue
        body = response.json()
        tally.acknowledged += len(body["messages"])
        if (body.get("tokens") or 0) > COMPACT_AT * WINDOW:
            compacted = await client.post(f"{path}/compact", json={})
            if compacted.status_code == 200:
                tally.compactions += 1
            else:
                tally.failures += 1


async def drive(args: argparse.Namespace, worker: Worker, api_key: str) -> int:
    """Serve the conversations `--concurrency` at a time; print RSS at each checkpoint."""
    checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
    headers = {"Authorization": f"Bearer {api_key}"}
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    tally = Tally()
    run_id = secrets.token_hex(3)
    async with httpx.AsyncClient(
        headers=headers, timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as client:
        worker.start()
        await worker.wait_healthy(client, HEALTH_TIMEOUT_S)
        assert worker.proc is not None
        pid = worker.proc.pid
        print(f"worker pid {pid} up, RSS {rss_mib(pid):.1f} MiB before any conversation")
        print(
            f"{'conversations':>13}{'messages':>10}{'compactions':>12}{'RSS MiB':>9}"
            f"{'anon':>7}{'file':>7}{'s':>7}"
        )
        began = time.monotonic()
        queue: asyncio.Queue[int] = asyncio.Queue()
        done = 0
        for checkpoint in checkpoints:
            for i in range(done, checkpoint):
                queue.put_nowait(i)

            async def work() -> None:
                while not queue.empty():
                    i = queue.get_nowait()
                    conv = Conversation(
                        id=f"mem-{run_id}-{i:06d}",
                        home=0,
                        raced=False,
                        rng=random.Random(f"{args.seed}-{i}"),
                    )
                    await serve_one(client, worker.base_url, conv, args, tally)

            await asyncio.gather(*(work() for _ in range(args.concurrency)))
            done = checkpoint
            print(
                f"{done:>13}{tally.acknowledged:>10}{tally.compactions:>12}"
                f"{rss_mib(pid):>9.1f}{rss_mib(pid, 'RssAnon'):>7.1f}"
                f"{rss_mib(pid, 'RssFile'):>7.1f}{time.monotonic() - began:>7.0f}",
                flush=True,
            )
    lost = tally.messages - tally.acknowledged
    print(f"{tally.appends} appends, {lost} messages not acknowledged, {tally.failures} failures")
    return 0 if lost == 0 and tally.failures == 0 else 1


def main(argv: list[str] | None = None) -> int:
    """One worker we own, stopped on every way out."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=200, help="per conversation")
    parser.add_argument("--batch", type=int, default=20, help="least messages per append")
    parser.add_argument("--checkpoints", default="", help="default: 10%%, 50%% and all")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--database-url", default=None, help="PostgreSQL (default: SQLite)")
    parser.add_argument("--tree", type=Path, default=None, help="run the worker from PATH/src")
    parser.add_argument("--seed", default="precis")
    args = parser.parse_args(argv)
    n = args.conversations
    if not args.checkpoints:
        args.checkpoints = ",".join(str(c) for c in sorted({max(1, n // 10), max(1, n // 2), n}))
    scratch = Path(tempfile.mkdtemp(prefix="precis-memory-"))
    api_key = secrets.token_urlsafe(24)
    env = worker_env(scratch, api_key)
    python = tree_python(args.tree, env)
    if args.database_url:
        reset_schema(args.database_url)
        store = args.database_url
    else:
        store = f"sqlite:///{scratch / 'memory.db'}"
    (port,) = free_ports(1)
    argv_ = [python, "-m", "precis.cli", "--store", store, "serve"]
    argv_ += ["--host", "127.0.0.1", "--port", str(port)]
    worker = Worker("worker", port, argv_, env, scratch, scratch / "worker.log")
    signal.signal(signal.SIGTERM, _interrupt)  # a kill stops the worker too
    try:
        return asyncio.run(drive(args, worker, api_key))
    finally:
        worker.stop()
        print(f"worker log: {worker.log_path}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
