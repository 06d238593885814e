"""The HTTP face of precis: the same sessions as the library, over JSON, for any language.

`create_app` wires the routes (one module per resource, under `routes/`) to one `Service`;
every route works through an `AsyncSession`, so no request blocks the event loop.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from precis import __version__
from precis.core.tokens import default_counter
from precis.engine.settings import CompactionSettings
from precis.server.deps import (
    CounterFactory,
    IdleSessions,
    Service,
    SummarizerFactory,
    require_key,
)
from precis.server.errors import install_error_handlers
from precis.server.keys import ApiKeys
from precis.server.limits import BodyLimit, ServiceLimits
from precis.server.models import ErrorOut, Health
from precis.server.routes import compaction, conversations, messages
from precis.server.ui import install as install_inspector
from precis.stores.base import ConversationStore
from precis.summarize.extractive import ExtractiveSummarizer

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text}
    for status, text in (
        (400, "The body could not be parsed as the content type it names."),
        (401, "Missing or wrong bearer token."),
        (403, "The store is read-only: this service answers reads only."),
        (404, "No such conversation, or no such message in it."),
        (409, "Conflicts with the conversation's state (exists, nothing to compact, raced)."),
        (413, "The body, or one message in it, is over the size limit."),
        (422, "Malformed input; the detail names the field."),
        (500, "The store failed (nothing was written); the service's log says why."),
        (503, "The store is unavailable (nothing was written); retry after Retry-After seconds."),
    )
}


@asynccontextmanager
async def _closing(app: FastAPI) -> AsyncIterator[None]:
    """At shutdown, wait for the compactions running behind the requests."""
    yield
    await app.state.service.aclose()


def create_app(
    store: ConversationStore,
    *,
    settings: CompactionSettings,
    api_key: str | None = None,
    api_keys: ApiKeys | None = None,
    summarizer_factory: SummarizerFactory = ExtractiveSummarizer,
    counter_factory: CounterFactory = default_counter,
    limits: ServiceLimits | None = None,
) -> FastAPI:
    """Build the service over one store; nothing lives outside the returned app.

    `api_key` is one key its callers share, for the conversations made without a tenant (none of
    a tenant's); `api_keys` binds keys to tenants, each seeing only its own conversations
    (another tenant's id answers 404).

    A request borrows its conversation's session: the one the last request gave back if the
    worker still keeps it (at most `limits.idle_sessions`, least recently used let go first),
    else a fresh one; so what a session remembers lasts across a conversation's requests, and
    the worker's memory is bounded however many conversations it serves. The inspector's
    pages are served under /ui behind the same keys.
    """
    limits = limits or ServiceLimits()
    keys = ApiKeys.single(api_key) if api_key else ApiKeys({})
    if api_keys:
        keys = keys.merged(api_keys)
    app = FastAPI(
        title="precis",
        version=__version__,
        summary="Keep an LLM conversation inside its context window; originals stay searchable.",
        openapi_url=None if keys else "/openapi.json",
        docs_url=None if keys else "/docs",
        redoc_url=None,
        generate_unique_id_function=lambda route: route.name,
        lifespan=_closing,
    )
    service = Service(
        store,
        settings,
        summarizer_factory,
        counter_factory,
        limits,
        keys,
        idle=IdleSessions(limits.idle_sessions),
    )
    app.state.service = service
    app.state.streams = service.streams
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    install_error_handlers(app)

    @app.get("/healthz", tags=["service"])
    async def healthz() -> Health:
        """Liveness without credentials, for supervisors and load balancers."""
        return Health(status="ok", version=__version__)

    guarded = [Depends(require_key)] if keys else []
    if keys:

        @app.get("/openapi.json", include_in_schema=False, dependencies=guarded)
        async def openapi() -> JSONResponse:
            """The API description, behind the same key as the API it describes."""
            return JSONResponse(app.openapi())

    # Every /v1 route names the caller's tenant (`Tenant`, or through `ConversationDep` or
    # `LentDep`), which refuses a missing or wrong key before anything else is read: no router
    # guard besides, as FastAPI would solve the key's dependency again for each.
    for router in (
        conversations.router,
        messages.router(limits),
        compaction.router(limits),
    ):
        app.include_router(router, prefix="/v1", responses=_ERRORS)
    install_inspector(app, service)
    return app


class PathsWithoutQuery(logging.Filter):
    """Access log lines name the path and never its query string, which may carry a token."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                a.partition("?")[0] if isinstance(a, str) and a.startswith("/") else a
                for a in record.args
            )
        return True


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging setup, its access log filtered by `PathsWithoutQuery`."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["paths_without_query"] = {"()": PathsWithoutQuery}
    config["loggers"]["uvicorn.access"]["filters"] = ["paths_without_query"]
    return config
