"""The inspector: the context window over time, in the browser, served by `precis serve` at /ui.

`install` adds the pages (`pages`), the vendored htmx and the stylesheet (`static/`), the login
(`auth`) and a strict Content-Security-Policy: the pages run no script but the package's own.
"""

from __future__ import annotations

import inspect
import re
from importlib.resources import files
from urllib.parse import quote, unquote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from precis.server.deps import API_KEY_HINT, Service
from precis.server.ui.auth import Logins, NeedLogin
from precis.server.ui.pages import html, router

__all__ = ["PREFIX", "install"]

PREFIX = "/ui"
# Scripts, styles and everything else from this service only; no framing, no inline script.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = (
    (b"content-security-policy", POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
)


class PageHeaders:
    """Adds the inspector's security headers to every response under /ui (streams included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


# Conversation writes through the API: what wakes the inspector's streams on that conversation.
WRITES = re.compile(r"^/v1/conversations/([^/]+)(?:/|$)")


class SignalWrites:
    """After a successful write to a conversation over the API, `service.changes.signal` it:
    the commit path of every API write, without touching the routes."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        written = (
            WRITES.match(scope.get("path", ""))
            if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH", "DELETE")
            else None
        )
        if written is None:
            await self.app(scope, receive, send)
            return
        status = 500
        name = unquote(written.group(1))

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if status < 400:
                self.service.changes.signal(name)


class PageGZip:
    """The inspector's pages and data compressed for a browser that takes gzip; its live
    stream, and the API, left as they are."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.zipped = GZipMiddleware(app, minimum_size=1000)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.startswith(PREFIX + "/") and not path.endswith("/stream"):
            await self.zipped(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def install(app: FastAPI, service: Service) -> None:
    """Serve the inspector from `app` under /ui, over the same service and keys as the API."""
    app.state.logins = Logins(service.keys)
    static = StaticFiles(directory=str(files("precis.server.ui") / "static"))
    app.mount(f"{PREFIX}/static", static, name="inspector-static")
    app.include_router(router(), prefix=PREFIX)
    app.add_middleware(PageHeaders)
    app.add_middleware(PageGZip)
    app.add_middleware(SignalWrites, service=service)

    async def need_login(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, NeedLogin)
        if exc.page:
            query = f"?{request.url.query}" if request.url.query else ""
            target = quote(request.url.path + query)
            return RedirectResponse(f"{PREFIX}/login?next={target}", status_code=303)
        return JSONResponse(
            {"detail": f"log in at {PREFIX}/login, or send {API_KEY_HINT}"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    app.add_exception_handler(NeedLogin, need_login)
    api_errors = app.exception_handlers[StarletteHTTPException]

    async def page_error(request: Request, exc: Exception) -> Response:
        """A page's 404 (or other refusal) as a page; the API keeps its JSON answers."""
        path = request.url.path
        data = path.endswith(".json") or path.startswith(f"{PREFIX}/static/")
        if not path.startswith(f"{PREFIX}/") or data:
            answer = api_errors(request, exc)
            return await answer if inspect.isawaitable(answer) else answer
        assert isinstance(exc, StarletteHTTPException)
        title = {404: "Not found", 403: "Refused"}.get(exc.status_code, "Cannot show this")
        return html("error.html", exc.status_code, title=title, detail=str(exc.detail))

    app.add_exception_handler(StarletteHTTPException, page_error)

    @app.get(PREFIX, include_in_schema=False)
    async def home() -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=308)
