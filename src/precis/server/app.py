"""The HTTP face of precis: the same sessions as the library, over JSON, for any language."""

import asyncio
import json
import math
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import Scope

from precis import __version__
from precis.core.errors import (
    CompactionError,
    ContextOverflow,
    ConversationNotFound,
    InvalidMessage,
    PlanningError,
    StoreError,
    SummarizerError,
    VersionConflict,
)
from precis.core.messages import Message, messages_from_anthropic
from precis.core.tokens import TokenCounter, default_counter
from precis.engine.compactor import CompactionResult
from precis.engine.settings import CompactionSettings
from precis.server.limits import BodyLimit, ServiceLimits
from precis.server.models import (
    AppendedOut,
    AppendMessages,
    CompactionStatsOut,
    CompactOut,
    CompactRequest,
    ContextOut,
    ConversationList,
    ConversationOut,
    ConversationRef,
    CreateConversation,
    ErrorOut,
    EventList,
    EventOut,
    Health,
    HistoryOut,
    PromptOut,
    RecallHitOut,
    RecallOut,
)
from precis.session import Session
from precis.stores.base import CompactionEvent, ConversationStore
from precis.summarize.base import Summarizer
from precis.summarize.extractive import ExtractiveSummarizer

SummarizerFactory = Callable[[], Summarizer]
CounterFactory = Callable[[], TokenCounter]

# Largest offset or index a query may name; beyond it SQLite's integers would overflow.
MAX_OFFSET = 1_000_000_000
# How many validation problems one 422 answer lists.
MAX_REPORTED_ERRORS = 5
API_KEY_HINT = "Authorization: Bearer <PRECIS_API_KEY>"

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text}
    for status, text in (
        (400, "The request is well-formed but the store refused it."),
        (401, "Missing or wrong bearer token."),
        (404, "No such conversation."),
        (409, "Conflicts with the conversation's state (exists, nothing to compact, raced)."),
        (413, "The body, or one message in it, is over the size limit."),
        (422, "Malformed input; the detail names the field."),
    )
}
_SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "One `event: compaction` per committed compaction, as it happens.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}
ConversationId = Annotated[str, Path(description="The conversation's id.")]


@dataclass(slots=True)
class StreamGauge:
    """How many event streams are open (and were ever opened), so disconnects can be seen."""

    open: int = 0
    started: int = 0


