"""The HTTP service as a client sees it: a real uvicorn server on 127.0.0.1, driven with httpx."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from live_server import serving
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from precis.engine.settings import CompactionSettings
from precis.server import ServiceLimits, create_app
from precis.stores import MemoryStore, SQLiteStore

API_KEY = "test-key-1234-abcdef"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
# The default size limits, so the contract test sees what a deployment sees; faster polling.
LIMITS = ServiceLimits(event_poll_seconds=0.05, keepalive_seconds=0.5)
FACT = "the staging database listens on port 5433, never use the default 5432"
TURN = (
    "turn {n}: please review the deployment checklist for the payments service and tell me "
    "what is still missing before release 2.{n}; include the rollback plan and the owners"
)
REPLY = "For release 2.{n} the checklist still lacks the load test sign-off and a runbook link."


@dataclass(frozen=True)
class Service:
    """A running server and what the tests need to reach into."""

    url: str
    app: FastAPI


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    store = SQLiteStore(tmp_path_factory.mktemp("server") / "precis.db")
    app = create_app(
        store, settings=CompactionSettings(context_window=2000), api_key=API_KEY, limits=LIMITS
    )
    with serving(app) as url:
        yield Service(url, app)
    store.close()


@pytest.fixture
def client(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers=AUTH, timeout=30) as c:
        yield c


def new_conversation(client: httpx.Client, **body: Any) -> str:
    response = client.post("/v1/conversations", json=body)
    assert response.status_code == 201, response.text
    conversation_id: str = response.json()["id"]
    return conversation_id


def fill(client: httpx.Client, conversation_id: str, turns: int = 8) -> None:
    """A fact, then enough ordinary turns that a compaction has something to summarize."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": FACT}]
    messages.append({"role": "assistant", "content": "Noted: port 5433."})
    for n in range(1, turns + 1):
        messages += [
            {"role": "user", "content": TURN.format(n=n)},
            {"role": "assistant", "content": REPLY.format(n=n)},
        ]
    response = client.post(
        f"/v1/conversations/{conversation_id}/messages", json={"messages": messages}
    )
    assert response.status_code == 201, response.text


def detail(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"detail"}, body
    text: str = body["detail"]
    return text


# --- the main flow ------------------------------------------------------------------------------


def test_health_answers_without_a_key(service: Service) -> None:
    response = httpx.get(f"{service.url}/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_create_append_context_compact_recall_history_events(client: httpx.Client) -> None:
    conversation_id = new_conversation(client, system_prompt="You review release checklists.")
    base = f"/v1/conversations/{conversation_id}"
    assert {"id": conversation_id} in client.get("/v1/conversations").json()["conversations"]

    # OpenAI format, a tool call and its result in one request.
    openai = [
        {"role": "user", "content": FACT},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "deploy.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "1. tag the release\n2. deploy"},
        {"role": "assistant", "content": "The checklist has two steps."},
    ]
    appended = client.post(f"{base}/messages", json={"messages": openai})
    assert appended.status_code == 201, appended.text
    out = appended.json()["messages"]
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "assistant"]
    for sent, got in zip(openai, out, strict=True):
        assert got["id"].startswith("msg_") and got["created_at"] and got["kind"] == "message"
        assert {k: got[k] for k in sent} == sent  # OpenAI format, exactly as sent
    assert out[0]["pinned"] is True  # the first user message is the task

    # Anthropic format: the tool_use in one request, its tool_result in the next.
    use = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look at the runbook."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "run.md"}},
        ],
    }
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "runbook: restart pods"},
            {"type": "text", "text": "Anything else missing?"},
        ],
    }
    for message in (use, result):
        response = client.post(
            f"{base}/messages", json={"messages": [message], "format": "anthropic"}
        )
        assert response.status_code == 201, response.text
    converted = response.json()["messages"]
    assert [m["role"] for m in converted] == ["tool", "user"]
    assert converted[0]["tool_call_id"] == "toolu_1"
    fill(client, conversation_id)

    context = client.get(f"{base}/context").json()
    assert context["compacted"] is False and context["version"] == 0
    before = len(context["messages"])
    assert before == 4 + 1 + 2 + 18 and context["tokens"] > 0

    prompt = client.get(f"{base}/prompt").json()["messages"]
    assert prompt[0] == {"role": "system", "content": "You review release checklists."}
    assert prompt[1]["content"] == FACT  # pinned items lead

    compacted = client.post(f"{base}/compact", json={"mode": "sliding_window"})
    assert compacted.status_code == 200, compacted.text
    stats = compacted.json()["stats"]
    assert stats["trigger"] == "manual"
    assert stats["messages_count_after"] < stats["messages_count_before"] == before
    assert compacted.json()["summary"]["kind"] == "summary"

    context = client.get(f"{base}/context").json()
    assert context["compacted"] is True and context["version"] == 1
    kinds = [m["kind"] for m in context["messages"]]
    assert kinds.count("summary") == 1
    in_context = {m["id"] for m in context["messages"]}

    hits = client.get(f"{base}/recall", params={"q": "runbook", "limit": 50}).json()["hits"]
    assert hits and all(set(h) == {"id", "role", "seq", "snippet", "score"} for h in hits)
    assert any(h["id"] not in in_context for h in hits), (hits, in_context)  # compacted away

    history = client.get(f"{base}/history", params={"offset": 0, "limit": 1000}).json()
    assert history["total"] == before + 1  # every original plus the summary
    assert [m["kind"] for m in history["messages"]].count("summary") == 1
    page = client.get(f"{base}/history", params={"offset": 2, "limit": 3}).json()
    assert [m["id"] for m in page["messages"]] == [m["id"] for m in history["messages"][2:5]]

    events = client.get(f"{base}/events").json()["events"]
    assert len(events) == 1
    assert events[0]["index"] == 0 and events[0]["trigger"] == "manual"
    assert events[0]["summary_id"] == compacted.json()["summary"]["id"]

    info = client.get(base).json()
    assert info["messages"] == before + 1 and info["in_context"] == len(context["messages"])


