"""Load and faults for `precis serve`: two workers, one PostgreSQL database, one killed mid-run.

Starts two workers on 127.0.0.1 over the same database, drives them from one asyncio client
(appends, compactions, some raced by both workers at once, reads), SIGKILLs one worker halfway
and restarts it on its port, then checks through the API that nothing acknowledged was lost,
every context is valid and every summary belongs to exactly one committed compaction.

    .venv/bin/python bench/service_load.py [--conversations 50] [--seconds 60] [--database-url URL]
        [--tree PATH]

`--tree` runs the workers from another checkout's `src` (this issue's starting commit, say), with
that checkout's `.venv` when it has one, so the same load is measured against both trees on one
machine, alternately, each with the dependencies it declares.

Exit status 0 only when all checks pass.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx
import psycopg
from psycopg import sql

from precis.core.messages import Message
from precis.core.validity import check

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA = "precis"  # the schema open_store puts a postgresql:// store in
WINDOW = 2000
HEALTH_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 15.0
MAX_ATTEMPTS = 8
HISTORY_PAGE = 1000
# What a committed compaction writes: a summary, or a marker (masking, truncation); each event
# names the one it wrote.
COMPACTION_KINDS = ("summary", "marker")
# Keys the API adds to each OpenAI message; Message.from_openai would keep them as extras.
PRECIS_KEYS = ("id", "kind", "pinned", "created_at")
_VOCABULARY = (
    "the service retries the request after a timeout while the cache holds stale entries and "
    "we need to decide whether the migration runs before the deploy or after it because the "
    "schema change locks the orders table for several seconds under load the logs show that "
    "connection pool exhaustion started at noon and the alert fired twice the fix is to bound "
    "the pool and add backpressure in the queue consumer then rerun the integration suite on "
    "staging compare latency percentiles and write down what changed in the runbook"
)
WORDS = tuple(_VOCABULARY.split())


@dataclass
class Worker:
    """One `precis serve` process we own, so it can be killed and restarted on its port."""

    name: str
    port: int
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    log: TextIO | None = None
    cpu_before: float = 0.0  # CPU seconds of the processes killed before this one

    def cpu_seconds(self) -> float:
        """CPU time (user + system) this worker has used, its killed predecessors included: on
        a shared machine, requests per CPU second says what requests/s cannot."""
        live = 0.0
        if self.proc is not None and self.proc.poll() is None:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            live = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return self.cpu_before + live

    @property
    def base_url(self) -> str:
        """Where clients reach it; the port survives restarts, so clients keep this URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Launch in its own session so a Ctrl-C at the terminal reaches only this script."""
        self.log = self.log_path.open("a", encoding="utf-8")
        self.log.write(f"--- start {time.strftime('%H:%M:%S')} ---\n")
        self.log.flush()
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=self.cwd,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, in-flight requests and transactions just vanish."""
        if self.proc is not None and self.proc.poll() is None:
            self.cpu_before = self.cpu_seconds()
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._close_log()

    def stop(self) -> None:
        """Polite first, then forceful, so the end of a run never leaves a worker behind."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        """Release the log file; a restart reopens it in append mode."""
        if self.log is not None:
            self.log.close()
            self.log = None

    async def wait_healthy(self, client: httpx.AsyncClient, timeout: float) -> float:
        """Poll /healthz until it answers; fail early if the process died, late if it hangs."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited during startup; see {self.log_path}")
            with contextlib.suppress(httpx.TransportError):
                response = await client.get(f"{self.base_url}/healthz", timeout=1.0)
                if response.status_code == 200:
                    return time.monotonic() - started
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name} not healthy after {timeout:.0f}s; see {self.log_path}")


@dataclass
class Stats:
    """Everything measured while driving, so the report and the checks read one place."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    compactions: int = 0
    raced_rounds: Counter[int] = field(default_factory=Counter)  # by commits: 0, 1, 2
    conflicts: int = 0
    nothing_to_compact: int = 0
    appends_recovered: int = 0
    restarts: int = 0
    restart_seconds: float = 0.0
    requests: int = 0
    cpu_seconds: float = 0.0  # the workers' CPU over the load (a restart's startup included)
    client_cpu_seconds: float = 0.0  # this script's own CPU over the load: the client's cost

    def record(self, kind: str, status: int, seconds: float) -> None:
        """Count a request that got an answer; failed connections are counted apart."""
        self.requests += 1
        self.latencies[kind].append(seconds)
        self.statuses[(kind, status)] += 1


@dataclass
class Conversation:
    """One simulated agent: its id, its home worker and every id the service acknowledged."""

    id: str
    home: int
    raced: bool
    rng: random.Random
    acked: list[str] = field(default_factory=list)
    turn: int = 0
    serial: int = 0
    call_serial: int = 0


class OutOfBudget(Exception):
    """The run's request count or time is used up; the driving loop stops cleanly."""


