"""Size limits the service enforces before a request reaches a route, so no body can exhaust it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from precis.core.messages import MAX_MESSAGE_CHARS


@dataclass(frozen=True, slots=True)
class ServiceLimits:
    """How much one request may carry; the defaults suit agents that post a turn at a time."""

    max_body_bytes: int = 5 * 1024 * 1024
    max_message_chars: int = MAX_MESSAGE_CHARS
    max_messages_per_append: int = 1000
    max_recall_limit: int = 100
    max_history_page: int = 1000
    event_poll_seconds: float = 0.5
    keepalive_seconds: float = 15.0
    # Sessions a worker keeps between requests (see `deps.IdleSessions`); 0 keeps none.
    idle_sessions: int = 32

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_message_chars", "max_messages_per_append"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")
        if self.event_poll_seconds <= 0 or self.keepalive_seconds <= 0:
            raise ValueError("event_poll_seconds and keepalive_seconds must be positive")
        if self.idle_sessions < 0:
            raise ValueError("idle_sessions must not be negative")


# How much of an oversized body is read and dropped (times the limit) before the 413 goes out.
DRAIN_FACTOR = 4


class BodyTooLarge(Exception):
    """The request body went past the limit while it was being read."""

    def __init__(self, finished: bool) -> None:
        super().__init__("request body over the limit")
        self.finished = finished


class BodyLimit:
    """ASGI middleware: answer 413 to a body over `max_bytes`, declared or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._drain(receive)
            await self._refuse(send, f"{declared} bytes")
            return
        try:
            body = await self._read(receive)
        except BodyTooLarge as exc:
            if not exc.finished:
                await self._drain(receive)
            await self._refuse(send, "more bytes")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as a server would

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes:
        """The whole body, counted as it arrives; buffering is bounded by the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise BodyTooLarge(finished=not message.get("more_body", False))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    async def _drain(self, receive: Receive) -> None:
        """Read and drop what the client is still sending, up to a bound.

        Closing a socket with unread input resets it, and the reset can destroy the 413 before
        the client reads it; past the bound the server closes anyway rather than keep reading.
        """
        drained = 0
        while drained <= DRAIN_FACTOR * self.max_bytes:
            message = await receive()
            if message["type"] != "http.request":
                return
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _refuse(self, send: Send, size: str) -> None:
        detail = f"request body: {size} is over the limit of {self.max_bytes} bytes"
        payload = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