def test_event_stream_delivers_a_compaction_as_it_happens(client: httpx.Client) -> None:
    conversation_id = new_conversation(client)
    base = f"/v1/conversations/{conversation_id}"
    fill(client, conversation_id)
    compaction: list[httpx.Response] = []

    def compact_soon() -> None:
        with httpx.Client(base_url=str(client.base_url), headers=AUTH, timeout=30) as other:
            compaction.append(other.post(f"{base}/compact"))

    frames: list[str] = []
    worker = threading.Thread(target=compact_soon)
    with client.stream("GET", f"{base}/events/stream", params={"max_events": 1}) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            frames.append(line)
            if line.startswith("retry:"):
                worker.start()  # the stream is open: only now does the compaction happen
    worker.join(30)
    assert compaction and compaction[0].status_code == 200, compaction
    assert "event: compaction" in frames and "id: 0" in frames
    (data,) = [line.removeprefix("data: ") for line in frames if line.startswith("data: ")]
    event = httpx.Response(200, content=data).json()
    assert event["index"] == 0 and event["summary_id"] == compaction[0].json()["summary"]["id"]

    # A client that reconnects with Last-Event-ID, or asks from the start, gets no duplicates.
    with client.stream(
        "GET", f"{base}/events/stream", params={"since": 0, "max_events": 1}
    ) as replay:
        assert any(line == "id: 0" for line in replay.iter_lines())


def test_event_stream_ends_when_the_client_goes_away(
    service: Service, client: httpx.Client
) -> None:
    conversation_id = new_conversation(client)
    streams = service.app.state.streams
    started = streams.started
    with client.stream("GET", f"/v1/conversations/{conversation_id}/events/stream") as stream:
        assert stream.status_code == 200, stream.read()
        next(stream.iter_lines())
        assert streams.started == started + 1  # counted, whether or not it is still open
    deadline = time.monotonic() + 10
    while streams.open and time.monotonic() < deadline:
        time.sleep(0.05)
    assert streams.open == 0, "the server kept polling for a client that left"


# --- refusals -----------------------------------------------------------------------------------


def _api_endpoints(app: FastAPI) -> list[tuple[str, str]]:
    """Every method and path the app describes under /v1, path parameters filled with `x`."""
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "x", path))
        for path, operations in app.openapi()["paths"].items()
        if path.startswith("/v1/")
        for method in operations
    ]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "x"}])
def test_every_endpoint_but_health_needs_the_key(service: Service, headers: dict[str, str]) -> None:
    """Each route the app describes, read from its spec (no router-wide guard stands in for a
    route that forgot the key), refuses before reading its body or the store."""
    endpoints = _api_endpoints(service.app)
    assert len(endpoints) >= 10
    with httpx.Client(base_url=service.url, headers=headers) as anonymous:
        for method, path in [*endpoints, ("GET", "/openapi.json")]:
            response = anonymous.request(method, path)
            assert response.status_code == 401, (method, path)
            assert response.headers["www-authenticate"] == "Bearer"
            assert "PRECIS_API_KEY" in detail(response)