class Driver:
    """Sends requests to a preferred worker, failing over to the other on connection errors."""

    def __init__(
        self,
        clients: Sequence[httpx.AsyncClient],
        workers: Sequence[Worker],
        stats: Stats,
        deadline: float,
        max_requests: int,
    ) -> None:
        self.clients = clients  # one per worker, as `workers`
        self.workers = workers
        self.stats = stats
        self.deadline = deadline
        self.max_requests = max_requests

    def _check_budget(self) -> None:
        if time.monotonic() >= self.deadline or self.stats.requests >= self.max_requests:
            raise OutOfBudget

    async def send(
        self,
        kind: str,
        worker: int,
        method: str,
        path: str,
        body: Any = None,
        *,
        budgeted: bool = True,
    ) -> httpx.Response:
        """One request, retried on the other worker when the connection fails (not on 5xx)."""
        last: Exception | None = None
        for attempt in range(MAX_ATTEMPTS):
            if budgeted:
                self._check_budget()
            index = (worker + attempt) % len(self.workers)
            target, client = self.workers[index], self.clients[index]
            started = time.perf_counter()
            try:
                response = await client.request(method, f"{target.base_url}{path}", json=body)
            except httpx.TransportError as exc:
                self.stats.transport_errors[kind] += 1
                last = exc
                await asyncio.sleep(0.05 * (attempt + 1))
                continue
            self.stats.record(kind, response.status_code, time.perf_counter() - started)
            return response
        raise RuntimeError(f"{kind} {path}: no worker answered in {MAX_ATTEMPTS} tries: {last!r}")

    async def append(self, conv: Conversation, messages: list[dict[str, Any]]) -> int:
        """Append; after a dropped connection, read history back before resending (no duplicates).

        Returns the context's token count the service reported.
        """
        path = f"/v1/conversations/{conv.id}/messages"
        worker = conv.home
        for attempt in range(MAX_ATTEMPTS):
            self._check_budget()
            index = (worker + attempt) % len(self.workers)
            target, client = self.workers[index], self.clients[index]
            started = time.perf_counter()
            try:
                response = await client.post(
                    f"{target.base_url}{path}", json={"messages": messages}
                )
            except httpx.TransportError:
                self.stats.transport_errors["append"] += 1
                await asyncio.sleep(0.05 * (attempt + 1))
                landed = await self._find_landed(conv, messages, worker + attempt + 1)
                if landed is not None:
                    conv.acked += landed
                    self.stats.appends_recovered += 1
                    return 0
                continue
            self.stats.record("append", response.status_code, time.perf_counter() - started)
            if response.status_code == 201:
                payload = response.json()
                ids = [m["id"] for m in payload["messages"]]
                if len(ids) != len(messages):
                    self.stats.unexpected.append(f"append {conv.id}: {len(ids)} ids returned")
                conv.acked += ids
                return int(payload.get("tokens", 0))
            self.stats.unexpected.append(
                f"append {conv.id} -> {response.status_code}: {response.text[:200]}"
            )
            return 0
        raise RuntimeError(f"append to {conv.id}: no worker answered in {MAX_ATTEMPTS} tries")

    async def _find_landed(
        self, conv: Conversation, messages: list[dict[str, Any]], worker: int
    ) -> list[str] | None:
        """The stored ids of `messages` if the lost request committed anyway, else None."""
        markers = [_marker_of(m) for m in messages]
        base = f"/v1/conversations/{conv.id}/history"
        head = await self.send("history", worker, "GET", f"{base}?limit=1", budgeted=False)
        if head.status_code != 200:
            return None
        total = int(head.json()["total"])
        tail_start = max(0, total - 3 * len(messages) - 5)
        page = await self.send(
            "history", worker, "GET", f"{base}?offset={tail_start}&limit=1000", budgeted=False
        )
        if page.status_code != 200:
            return None
        by_marker = {_marker_of(m): m["id"] for m in page.json()["messages"]}
        if markers[0] not in by_marker:
            return None
        return [by_marker[m] for m in markers]

    async def compact(self, conv: Conversation, worker: int) -> int:
        """One compaction, 1 if it committed; 409 (raced or nothing to compact) is normal."""
        response = await self.send(
            "compact", worker, "POST", f"/v1/conversations/{conv.id}/compact", {}
        )
        if response.status_code == 200:
            self.stats.compactions += 1
            return 1
        elif response.status_code == 409:
            detail = response.json().get("detail", "")
            if "nothing to compact" in detail or "no messages" in detail:
                self.stats.nothing_to_compact += 1
            else:
                self.stats.conflicts += 1
        else:
            self.stats.unexpected.append(
                f"compact {conv.id} -> {response.status_code}: {response.text[:200]}"
            )
        return 0


