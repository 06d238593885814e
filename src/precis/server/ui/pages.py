"""The inspector's pages under /ui: server-rendered HTML, htmx for live parts, no other script.

Every page reads through the same service and tenant scoping as the API: a tenant's browser sees
only its conversations, and another tenant's id is a 404 here as there.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from precis.charts import CONVENTION, composition_chart, render
from precis.charts.composition import bins_for
from precis.core.errors import StoreError
from precis.core.types import CONVERSATION_ID_PATTERN
from precis.server.deps import Conversation, Service, ServiceDep
from precis.server.errors import store_failure
from precis.server.ui import data
from precis.server.ui.auth import COOKIE, SESSION_SECONDS, Logins, NeedLogin

__all__ = ["router"]

_templates = Environment(
    loader=PackageLoader("precis.server.ui", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)

ConversationPath = Annotated[
    str, Path(description="The conversation's id.", pattern=CONVERSATION_ID_PATTERN)
]


def _logins(request: Request) -> Logins:
    logins = request.app.state.logins
    assert isinstance(logins, Logins)
    return logins


def _tenant(request: Request, service: Service, *, page: bool) -> str | None:
    """The caller's tenant, from the inspector's cookie or an API bearer token."""
    if not service.keys:
        return None
    token = request.cookies.get(COOKIE)
    if token:
        known, tenant = _logins(request).tenant(token)
        if known:
            return tenant
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials:
        known, tenant = service.keys.tenant(credentials.strip())
        if known:
            return tenant
    raise NeedLogin(page)


def page_tenant(request: Request, service: ServiceDep) -> str | None:
    return _tenant(request, service, page=True)


def part_tenant(request: Request, service: ServiceDep) -> str | None:
    return _tenant(request, service, page=False)


PageTenant = Annotated[str | None, Depends(page_tenant)]
PartTenant = Annotated[str | None, Depends(part_tenant)]


def html(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_templates.get_template(name).render(**context), status_code=status)


async def _existing(service: Service, conversation_id: str, tenant: str | None) -> Conversation:
    conversation = Conversation(conversation_id, tenant)
    if not await run_in_threadpool(service.store.exists, conversation.stored_id):
        raise HTTPException(404, f"conversation {conversation_id!r} not found")
    return conversation


# The two charts a page draws (the stylesheet shows one): width, height, tap target, and how
# many stretches of turns each draws its markers in. The wide chart's is a multiple of the
# phone's, so one count by the store serves both (`coarser`).
PHONE = (380, 320, 36, bins_for(380, 36))
WIDE = (960, 340, 32, PHONE[3] * max(1, bins_for(960, 32) // PHONE[3]))


def _chart_svgs(payload: dict[str, Any], conversation_id: str) -> tuple[str, str]:
    """The chart for a wide screen and for a phone's (the stylesheet shows one): the phone's
    is drawn at its own size, so its text stays readable and its markers a finger wide."""
    base = f"/ui/c/{quote(conversation_id, safe='')}"

    def href(event: int) -> str:
        return f"{base}/compactions/{event + 1}"

    title = f"{conversation_id}: the context window per turn"
    wide, narrow = (
        composition_chart(payload, title=title, href=href, width=w, height=h, tap=t, bins=b)
        for w, h, t, b in (WIDE, PHONE)
    )
    return render(wide, element_id="composition"), render(narrow, element_id="composition-phone")


def _page_payload(service: Service, stored_id: str) -> dict[str, Any]:
    """The chart's data as a page draws it: the samples it has room for, the markers counted
    per stretch of turns by the store, once for both charts."""
    return data.chart_payload(service, stored_id, most=data.DRAWN_POINTS, bins=(WIDE[3],))


def _conversation_reads(
    service: Service, conversation: Conversation
) -> tuple[dict[str, Any], list[dict[str, Any]], data.ContextNow]:
    """The conversation page's reads, in one worker-thread call: the chart's data, its newest
    compactions, the context now."""
    payload = _page_payload(service, conversation.stored_id)
    latest = data.latest_markers(service, conversation.stored_id, payload["compactions"])
    return payload, latest, data.context_now(service, conversation, payload)


def _same_origin(request: Request) -> bool:
    """A form post from this service's own pages: the browser's Origin (or, lacking it, its
    Sec-Fetch-Site) says so."""
    origin = request.headers.get("origin")
    if origin:
        return urlsplit(origin).netloc == request.headers.get("host")
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


def _safe_next(target: str) -> str:
    """Where to go after logging in: a path under /ui on this service, nothing else."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui"):
        return "/ui/"
    return parts.path + (f"?{parts.query}" if parts.query else "")


