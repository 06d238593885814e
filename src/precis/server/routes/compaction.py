"""Compaction: compact now, recall originals, the event log and its live stream."""

from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, HTTPException, Query
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from precis.core.steps import Steps
from precis.engine.results import CompactionResult
from precis.server.convert import event_out, message_out
from precis.server.deps import LentDep, Service
from precis.server.limits import ServiceLimits
from precis.server.models import (
    CompactionStatsOut,
    CompactOut,
    CompactRequest,
    ErrorOut,
    EventList,
    RecallHitOut,
    RecallOut,
)
from precis.session import AsyncSession
from precis.session._io import SessionRequest

# Largest event index a query may name.
MAX_OFFSET = 1_000_000_000

_SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "One `event: compaction` per committed compaction, as it happens.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    502: {"model": ErrorOut, "description": "The summarizer's model failed."},
}


def router(limits: ServiceLimits) -> APIRouter:
    """The compaction routes, with the service's limits in their schema."""
    api = APIRouter(tags=["compaction"])

    @api.post(
        "/conversations/{conversation_id}/compact",
        response_model=CompactOut,
        response_model_exclude_unset=True,
    )
    async def compact(lent: LentDep, body: CompactRequest | None = None) -> Any:
        """Compact now and return what it did; 409 when the conversation has no messages.

        When nothing can make the context smaller, nothing is written and the answer is
        `compacted: false` with the reason (200: the conversation is fine as it is). A
        summarizer that fails is asked again, then the extractive brief or truncation stands in:
        the stats say which (`fallback`) and why (`fallback_reason`)."""
        conversation, session = lent.conversation, lent.session
        request = body or CompactRequest()
        result = await session._drive(_compaction(session, request))
        if result is None:
            raise HTTPException(
                409, f"conversation {conversation.id!r} has no messages; nothing to compact"
            )
        lent.give_back()
        if result.summary is None:
            return {
                "compacted": False,
                "reason": result.reason,
                "stats": CompactionStatsOut(**result.stats.as_dict()),
                "reports": list(result.reports),
            }
        return {
            "compacted": True,
            "stats": CompactionStatsOut(**result.stats.as_dict()),
            "summary": message_out(result.summary),
            "reports": list(result.reports),
        }

    @api.get("/conversations/{conversation_id}/recall")
    async def recall(
        lent: LentDep,
        q: Annotated[str, Query(min_length=1, max_length=1000, description="Words to find.")],
        limit: Annotated[int, Query(ge=1, le=limits.max_recall_limit)] = 10,
    ) -> RecallOut:
        """Search every original message, compacted away or not; best first."""
        hits = await lent.session.recall(q, limit)
        lent.give_back()
        return RecallOut(
            query=q,
            hits=[
                RecallHitOut(id=h.id, role=h.role, seq=h.seq, snippet=h.snippet, score=h.score)
                for h in hits
            ],
        )

    @api.get("/conversations/{conversation_id}/events")
    async def events(lent: LentDep) -> EventList:
        """Every committed compaction of the conversation, oldest first."""
        found = await lent.session.events()
        lent.give_back()
        return EventList(events=[event_out(i, e) for i, e in enumerate(found)])

    @api.get(
        "/conversations/{conversation_id}/events/stream",
        response_class=EventSourceResponse,
        responses=_SSE_RESPONSE,
    )
    async def stream_events(
        lent: LentDep,
        since: Annotated[
            int | None,
            Query(ge=0, le=MAX_OFFSET, description="First event index to send (default: new)."),
        ] = None,
        max_events: Annotated[
            int | None, Query(ge=1, le=MAX_OFFSET, description="Close after this many events.")
        ] = None,
        last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> EventSourceResponse:
        """Server-sent events: one `event: compaction` per new compaction, until disconnect."""
        start = _stream_start(since, last_event_id, len(await lent.session.events()))
        lent.give_back()  # the stream reads the store, not the session
        return EventSourceResponse(
            _compactions(lent.service, lent.conversation.stored_id, start, max_events),
            ping=limits.keepalive_seconds,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return api


def _compaction(
    session: AsyncSession, request: CompactRequest
) -> Steps[SessionRequest, CompactionResult | None]:
    """Read the context once (None when it holds no messages) and compact what was read, as a
    check does, in one hop off the loop; the compare-and-set catches a commit since the read."""
    yield from session._ensure_steps()
    snapshot = yield from session._read_context_steps()
    if not snapshot.messages:
        return None
    parts = yield from session._floor_parts_steps()
    return (
        yield from session._compact_steps(
            request.mode, "manual", request.instructions, None, (), snapshot, parts
        )
    )


def _stream_start(since: int | None, last_event_id: str | None, count: int) -> int:
    """Where a stream starts: `since`, else after the client's Last-Event-ID, else new only."""
    if since is not None:
        return since
    if last_event_id is not None and last_event_id.strip().isdigit():
        return int(last_event_id) + 1
    return count


async def _compactions(
    service: Service, stored_id: str, start: int, max_events: int | None
) -> AsyncIterator[ServerSentEvent]:
    """Poll the store's event log (another worker may commit) and send each new event.

    sse-starlette ends this generator when the client goes away and sends the keepalives.
    """
    gauge, poll = service.streams, service.limits.event_poll_seconds
    gauge.open += 1
    gauge.started += 1
    try:
        yield ServerSentEvent(comment="stream open", retry=int(poll * 2000))
        sent, following = 0, start
        while True:
            found = await run_in_threadpool(service.store.events, stored_id)
            for index in range(following, len(found)):
                data = event_out(index, found[index]).model_dump_json()
                yield ServerSentEvent(data=data, event="compaction", id=str(index))
                sent, following = sent + 1, index + 1
                if max_events is not None and sent >= max_events:
                    return
            await anyio.sleep(poll)
    finally:
        gauge.open -= 1