def _marker_of(message: dict[str, Any]) -> str:
    """The tag every message we send starts with, to find it again after a lost response."""
    content = message.get("content") or ""
    return content.split("]", 1)[0] if content.startswith("[") else ""


def _text(rng: random.Random, low: int, high: int) -> str:
    """Prose-like filler of a length in [low, high) characters, so token counts are realistic."""
    target = rng.randrange(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def _msg(conv: Conversation, role: str, text: str, **extra: Any) -> dict[str, Any]:
    """An OpenAI message tagged with a marker unique in the run, for read-back after a fault."""
    conv.serial += 1
    return {"role": role, "content": f"[{conv.id}#{conv.serial}] {text}", **extra}


def _turn(conv: Conversation) -> list[list[dict[str, Any]]]:
    """One agent turn as a list of append requests: a user message, maybe tools, a reply."""
    rng = conv.rng
    user = _msg(conv, "user", _text(rng, 150, 1200))
    if rng.random() >= 0.45:
        reply = _msg(conv, "assistant", _text(rng, 100, 800))
        return [[user, reply]] if rng.random() < 0.3 else [[user], [reply]]
    calls = []
    for _ in range(rng.choice((1, 1, 2))):
        conv.call_serial += 1
        calls.append(
            {
                "id": f"call_{conv.id}_{conv.call_serial}",
                "type": "function",
                "function": {"name": "run_shell", "arguments": '{"cmd": "make test"}'},
            }
        )
    caller = _msg(conv, "assistant", _text(rng, 20, 200), tool_calls=calls)
    results = [_msg(conv, "tool", _text(rng, 200, 3000), tool_call_id=call["id"]) for call in calls]
    reply = _msg(conv, "assistant", _text(rng, 100, 600))
    if rng.random() < 0.5:  # the call and its results in one request, or split like a live agent
        return [[user], [caller, *results], [reply]]
    return [[user], [caller], results, [reply]]


async def drive_conversation(driver: Driver, conv: Conversation) -> None:
    """Append turns and compact when the context nears the window, until the budget runs out."""
    base = f"/v1/conversations/{conv.id}"
    create = await driver.send(
        "create", conv.home, "POST", "/v1/conversations", {"id": conv.id, "system_prompt": "ops"}
    )
    if create.status_code not in (201, 409):  # 409: a lost first try had created it
        driver.stats.unexpected.append(f"create {conv.id} -> {create.status_code}")
        return
    with contextlib.suppress(OutOfBudget):
        while True:
            conv.turn += 1
            tokens = 0
            for request in _turn(conv):
                tokens = await driver.append(conv, request) or tokens
            if conv.raced and conv.turn % 3 == 0:
                # Both workers compact the same version while a third request appends.
                extra = [_msg(conv, "user", _text(conv.rng, 100, 400))]
                first, second, _ = await asyncio.gather(
                    driver.compact(conv, 0), driver.compact(conv, 1), driver.append(conv, extra)
                )
                driver.stats.raced_rounds[first + second] += 1
            elif tokens > 0.75 * WINDOW or conv.turn % 4 == 0:
                await driver.compact(conv, conv.home)
            if conv.turn % 5 == 0:
                await driver.send(
                    "context", conv.home, "GET", f"/v1/conversations/{conv.id}/context"
                )
            if conv.turn % 7 == 0:
                await driver.send("events", conv.home, "GET", f"{base}/events")


async def chaos(
    client: httpx.AsyncClient, victim: Worker, stats: Stats, at: float, stop: asyncio.Event
) -> None:
    """At `at` seconds in, SIGKILL the victim and restart it on the same port."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=at)
        return  # the load finished first
    except TimeoutError:
        pass
    victim.kill()
    down = time.monotonic()
    await asyncio.sleep(0.5)
    victim.start()
    await victim.wait_healthy(client, HEALTH_TIMEOUT_S)
    stats.restarts += 1
    stats.restart_seconds = time.monotonic() - down


@dataclass
class Verdict:
    """The after-run checks, counted per conversation and summed."""

    acknowledged: int = 0
    lost: int = 0
    out_of_order: int = 0
    unacknowledged_stored: int = 0
    invalid_contexts: int = 0
    summaries: int = 0
    events: int = 0
    duplicate_summaries: int = 0
    notes: list[str] = field(default_factory=list)


async def verify(driver: Driver, conversations: Sequence[Conversation]) -> Verdict:
    """Read each conversation back through its home worker (the restarted one for half)."""
    verdict = Verdict()
    for conv in conversations:
        base = f"/v1/conversations/{conv.id}"
        history: list[dict[str, Any]] = []
        while True:
            page = await driver.send(
                "verify",
                conv.home,
                "GET",
                f"{base}/history?offset={len(history)}&limit={HISTORY_PAGE}",
                budgeted=False,
            )
            if page.status_code == 404 and not conv.acked:
                break
            page.raise_for_status()
            body = page.json()
            history += body["messages"]
            if len(history) >= body["total"] or not body["messages"]:
                break
        context = await driver.send("verify", conv.home, "GET", f"{base}/context", budgeted=False)
        events = await driver.send("verify", conv.home, "GET", f"{base}/events", budgeted=False)
        if not history and not conv.acked:
            continue
        context.raise_for_status()
        events.raise_for_status()
        _check_history(verdict, conv, history)
        _check_context(verdict, conv, context.json())
        _check_summaries(verdict, conv, history, context.json(), events.json()["events"])
    return verdict


def _check_history(verdict: Verdict, conv: Conversation, history: list[dict[str, Any]]) -> None:
    """Every acknowledged id is stored, in the order it was acknowledged."""
    verdict.acknowledged += len(conv.acked)
    position = {m["id"]: i for i, m in enumerate(history)}
    lost = [i for i in conv.acked if i not in position]
    verdict.lost += len(lost)
    if lost:
        verdict.notes.append(f"{conv.id}: lost {lost[:3]}")
    found = [position[i] for i in conv.acked if i in position]
    disorder = sum(1 for a, b in itertools.pairwise(found) if a >= b)
    verdict.out_of_order += disorder
    if disorder:
        verdict.notes.append(f"{conv.id}: {disorder} acknowledged ids out of order")
    acked = set(conv.acked)
    verdict.unacknowledged_stored += sum(
        1 for m in history if m["kind"] not in COMPACTION_KINDS and m["id"] not in acked
    )


def _check_context(verdict: Verdict, conv: Conversation, context: dict[str, Any]) -> None:
    """The context the service would send passes the same validity rules as the library's."""
    messages = [
        Message.from_openai({k: v for k, v in m.items() if k not in PRECIS_KEYS})
        for m in context["messages"]
    ]
    problems = check(messages)
    if problems:
        verdict.invalid_contexts += 1
        verdict.notes.append(f"{conv.id}: invalid context: {problems[0]}")


def _check_summaries(
    verdict: Verdict,
    conv: Conversation,
    history: list[dict[str, Any]],
    context: dict[str, Any],
    events: list[dict[str, Any]],
) -> None:
    """One event per summary or marker, one of them per event, one commit per context version."""
    summaries = [m["id"] for m in history if m["kind"] in COMPACTION_KINDS]
    referenced = Counter(e["summary_id"] for e in events)
    verdict.summaries += len(summaries)
    verdict.events += len(events)
    bad = sum(1 for s in summaries if referenced[s] != 1)  # unreferenced or claimed twice
    bad += sum(1 for s in referenced if s not in set(summaries))  # an event without its summary
    if len(events) != context["version"]:  # each commit moves the version by exactly one
        bad += abs(len(events) - context["version"])
        verdict.notes.append(f"{conv.id}: {len(events)} events for version {context['version']}")
    verdict.duplicate_summaries += bad
    if bad:
        verdict.notes.append(f"{conv.id}: {bad} summary/event mismatches")


def reset_schema(url: str) -> None:
    """Drop the store's schema so each run starts empty and its counts are its own."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))


def free_ports(count: int) -> list[int]:
    """Ports the OS says are free now; held open together so the two differ."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def worker_env(home: Path, api_key: str) -> dict[str, str]:
    """The caller's environment minus any PRECIS_* setting, plus the ones this run needs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRECIS_")}
    env.update(
        PRECIS_API_KEY=api_key,
        PRECIS_CONTEXT_WINDOW=str(WINDOW),
        PRECIS_HOME=str(home),
        PYTHONUNBUFFERED="1",
    )
    return env


def tree_python(tree: Path | None, env: dict[str, str]) -> str:
    """The Python the workers run: this one, or for `--tree` that checkout's `src` first on the
    path, with its own `.venv` when it has one (its own dependencies, as it was released)."""
    if tree is None:
        return sys.executable
    env["PYTHONPATH"] = str((tree / "src").resolve())
    own = tree / ".venv" / "bin" / "python"
    return str(own.absolute()) if own.exists() else sys.executable


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; enough for a bench, and needs no numpy."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def scan_logs(workers: Sequence[Worker]) -> list[str]:
    """Lines in the worker logs that mean the server, not the client, went wrong."""
    found: list[str] = []
    for worker in workers:
        if not worker.log_path.exists():
            continue
        for line in worker.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            if "Traceback" in line or '" 5' in line or "ERROR" in line:
                found.append(f"{worker.name}: {line.strip()[:200]}")
    return found


async def run(args: argparse.Namespace, workers: list[Worker], api_key: str) -> int:
    """Start, drive, kill/restart, verify, report; the exit status is the verdict."""
    stats = Stats()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=100)
    headers = {"Authorization": f"Bearer {api_key}"}
    async with contextlib.AsyncExitStack() as stack:

        async def pools() -> list[httpx.AsyncClient]:
            """A client (a connection pool) per worker; plain HTTP, so no certificates."""
            return [
                await stack.enter_async_context(
                    httpx.AsyncClient(
                        headers=headers, timeout=REQUEST_TIMEOUT_S, limits=limits, verify=False
                    )
                )
                for _ in workers
            ]

        clients = await pools()
        for worker in workers:
            worker.start()
        startup = await asyncio.gather(
            *(w.wait_healthy(c, HEALTH_TIMEOUT_S) for w, c in zip(workers, clients, strict=True))
        )
        print(f"workers up on ports {[w.port for w in workers]} in {max(startup):.1f}s")

        run_id = secrets.token_hex(3)
        conversations = [
            Conversation(
                id=f"load-{run_id}-{i:03d}",
                home=i % 2,
                raced=i % 5 == 0,
                rng=random.Random(f"{args.seed}-{i}"),
            )
            for i in range(args.conversations)
        ]
        # Each conversation its own pools: a pool looks over every connection it holds at each
        # request, so pools shared by all the conversations cost the client more CPU than the
        # rest of its work (the same client for both trees: it measures the workers, not httpx).
        own = [await pools() for _ in conversations]
        started_cpu = sum(w.cpu_seconds() for w in workers)
        started_client = time.process_time()
        began = time.monotonic()
        deadline = began + args.seconds
        driver = Driver(clients, workers, stats, deadline, args.max_requests)
        finished = asyncio.Event()
        fault = asyncio.create_task(
            chaos(clients[1], workers[1], stats, args.seconds * args.kill_at, finished)
        )
        await asyncio.gather(
            *(
                drive_conversation(Driver(c, workers, stats, deadline, args.max_requests), conv)
                for c, conv in zip(own, conversations, strict=True)
            )
        )
        elapsed = time.monotonic() - began
        stats.cpu_seconds = sum(w.cpu_seconds() for w in workers) - started_cpu
        stats.client_cpu_seconds = time.process_time() - started_client
        finished.set()
        await fault
        # The restarted worker must serve too: verify reads through it as well as the other.
        await workers[1].wait_healthy(clients[1], HEALTH_TIMEOUT_S)
        verdict = await verify(driver, conversations)

    return report(args, stats, verdict, elapsed, scan_logs(workers))


def report(
    args: argparse.Namespace, stats: Stats, verdict: Verdict, elapsed: float, log_lines: list[str]
) -> int:
    """Print the figures and the checks; return the exit status."""
    driven = stats.requests - len(stats.latencies.get("verify", []))
    print(
        f"\n{args.conversations} conversations, 2 workers, window {WINDOW}, {elapsed:.1f}s of load"
    )
    print(f"requests: {driven} ({driven / elapsed:.0f}/s), plus verification reads")
    cpu = stats.cpu_seconds
    print(f"workers' CPU: {cpu:.1f} s, {driven / cpu:.0f} requests per CPU second" if cpu else "")
    print(f"the client's own CPU: {stats.client_cpu_seconds:.1f} s")
    print(f"{'endpoint':<10}{'count':>8}{'p50 ms':>10}{'p99 ms':>10}  statuses")
    for kind in ("create", "append", "compact", "context", "events", "history", "verify"):
        values = stats.latencies.get(kind)
        if not values:
            continue
        codes = ", ".join(
            f"{code}x{n}" for (k, code), n in sorted(stats.statuses.items()) if k == kind
        )
        print(
            f"{kind:<10}{len(values):>8}{percentile(values, 50) * 1000:>10.1f}"
            f"{percentile(values, 99) * 1000:>10.1f}  {codes}"
        )
    print(
        f"compactions: {stats.compactions} committed, {stats.conflicts} lost a race (409), "
        f"{stats.nothing_to_compact} with nothing to compact (409)"
    )
    raced = stats.raced_rounds
    print(
        f"raced: {raced.total()} rounds compacted by both workers at once (with an append): "
        f"both committed {raced[2]} (the loser re-planned on the new version), "
        f"one {raced[1]}, none {raced[0]}"
    )
    errors = sum(stats.transport_errors.values())
    print(
        f"faults: {stats.restarts} worker restart(s) (down {stats.restart_seconds:.1f}s), "
        f"{errors} connection errors retried on the other worker, "
        f"{stats.appends_recovered} appends found stored after a dropped response"
    )
    print(
        f"stored: {verdict.acknowledged} acknowledged messages, "
        f"{verdict.unacknowledged_stored} stored without acknowledgement, "
        f"{verdict.summaries} summaries and markers, {verdict.events} events"
    )
    checks = {
        "lost messages": verdict.lost + verdict.out_of_order,
        "invalid contexts": verdict.invalid_contexts,
        "duplicate summaries": verdict.duplicate_summaries,
        "unexpected responses": len(stats.unexpected),
    }
    for name, count in checks.items():
        print(f"  {'ok  ' if count == 0 else 'FAIL'} {count} {name}")
    for note in [*verdict.notes, *stats.unexpected][:20]:
        print(f"    {note}")
    if log_lines:
        print(f"worker logs: {len(log_lines)} server-error lines, first ones:")
        for line in log_lines[:5]:
            print(f"    {line}")
    else:
        print("worker logs: no server errors")
    if stats.restarts == 0:
        print("  FAIL the worker was never killed (run too short?)")
        return 1
    return 0 if all(count == 0 for count in checks.values()) else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Defaults sized for about a minute on a laptop."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load phase")
    parser.add_argument("--max-requests", type=int, default=50_000, help="request budget")
    parser.add_argument(
        "--database-url", default=os.environ.get("PRECIS_DATABASE_URL", DEFAULT_URL)
    )
    parser.add_argument(
        "--fresh",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"drop schema {SCHEMA!r} first (default: yes)",
    )
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction of --seconds")
    parser.add_argument("--seed", default="precis")
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument("--tree", type=Path, default=None, help="run the workers from PATH/src")
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: object) -> None:
    """Turn SIGTERM into Ctrl-C, which asyncio.run already turns into a clean cancel."""
    signal.raise_signal(signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    """Own the workers' lifetime here, so every way out of the run stops them."""
    args = parse_args(argv)
    # A shell may start us with SIGINT ignored (a background job); we still want Ctrl-C/kill -INT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    if args.fresh:
        reset_schema(args.database_url)
    scratch = Path(tempfile.mkdtemp(prefix="precis-load-"))
    api_key = secrets.token_urlsafe(24)
    env = worker_env(scratch, api_key)
    python = tree_python(args.tree, env)
    workers = [
        Worker(
            name=f"worker{i}",
            port=port,
            argv=[
                python,
                "-m",
                "precis.cli",
                "--store",
                args.database_url,
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            env=env,
            cwd=scratch,
            log_path=scratch / f"worker{i}.log",
        )
        for i, port in enumerate(free_ports(2))
    ]
    status = 1
    try:
        status = asyncio.run(run(args, workers, api_key))
    except KeyboardInterrupt:
        print("interrupted; stopping workers", file=sys.stderr)
        status = 130
    finally:
        for worker in workers:
            worker.stop()
    if status != 0 or args.keep_logs:
        print(f"worker logs kept in {scratch}")
    else:
        for worker in workers:
            worker.log_path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            scratch.rmdir()
    return status


if __name__ == "__main__":
    sys.exit(main())