def router() -> APIRouter:
    """The inspector's routes; `create_app` mounts them under /ui."""
    ui = APIRouter(include_in_schema=False)

    @ui.get("/login")
    async def login_form(
        service: ServiceDep, target: Annotated[str, Query(alias="next", max_length=2000)] = "/ui/"
    ) -> Response:
        if not service.keys:
            return RedirectResponse(_safe_next(target), status_code=303)
        return html("login.html", next=_safe_next(target), error=None)

    @ui.post("/login")
    async def login(request: Request, service: ServiceDep) -> Response:
        if not _same_origin(request):
            raise HTTPException(403, "log in from the inspector's own page")
        logins = _logins(request)
        client = request.client.host if request.client else ""
        if not logins.may_try(client):
            raise HTTPException(429, "too many wrong keys from here: try again in a minute")
        form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
        target = _safe_next(form.get("next", ["/ui/"])[0])
        token = logins.login(form.get("key", [""])[0].strip(), client)
        if token is None:
            wrong = "That key is not one this service accepts."
            return html("login.html", 401, next=target, error=wrong)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE,
            token,
            max_age=SESSION_SECONDS,
            path="/ui",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @ui.post("/logout")
    async def logout(request: Request) -> Response:
        if not _same_origin(request):
            raise HTTPException(403, "log out from the inspector's own page")
        token = request.cookies.get(COOKIE)
        if token:
            _logins(request).logout(token)
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/ui")
        return response

    @ui.get("/")
    async def conversations(
        service: ServiceDep,
        tenant: PageTenant,
        after: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    ) -> Response:
        rows, total = await run_in_threadpool(data.conversation_rows, service, tenant, after)
        return html(
            "conversations.html",
            rows=rows,
            total=total,
            after=after,
            page=data.CONVERSATIONS_PAGE,
            keys=bool(service.keys),
            tenant=tenant,
        )

    @ui.get("/c/{conversation_id}")
    async def conversation(
        conversation_id: ConversationPath, service: ServiceDep, tenant: PageTenant
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        payload, latest, now = await run_in_threadpool(_conversation_reads, service, found)
        return html(
            "conversation.html",
            cid=conversation_id,
            charts=_chart_svgs(payload, conversation_id),
            payload=payload,
            latest=latest,
            now=now,
            keys=bool(service.keys),
        )

    @ui.get("/c/{conversation_id}/chart")
    async def chart(
        conversation_id: ConversationPath, service: ServiceDep, tenant: PartTenant
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        payload = await run_in_threadpool(_page_payload, service, found.stored_id)
        latest = await run_in_threadpool(
            data.latest_markers, service, found.stored_id, payload["compactions"]
        )
        return html(
            "_chart.html",
            cid=conversation_id,
            charts=_chart_svgs(payload, conversation_id),
            payload=payload,
            latest=latest,
        )

    @ui.get("/c/{conversation_id}/chart.json")
    async def chart_json(
        conversation_id: ConversationPath, service: ServiceDep, tenant: PartTenant
    ) -> JSONResponse:
        found = await _existing(service, conversation_id, tenant)
        payload = await run_in_threadpool(
            functools.partial(data.chart_payload, service, found.stored_id, stats=True)
        )
        return JSONResponse(payload)

    @ui.get("/c/{conversation_id}/context")
    async def context(
        conversation_id: ConversationPath, service: ServiceDep, tenant: PartTenant
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        now = await run_in_threadpool(data.context_now, service, found)
        return html("_context.html", cid=conversation_id, now=now)

    @ui.get("/c/{conversation_id}/compactions")
    async def compactions(
        conversation_id: ConversationPath,
        service: ServiceDep,
        tenant: PageTenant,
        after: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        rows, total = await run_in_threadpool(data.compaction_page, service, found.stored_id, after)
        return html(
            "compactions.html",
            cid=conversation_id,
            rows=rows,
            total=total,
            after=after,
            page=data.COMPACTIONS_PAGE,
            convention=CONVENTION,
            keys=bool(service.keys),
        )

    @ui.get("/c/{conversation_id}/compactions/{number}")
    async def compaction(
        conversation_id: ConversationPath,
        number: Annotated[int, Path(ge=1, le=1_000_000_000)],
        service: ServiceDep,
        tenant: PageTenant,
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        detail = await run_in_threadpool(
            data.compaction_detail, service, found.stored_id, number - 1
        )
        if detail is None:
            raise HTTPException(404, f"conversation {conversation_id!r} has no compaction {number}")
        return html("compaction.html", cid=conversation_id, d=detail, keys=bool(service.keys))

    @ui.get("/c/{conversation_id}/history")
    async def history(
        conversation_id: ConversationPath,
        service: ServiceDep,
        tenant: PageTenant,
        at: Annotated[int | None, Query(ge=1, le=1_000_000_000)] = None,
        after: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        if at is not None:  # the page holding seq `at`
            after = (at - 1) // data.HISTORY_PAGE * data.HISTORY_PAGE
        rows, total = await run_in_threadpool(data.history_page, service, found.stored_id, after)
        return html(
            "history.html",
            cid=conversation_id,
            rows=rows,
            total=total,
            after=after,
            page=data.HISTORY_PAGE,
            at=at,
        )

    @ui.get("/c/{conversation_id}/m/{message_id}")
    async def message(
        conversation_id: ConversationPath,
        message_id: Annotated[str, Path(max_length=200)],
        service: ServiceDep,
        tenant: PageTenant,
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        row = await run_in_threadpool(data.one_message, service, found.stored_id, message_id)
        if row is None:
            raise HTTPException(404, f"no message {message_id!r} in {conversation_id!r}")
        return html("message.html", cid=conversation_id, row=row, keys=bool(service.keys))

    @ui.get("/c/{conversation_id}/recall")
    async def recall(
        request: Request,
        conversation_id: ConversationPath,
        service: ServiceDep,
        tenant: PageTenant,
        q: Annotated[str, Query(max_length=1000)] = "",
        originals: Annotated[bool, Query()] = False,
    ) -> Response:
        found = await _existing(service, conversation_id, tenant)
        hits, more = await run_in_threadpool(data.recall, service, found.stored_id, q, originals)
        name = "_hits.html" if request.headers.get("hx-request") else "recall.html"
        return html(
            name,
            cid=conversation_id,
            q=q,
            hits=hits,
            more=more,
            originals=originals,
            keys=bool(service.keys),
        )

    @ui.get("/c/{conversation_id}/stream")
    async def stream(
        conversation_id: ConversationPath,
        service: ServiceDep,
        tenant: PartTenant,
        turn: Annotated[int | None, Query(ge=0, le=1_000_000_000)] = None,
        compactions: Annotated[int | None, Query(ge=0, le=1_000_000_000)] = None,
    ) -> EventSourceResponse:
        """`turn` and `compactions` are what the page already shows (default: what is now)."""
        found = await _existing(service, conversation_id, tenant)
        return EventSourceResponse(
            _turns(service, found, turn, compactions),
            ping=service.limits.keepalive_seconds,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return ui


async def _turns(
    service: Service, conversation: Conversation, shown_turn: int | None, shown_events: int | None
) -> AsyncIterator[ServerSentEvent]:
    """What changed since the page's cursor (the turn and the compaction count it shows): a
    `compaction` event per new marker and a `turn` event per new sample, each its JSON, then one
    `now` event (the page appends them; nothing is sent again). It sleeps on the conversation's
    `service.changes` future: while no request of this process writes to it, it reads nothing.
    At each keepalive (another process may be the one writing) it reads the cursor alone, and
    the rows after it only when the cursor moved. A read the store fails ends the stream with
    a `failed` event saying so (as an answer's detail would: the store's words go to the log);
    the browser reconnects from its page's cursor after `retry`."""
    gauge, changes = service.streams, service.changes
    stored_id, idle = conversation.stored_id, service.limits.keepalive_seconds
    gauge.open += 1
    gauge.started += 1
    change = changes.watch(conversation.id)
    try:
        if shown_turn is None or shown_events is None:
            current = await run_in_threadpool(data.stream_cursor, service, stored_id)
            turn = current[0] if shown_turn is None else shown_turn
            events = current[1] if shown_events is None else shown_events
        else:
            turn, events = shown_turn, shown_events
        yield ServerSentEvent(comment="stream open", retry=int(idle * 1000))
        look = True
        while True:
            if look:
                samples, markers = await run_in_threadpool(
                    data.stream_since, service, stored_id, turn, events
                )
                for marker in markers:
                    yield ServerSentEvent(data=json.dumps(marker), event="compaction")
                for sample in samples:
                    yield ServerSentEvent(data=json.dumps(sample), event="turn")
                if samples or markers:
                    turn = samples[-1]["turn"] if samples else turn
                    events += len(markers)
                    yield ServerSentEvent(data=str(turn), event="now")
            woke = await changes.wait(change, idle)
            changes.drop(conversation.id, change)
            change = changes.watch(conversation.id)
            if woke:
                look = True
            else:
                yield ServerSentEvent(comment="idle")
                now = await run_in_threadpool(data.stream_cursor, service, stored_id)
                look = now != (turn, events)
    except StoreError as exc:
        yield ServerSentEvent(data=store_failure(exc), event="failed")
    finally:
        changes.drop(conversation.id, change)
        gauge.open -= 1
