"""OpenAIProvider against a real HTTP server on 127.0.0.1 that answers like an OpenAI endpoint:
replies, usage, tool calls, and the overflow errors servers send (mapped to ContextOverflow)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from precis.core.errors import ContextOverflow, UpstreamError
from precis.providers.openai import OpenAIProvider

openai = pytest.importorskip("openai")

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "ls", "arguments": '{"path":"/"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
}


class Handler(BaseHTTPRequestHandler):
    """Answers by the last user message: 'overflow', 'llama-overflow', 'auth', else a reply."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.requests.append(body)
        last = body["messages"][-1]["content"]
        if last == "overflow":
            status, payload = (
                400,
                {
                    "error": {
                        "message": "This model's maximum context length is 8192 tokens.",
                        "type": "invalid_request_error",
                        "code": "context_length_exceeded",
                    }
                },
            )
        elif last == "llama-overflow":
            status, payload = (
                400,
                {
                    "error": {
                        "code": 400,
                        "message": "the request exceeds the available context size, try increasing",
                        "type": "exceed_context_size_error",
                    }
                },
            )
        elif last == "auth":
            status, payload = 401, {"error": {"message": "bad key", "type": "auth"}}
        else:
            status, payload = 200, COMPLETION
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


@pytest.fixture(params=["sync", "async"])
def ask(request: pytest.FixtureRequest, base_url: str) -> Callable[[str], Any]:
    """One question through the blocking client or, in a running loop, the async one."""
    provider = OpenAIProvider("m", base_url=base_url, context_window=8192, max_tokens=50)
    messages = lambda text: [{"role": "user", "content": text}]  # noqa: E731
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
    if request.param == "sync":
        return lambda text: provider.complete(messages(text), tools)
    return lambda text: asyncio.run(provider.acomplete(messages(text), tools))


def test_reply_tool_calls_and_usage(ask: Callable[[str], Any]) -> None:
    reply = ask("hello")
    assert reply.message == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "ls", "arguments": '{"path":"/"}'},
            }
        ],
    }
    assert reply.usage["total_tokens"] == 17
    sent = Handler.requests[-1]
    assert sent["max_tokens"] == 50 and sent["tools"][0]["function"]["name"] == "ls"


@pytest.mark.parametrize("text", ["overflow", "llama-overflow"])
def test_overflow_errors_become_context_overflow(ask: Callable[[str], Any], text: str) -> None:
    with pytest.raises(ContextOverflow):
        ask(text)


def test_other_errors_name_the_upstream_status_and_reason(
    ask: Callable[[str], Any], base_url: str
) -> None:
    with pytest.raises(UpstreamError) as caught:
        ask("auth")
    assert caught.value.status == 401 and caught.value.reason == "bad key"
    assert str(caught.value) == f"model 'm' at {base_url}: HTTP 401: bad key"
    assert isinstance(caught.value.__cause__, openai.AuthenticationError)
