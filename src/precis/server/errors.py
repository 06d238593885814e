"""Errors to answers, by class: each precis error has one status and a one-line detail."""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

from precis.core.errors import (
    CompactionError,
    ConversationNotFound,
    InvalidInput,
    InvalidMessage,
    MessageTooLarge,
    ModelError,
    ModelTimeout,
    ReadOnlyStore,
    StoreError,
    StoreUnavailable,
    SummarizerError,
    UnknownMessage,
    VersionConflict,
)

# How many validation problems one 422 answer lists.
MAX_REPORTED_ERRORS = 5
# Seconds a client is asked to wait before retrying when the store is unavailable.
RETRY_AFTER_SECONDS = 5
# Store errors whose text names only the caller's own conversation and message; any other names
# the store itself (its URL, its file), which is the operator's business, not a tenant's.
CALLERS_STORE_ERRORS = (ConversationNotFound, UnknownMessage, VersionConflict, InvalidInput)
STORE_FAILED = "the store failed; the service's log says why"
STORE_UNAVAILABLE = "the store is unavailable just now; retry later"
STORE_READ_ONLY = "the store is read-only: this service answers reads only"
# The operator's log (uvicorn's own stream under `precis serve`), which tenants never see.
log = logging.getLogger("precis.server")


def invalid_message_detail(exc: InvalidMessage) -> str:
    """'messages[3].tool_call_id: reason' — the field a client must fix, then why."""
    where = "messages" if exc.index is None else f"messages[{exc.index}]"
    return f"{where}.{exc.field}: {exc.reason}" if exc.field else f"{where}: {exc.reason}"


def validation_detail(exc: RequestValidationError) -> str:
    """The first few validation problems as 'field: message', fields written as a client would."""
    problems: list[str] = []
    for error in exc.errors()[:MAX_REPORTED_ERRORS]:
        loc = list(error.get("loc", ()))
        if loc and loc[0] in ("body", "query", "path", "header"):
            loc = loc[1:]  # the field alone; an empty remainder reads as "body"
        field = ""
        for part in loc:
            field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
        problems.append(f"{field or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"


def _detail(exc: Exception) -> tuple[int, str]:
    """The status and detail for one of the library's errors; most specific class first."""
    if isinstance(exc, RequestValidationError):
        return 422, validation_detail(exc)
    if isinstance(exc, MessageTooLarge):
        return 413, invalid_message_detail(exc)
    if isinstance(exc, InvalidMessage):
        return 422, invalid_message_detail(exc)
    if isinstance(exc, InvalidInput):
        return 422, str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return 422, f"body: {exc}"
    if isinstance(exc, ConversationNotFound | UnknownMessage):
        return 404, str(exc)
    if isinstance(exc, VersionConflict | CompactionError):
        return 409, f"cannot compact: {exc}"
    if isinstance(exc, StoreUnavailable):  # the store's own words may name where it lives
        return 503, STORE_UNAVAILABLE
    if isinstance(exc, ReadOnlyStore):
        return 403, str(exc)
    if isinstance(exc, StoreError):  # the store's own failure, not the request's: the operator's
        return 500, str(exc)
    if isinstance(exc, ModelTimeout):
        return 504, f"summarizer timed out: {exc}"
    if isinstance(exc, ModelError | SummarizerError):
        return 502, f"summarizer failed: {exc}"
    raise exc


def _for_callers(exc: Exception, detail: str) -> str:
    """The detail as any tenant may read it: a store's own failure names the store (its URL or
    file), so the caller is told only that it failed, and the operator's log says why."""
    if not isinstance(exc, StoreError) or isinstance(exc, CALLERS_STORE_ERRORS):
        return detail
    log.error("store failure: %s", exc)
    if isinstance(exc, StoreUnavailable):
        return detail  # says only that the store is away for now
    return STORE_READ_ONLY if isinstance(exc, ReadOnlyStore) else STORE_FAILED


def store_failure(exc: StoreError) -> str:
    """What a caller is told of a store's failure where no status can say it (a stream that
    has started): the answer's detail, the store's own words in the operator's log only."""
    return _for_callers(exc, _detail(exc)[1])


_HANDLED = (
    RequestValidationError,
    InvalidInput,
    json.JSONDecodeError,
    StoreError,
    CompactionError,
    ModelError,
    SummarizerError,
)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(app: FastAPI, scope: Scope) -> set[str]:
    """Every method some route answers for this path, asked of the routes themselves (included
    routers too), since starlette names only the first route's."""
    return {
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in app.routes)
    }


def install_error_handlers(app: FastAPI) -> None:
    """Map the library's expected failures to 4xx (or 502 for the model) with a clear detail."""

    async def on_error(_: Request, exc: Exception) -> JSONResponse:
        status, detail = _detail(exc)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
        return JSONResponse(
            {"detail": _for_callers(exc, detail)}, status_code=status, headers=headers
        )

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 405:
            allow = ", ".join(sorted(_allowed_methods(app, request.scope)))
            return JSONResponse(
                {"detail": f"method {request.method} not allowed; allowed: {allow}"},
                status_code=405,
                headers={"Allow": allow},
            )
        return await http_exception_handler(request, exc)

    app.add_exception_handler(StarletteHTTPException, on_http)
    for kind in _HANDLED:
        app.add_exception_handler(kind, on_error)