def test_a_body_over_the_limit_is_413(client: httpx.Client) -> None:
    conversation_id = new_conversation(client)
    url = f"/v1/conversations/{conversation_id}/messages"
    big = {"messages": [{"role": "user", "content": "x" * LIMITS.max_body_bytes}]}
    response = client.post(url, json=big)
    assert response.status_code == 413
    assert detail(response).startswith("request body: ") and "over the limit" in detail(response)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(LIMITS.max_body_bytes // 65536 + 1):
            yield b"y" * 65536
        yield b'"}]}'

    streamed = client.post(url, content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    assert client.get(f"/v1/conversations/{conversation_id}/history").json()["total"] == 0


def test_message_size_and_count_limits_are_413_naming_the_field(client: httpx.Client) -> None:
    conversation_id = new_conversation(client)
    url = f"/v1/conversations/{conversation_id}/messages"
    long = "z" * (LIMITS.max_message_chars + 1)
    messages = [{"role": "user", "content": "ok"}, {"role": "user", "content": long}]
    response = client.post(url, json={"messages": messages})
    assert response.status_code == 413
    assert detail(response).startswith(f"messages[1].content: {len(long)} characters")
    many = [{"role": "user", "content": "hi"}] * (LIMITS.max_messages_per_append + 1)
    response = client.post(url, json={"messages": many})
    assert response.status_code == 413 and detail(response).startswith("messages: 1001 messages")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": "a"}, {"content": "b"}]}, "messages[1].role"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]},
            "messages[1].tool_call_id",
        ),
        (
            {"messages": [{"role": "tool", "tool_call_id": "nope", "content": "b"}]},
            "messages[0].tool_call_id",
        ),
        ({"messages": [{"role": "wizard", "content": "a"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}],
                    }
                ]
            },
            "messages[0].tool_calls[0].function",
        ),
        (
            {
                "format": "anthropic",
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": [{"type": "video"}]},
                ],
            },
            "messages[1].content[0]",
        ),
        ({"messages": [{"role": "user", "content": "a"}], "format": "xml"}, "format"),
        ({"messages": []}, "messages"),
        ({"messages": ["hello"]}, "messages[0]"),
        ({}, "messages"),
        ({"messages": [{"role": "user", "content": "a"}], "extra": 1}, "extra"),
    ],
)
def test_malformed_messages_are_422_naming_the_field(
    client: httpx.Client, body: dict[str, Any], field: str
) -> None:
    conversation_id = new_conversation(client)
    response = client.post(f"/v1/conversations/{conversation_id}/messages", json=body)
    assert response.status_code == 422, response.text
    assert detail(response).startswith(f"{field}: "), detail(response)
    assert client.get(f"/v1/conversations/{conversation_id}/history").json()["total"] == 0


def test_bad_json_bad_queries_and_unknown_ids_are_4xx(client: httpx.Client) -> None:
    conversation_id = new_conversation(client)
    base = f"/v1/conversations/{conversation_id}"
    broken = client.post(
        f"{base}/messages", content=b'{"messages": [', headers={"content-type": "application/json"}
    )
    assert broken.status_code == 422 and "JSON" in detail(broken)
    assert detail(client.get(f"{base}/recall")).startswith("q: ")
    assert detail(client.get(f"{base}/recall", params={"q": "a", "limit": 0})).startswith("limit: ")
    assert detail(client.get(f"{base}/history", params={"offset": -1})).startswith("offset: ")
    assert detail(client.post(f"{base}/compact", json={"mode": "gentle"})).startswith("mode: ")
    assert client.post("/v1/conversations", json={"id": "bad id!"}).status_code == 422

    for path in ("", "/context", "/prompt", "/history", "/events", "/events/stream"):
        response = client.get(f"/v1/conversations/missing{path}")
        assert response.status_code == 404 and "missing" in detail(response), path
    assert client.get("/v1/conversations/missing/recall", params={"q": "x"}).status_code == 404
    assert client.post("/v1/conversations/missing/compact").status_code == 404
    missing = client.post(
        "/v1/conversations/missing/messages", json={"messages": [{"role": "user"}]}
    )
    assert missing.status_code == 404
    assert client.get("/v1/conversations/missing").status_code == 404


def test_conflicts_are_409_with_the_reason(client: httpx.Client) -> None:
    conversation_id = new_conversation(client, id="taken")
    again = client.post("/v1/conversations", json={"id": conversation_id})
    assert again.status_code == 409 and "already exists" in detail(again)

    empty = client.post(f"/v1/conversations/{conversation_id}/compact")
    assert empty.status_code == 409 and "nothing to compact" in detail(empty)