def create_app(
    store: ConversationStore,
    *,
    settings: CompactionSettings,
    api_key: str | None = None,
    summarizer_factory: SummarizerFactory = ExtractiveSummarizer,
    counter_factory: CounterFactory = default_counter,
    limits: ServiceLimits | None = None,
) -> FastAPI:
    """Build the service over one store; nothing lives outside the returned app.

    Each request gets a fresh `Session` (and so a fresh token-count cache and summarizer), so a
    long-running service does not grow with the number of messages it has seen.
    """
    limits = limits or ServiceLimits()
    key = api_key or None
    gauge = StreamGauge()
    app = FastAPI(
        title="precis",
        version=__version__,
        summary="Keep an LLM conversation inside its context window; originals stay searchable.",
        openapi_url=None if key else "/openapi.json",
        docs_url=None if key else "/docs",
        redoc_url=None,
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.streams = gauge
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    _install_error_handlers(app)

    bearer = HTTPBearer(auto_error=False, description=f"Send `{API_KEY_HINT}`.")

    async def require_key(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        """Refuse callers without the configured key; compare in constant time."""
        assert key is not None
        given = credentials.credentials.encode() if credentials is not None else b""
        if credentials is None or not secrets.compare_digest(given, key.encode()):
            raise HTTPException(
                401,
                f"missing or wrong bearer token; send {API_KEY_HINT}",
                headers={"WWW-Authenticate": "Bearer"},
            )

    guarded = [Depends(require_key)] if key else []
    api = APIRouter(prefix="/v1", dependencies=guarded, responses=_ERRORS)

    def open_session(conversation_id: str) -> Session:
        """A session on an existing conversation; Session itself would create a missing one."""
        if not store.exists(conversation_id):
            raise ConversationNotFound(conversation_id)
        return Session(store, conversation_id, counter_factory(), summarizer_factory(), settings)

    def describe(conversation_id: str) -> ConversationOut:
        session = open_session(conversation_id)
        snapshot = store.context(conversation_id)
        prompt, _ = store.system_prompt(conversation_id)
        return ConversationOut(
            id=conversation_id,
            messages=store.count(conversation_id),
            in_context=len(snapshot.messages),
            tokens=session.tokens(),
            context_window=settings.context_window,
            version=snapshot.version,
            compacted=snapshot.compacted,
            system_prompt=prompt,
        )

    @app.get("/healthz", tags=["service"])
    async def healthz() -> Health:
        """Liveness without credentials, for supervisors and load balancers."""
        return Health(status="ok", version=__version__)

    if key:

        @app.get("/openapi.json", include_in_schema=False, dependencies=guarded)
        async def openapi() -> JSONResponse:
            """The API description, behind the same key as the API it describes."""
            return JSONResponse(app.openapi())

    @api.post("/conversations", status_code=201, tags=["conversations"])
    async def create_conversation(body: CreateConversation) -> ConversationOut:
        """Start a conversation; 409 if the id is taken, so two agents never share one."""
        conversation_id = body.id or f"conv_{secrets.token_hex(8)}"

        def create() -> ConversationOut:
            if store.exists(conversation_id):
                raise HTTPException(409, f"id: conversation {conversation_id!r} already exists")
            store.create(conversation_id, system_prompt=body.system_prompt)
            return describe(conversation_id)

        return await run_in_threadpool(create)

    @api.get("/conversations", tags=["conversations"])
    async def list_conversations() -> ConversationList:
        """Every conversation id in the store."""
        ids = await run_in_threadpool(store.conversations)
        return ConversationList(conversations=[ConversationRef(id=i) for i in ids])

    @api.get("/conversations/{conversation_id}", tags=["conversations"])
    async def get_conversation(conversation_id: ConversationId) -> ConversationOut:
        """How much is stored and how much is in context."""
        return await run_in_threadpool(describe, conversation_id)

    @api.post(
        "/conversations/{conversation_id}/messages",
        status_code=201,
        response_model=AppendedOut,
        response_model_exclude_unset=True,
        tags=["messages"],
    )
    async def append_messages(conversation_id: ConversationId, body: AppendMessages) -> Any:
        """Append in one transaction: all the messages or, on any error, none."""
        if len(body.messages) > limits.max_messages_per_append:
            raise HTTPException(
                413,
                f"messages: {len(body.messages)} messages, over the limit of "
                f"{limits.max_messages_per_append} per request",
            )

        def append() -> dict[str, Any]:
            session = open_session(conversation_id)
            if body.format == "anthropic":
                known = {tc.id for m in session.context() for tc in m.tool_calls}
                messages, origin = _from_anthropic(body.messages, known)
            else:
                messages = _from_openai(body.messages)
                origin = list(range(len(messages)))
            _check_sizes(messages, origin, limits.max_message_chars)
            try:
                appended = session.append(*messages)
            except InvalidMessage as exc:
                index = origin[exc.index] if exc.index is not None else None
                raise InvalidMessage(index, exc.reason) from None
            return {"messages": [_message_out(m) for m in appended], "tokens": session.tokens()}

        return await run_in_threadpool(append)

    @api.get(
        "/conversations/{conversation_id}/context",
        response_model=ContextOut,
        response_model_exclude_unset=True,
        tags=["messages"],
    )
    async def get_context(conversation_id: ConversationId) -> Any:
        """The in-context messages in stored order, with the token count the next call carries."""

        def read() -> dict[str, Any]:
            session = open_session(conversation_id)
            snapshot = store.context(conversation_id)
            return {
                "conversation_id": conversation_id,
                "version": snapshot.version,
                "compacted": snapshot.compacted,
                "tokens": session.tokens(),
                "context_window": settings.context_window,
                "threshold": settings.threshold,
                "messages": [_message_out(m) for m in snapshot.messages],
            }

        return await run_in_threadpool(read)

    @api.get("/conversations/{conversation_id}/prompt", tags=["messages"])
    async def get_prompt(conversation_id: ConversationId) -> PromptOut:
        """What to send next, OpenAI format: system prompt, pinned, summary, kept messages."""

        def read() -> PromptOut:
            session = open_session(conversation_id)
            return PromptOut(messages=session.prompt(), tokens=session.tokens())

        return await run_in_threadpool(read)

    @api.post(
        "/conversations/{conversation_id}/compact",
        response_model=CompactOut,
        response_model_exclude_unset=True,
        tags=["compaction"],
        responses={502: {"model": ErrorOut, "description": "The summarizer's model failed."}},
    )
    async def compact(conversation_id: ConversationId, body: CompactRequest | None = None) -> Any:
        """Compact now and return what it did; 409 when there is nothing to compact."""
        request = body or CompactRequest()

        def run() -> dict[str, Any]:
            session = open_session(conversation_id)
            if not session.context():
                raise HTTPException(
                    409, f"conversation {conversation_id!r} has no messages; nothing to compact"
                )
            result: CompactionResult = asyncio.run(
                session.compact_result(
                    request.mode, trigger="manual", instructions=request.instructions
                )
            )
            return {
                "stats": CompactionStatsOut(**result.stats.as_dict()),
                "summary": _message_out(result.summary),
                "reports": list(result.reports),
            }

        return await run_in_threadpool(run)

    @api.get("/conversations/{conversation_id}/recall", tags=["compaction"])
    async def recall(
        conversation_id: ConversationId,
        q: Annotated[str, Query(min_length=1, max_length=1000, description="Words to find.")],
        limit: Annotated[int, Query(ge=1, le=limits.max_recall_limit)] = 10,
    ) -> RecallOut:
        """Search every original message, compacted away or not; best first."""

        def search() -> RecallOut:
            if not store.exists(conversation_id):
                raise ConversationNotFound(conversation_id)
            hits = store.recall(conversation_id, q, limit)
            return RecallOut(
                query=q,
                hits=[
                    RecallHitOut(id=h.id, role=h.role, seq=h.seq, snippet=h.snippet, score=h.score)
                    for h in hits
                ],
            )

        return await run_in_threadpool(search)

    @api.get(
        "/conversations/{conversation_id}/history",
        response_model=HistoryOut,
        response_model_exclude_unset=True,
        tags=["messages"],
    )
    async def history(
        conversation_id: ConversationId,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
        limit: Annotated[int, Query(ge=1, le=limits.max_history_page)] = 100,
    ) -> Any:
        """A page of every message ever appended, summaries included, oldest first."""

        def read() -> dict[str, Any]:
            if not store.exists(conversation_id):
                raise ConversationNotFound(conversation_id)
            page = store.history(conversation_id, offset=offset, limit=limit)
            return {
                "total": store.count(conversation_id),
                "offset": offset,
                "messages": [_message_out(m) for m in page],
            }

        return await run_in_threadpool(read)

    @api.get("/conversations/{conversation_id}/events", tags=["compaction"])
    async def events(conversation_id: ConversationId) -> EventList:
        """Every committed compaction of the conversation, oldest first."""
        found = await run_in_threadpool(_events, store, conversation_id)
        return EventList(events=[_event_out(i, e) for i, e in enumerate(found)])

    @api.get(
        "/conversations/{conversation_id}/events/stream",
        response_class=StreamingResponse,
        responses=_SSE_RESPONSE,
        tags=["compaction"],
    )
    async def stream_events(
        request: Request,
        conversation_id: ConversationId,
        since: Annotated[
            int | None,
            Query(ge=0, le=MAX_OFFSET, description="First event index to send (default: new)."),
        ] = None,
        max_events: Annotated[
            int | None, Query(ge=1, le=MAX_OFFSET, description="Close after this many events.")
        ] = None,
        last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> StreamingResponse:
        """Server-sent events: one `event: compaction` per new compaction, until disconnect."""
        current = await run_in_threadpool(_events, store, conversation_id)
        start = _stream_start(since, last_event_id, len(current))
        frames = _event_frames(request, store, conversation_id, start, max_events, limits, gauge)
        return StreamingResponse(
            frames,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    app.include_router(api)
    return app


def _events(store: ConversationStore, conversation_id: str) -> list[CompactionEvent]:
    if not store.exists(conversation_id):
        raise ConversationNotFound(conversation_id)
    return store.events(conversation_id)


def _stream_start(since: int | None, last_event_id: str | None, count: int) -> int:
    """Where a stream starts: `since`, else after the client's Last-Event-ID, else new only."""
    if since is not None:
        return since
    if last_event_id is not None and last_event_id.strip().isdigit():
        return int(last_event_id) + 1
    return count


async def _event_frames(
    request: Request,
    store: ConversationStore,
    conversation_id: str,
    start: int,
    max_events: int | None,
    limits: ServiceLimits,
    gauge: StreamGauge,
) -> AsyncIterator[str]:
    """Poll the store's event log (another worker may commit) and frame each new event."""
    gauge.open += 1
    gauge.started += 1
    try:
        yield f"retry: {int(limits.event_poll_seconds * 2000)}\n\n"
        sent = 0
        following = start
        quiet_since = time.monotonic()
        while not await request.is_disconnected():
            found = await run_in_threadpool(store.events, conversation_id)
            for index in range(following, len(found)):
                data = _event_out(index, found[index]).model_dump_json()
                yield f"id: {index}\nevent: compaction\ndata: {data}\n\n"
                sent += 1
                following = index + 1
                quiet_since = time.monotonic()
                if max_events is not None and sent >= max_events:
                    return
            if time.monotonic() - quiet_since >= limits.keepalive_seconds:
                yield ": keepalive\n\n"  # a write to a gone client is how a disconnect shows
                quiet_since = time.monotonic()
            await anyio.sleep(limits.event_poll_seconds)
    finally:
        gauge.open -= 1


def _event_out(index: int, event: CompactionEvent) -> EventOut:
    return EventOut(
        index=index,
        trigger=event.trigger,
        mode=event.mode,
        stats=dict(event.stats),
        summary_id=event.summary_id,
        at=event.at,
    )


def _message_out(message: Message) -> dict[str, Any]:
    """OpenAI format plus precis's own fields; precis's id wins over a client-sent one."""
    return {
        **message.to_openai(),
        "id": message.id,
        "kind": message.kind,
        "pinned": message.pinned,
        "created_at": message.created_at,
    }


def _from_openai(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    messages: list[Message] = []
    for i, item in enumerate(items):
        _check_plain(item, i)
        tool_call_id = item.get("tool_call_id")
        if tool_call_id is not None and not isinstance(tool_call_id, str):
            raise InvalidMessage(i, "tool_call_id must be a string")
        messages.append(Message.from_openai(item, index=i))
    return messages


def _from_anthropic(
    items: Sequence[Mapping[str, Any]], known_calls: set[str]
) -> tuple[list[Message], list[int]]:
    """Convert one Anthropic message at a time, so every result maps back to its input index.

    A `tool_result` may answer a `tool_use` appended by an earlier request (`known_calls`).
    """
    issued = set(known_calls)
    messages: list[Message] = []
    origin: list[int] = []
    for i, item in enumerate(items):
        _check_plain(item, i)
        try:
            converted = messages_from_anthropic([item], issued=issued)
        except InvalidMessage as exc:
            raise InvalidMessage(i, exc.reason) from None
        for message in converted:
            issued.update(tc.id for tc in message.tool_calls)
        messages += converted
        origin += [i] * len(converted)
    return messages, origin


def _check_plain(value: Any, index: int) -> None:
    """Refuse NaN and infinities: JSON has no such numbers, and echoing them back would fail."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidMessage(index, f"{item} is not a JSON number")
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _check_sizes(messages: Sequence[Message], origin: Sequence[int], limit: int) -> None:
    """One message may not be larger than `limit` characters of text and tool arguments."""
    for message, index in zip(messages, origin, strict=True):
        size = len(message.content) + sum(
            len(tc.arguments) + len(tc.name) for tc in message.tool_calls
        )
        if size > limit:
            raise HTTPException(
                413,
                f"messages[{index}].content: {size} characters, over the limit of {limit}",
            )


# Field names InvalidMessage reasons mention, most specific first.
_FIELD_PATTERNS = (
    re.compile(r"tool_calls\[\d+\](?:\.function(?:\.\w+)?)?"),
    re.compile(r"\btool_call_id\b"),
    re.compile(r"\btool_calls\b"),
    re.compile(r"\brole\b"),
)
_PART_PATTERN = re.compile(r"(?:content part|content block|block) (\d+)")


def invalid_message_detail(exc: InvalidMessage) -> str:
    """'messages[3].tool_call_id: reason' — the field a client must fix, then why."""
    where = "messages" if exc.index is None else f"messages[{exc.index}]"
    part = _PART_PATTERN.search(exc.reason)
    if part is not None:
        return f"{where}.content[{part.group(1)}]: {exc.reason}"
    for pattern in _FIELD_PATTERNS:
        found = pattern.search(exc.reason)
        if found is not None:
            return f"{where}.{found.group(0)}: {exc.reason}"
    if "content" in exc.reason or "tool_result" in exc.reason or "tool_use" in exc.reason:
        return f"{where}.content: {exc.reason}"
    return f"{where}: {exc.reason}"


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


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def _allowed_methods(app: FastAPI, scope: Scope) -> set[str]:
    """Every method some route offers for this path; starlette names only the first route's."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match != Match.NONE and isinstance(route, APIRoute | Route):
            methods |= route.methods or set()
    return methods


def _install_error_handlers(app: FastAPI) -> None:
    """Map the library's expected failures to 4xx (or 502 for the model) with a clear detail."""

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return _error(422, validation_detail(exc))

    async def on_invalid_message(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, InvalidMessage)
        return _error(422, invalid_message_detail(exc))

    async def on_not_found(_: Request, exc: Exception) -> JSONResponse:
        return _error(404, str(exc))

    async def on_conflict(_: Request, exc: Exception) -> JSONResponse:
        return _error(409, f"cannot compact: {exc}")

    async def on_store_error(_: Request, exc: Exception) -> JSONResponse:
        return _error(400, str(exc))

    async def on_model_error(_: Request, exc: Exception) -> JSONResponse:
        return _error(502, f"summarizer failed: {exc}")

    async def on_bad_json(_: Request, exc: Exception) -> JSONResponse:
        return _error(422, f"body: {exc}")

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
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(InvalidMessage, on_invalid_message)
    app.add_exception_handler(ConversationNotFound, on_not_found)
    for conflict in (VersionConflict, CompactionError, PlanningError):
        app.add_exception_handler(conflict, on_conflict)
    app.add_exception_handler(StoreError, on_store_error)
    for failure in (SummarizerError, ContextOverflow):
        app.add_exception_handler(failure, on_model_error)
    app.add_exception_handler(json.JSONDecodeError, on_bad_json)
