"""The inspector: the context window over time, in the browser, served by `precis serve` at /ui.

`install` adds the pages (`pages`), the vendored htmx and the stylesheet (`static/`), the login
(`auth`) and a strict Content-Security-Policy: the pages run no script but the package's own.
"""

from __future__ import annotations

import inspect
from importlib.resources import files
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
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


def install(app: FastAPI, service: Service) -> None:
    """Serve the inspector from `app` under /ui, over the same service and keys as the API."""
    app.state.logins = Logins(service.keys)
    static = StaticFiles(directory=str(files("precis.server.ui") / "static"))
    app.mount(f"{PREFIX}/static", static, name="inspector-static")
    app.include_router(router(), prefix=PREFIX)
    app.add_middleware(PageHeaders)

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
        if not path.startswith(f"{PREFIX}/") or path.startswith(f"{PREFIX}/static/"):
            answer = api_errors(request, exc)
            return await answer if inspect.isawaitable(answer) else answer
        assert isinstance(exc, StarletteHTTPException)
        title = {404: "Not found", 403: "Refused"}.get(exc.status_code, "Cannot show this")
        return html("error.html", exc.status_code, title=title, detail=str(exc.detail))

    app.add_exception_handler(StarletteHTTPException, page_error)

    @app.get(PREFIX, include_in_schema=False)
    async def home() -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=308)