def test_a_compaction_that_cannot_shrink_is_a_200_no_op(client: httpx.Client) -> None:
    conversation_id = new_conversation(client)
    tiny = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    client.post(f"/v1/conversations/{conversation_id}/messages", json={"messages": tiny})
    before = client.get(f"/v1/conversations/{conversation_id}/context").json()
    small = client.post(f"/v1/conversations/{conversation_id}/compact", json={"mode": "all"})
    assert small.status_code == 200, small.text
    body = small.json()
    assert body["compacted"] is False and "summary" not in body
    assert "smaller" in body["reason"]
    assert body["stats"]["context_tokens_after"] == body["stats"]["context_tokens_before"]
    assert client.get(f"/v1/conversations/{conversation_id}/context").json() == before
    assert client.get(f"/v1/conversations/{conversation_id}/events").json()["events"] == []


def test_an_unkeyed_service_on_loopback_serves_its_docs(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "open.db")
    app = create_app(store, settings=CompactionSettings(context_window=2000))
    with serving(app) as url:
        assert httpx.get(f"{url}/v1/conversations").json() == {"conversations": []}
        assert httpx.get(f"{url}/openapi.json").json()["info"]["title"] == "precis"
    store.close()


# --- the command --------------------------------------------------------------------------------


def run_serve(home: Path, *args: str, key: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PRECIS_HOME": str(home), "PYTHONIOENCODING": "utf-8"}
    for name in ("PRECIS_API_KEY", "PRECIS_STORE", "PRECIS_CONTEXT_WINDOW", "PRECIS_SUMMARIZER"):
        env.pop(name, None)
    if key is not None:
        env["PRECIS_API_KEY"] = key
    return subprocess.Popen(
        [sys.executable, "-m", "precis.cli", "serve", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])
def test_serve_refuses_a_public_address_without_a_key(tmp_path: Path, host: str) -> None:
    process = run_serve(tmp_path, "--host", host)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "PRECIS_API_KEY" in lines[0] and host in lines[0], err


def test_a_worker_freezes_its_startup_objects_and_keeps_pythons_thresholds() -> None:
    """`settle_gc` (in a fresh interpreter: it changes the process's collector). A raised
    threshold made a worker's memory grow with the conversations it served (its docstring)."""
    code = (
        "import gc; from precis.cli.commands.serve import settle_gc; "
        "before = gc.get_threshold(); settle_gc(); "
        "print(gc.get_freeze_count() > 1000, gc.get_threshold() == before)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True"], done.stderr


def test_serve_runs_the_service_on_the_given_port(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = f"sqlite:///{tmp_path / 'served.db'}"
    process = run_serve(tmp_path, "--port", str(port), "--store", store, key=API_KEY)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, process.communicate()[1]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "precis serve did not come up"
                time.sleep(0.1)
        headers = AUTH
        created = httpx.post(f"http://127.0.0.1:{port}/v1/conversations", headers=headers, json={})
        assert created.status_code == 201
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert (tmp_path / "served.db").exists()


# --- the contract -------------------------------------------------------------------------------


# The spec the service serves, built by the same factory with the same options, so the cases can
# be generated at collection time (schemathesis' lazy fixture loader fails on pytest 9);
# `test_the_served_spec_is_the_one_tested` proves it is the spec /openapi.json returns.
SPEC = create_app(
    MemoryStore(), settings=CompactionSettings(context_window=2000), api_key=API_KEY, limits=LIMITS
).openapi()
# The stream only ends when the client leaves; its own tests above cover it.
# The key as the spec's bearer scheme, so schemathesis knows which requests it left unauthenticated.
CONTRACT = SchemathesisConfig.from_dict({"auth": {"openapi": {"HTTPBearer": {"bearer": API_KEY}}}})
schema = schemathesis.openapi.from_dict(SPEC, config=CONTRACT).exclude(
    path="/v1/conversations/{conversation_id}/events/stream"
)


def test_the_served_spec_is_the_one_tested(client: httpx.Client) -> None:
    assert client.get("/openapi.json").json() == SPEC


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_api_keeps_its_openapi_contract(service: Service, case: Any) -> None:
    """No 5xx and every answer as /openapi.json declares it, for valid and invalid input.

    Appending is the one place a schema-valid body may still be refused (422): whether a tool
    result answers an earlier call depends on the conversation, which no schema can state.
    """
    semantic = case.operation.path.endswith("/messages")
    case.call_and_validate(
        base_url=service.url,
        excluded_checks=[positive_data_acceptance] if semantic else [],
    )
