"""Messages: append, the context, the prompt to send, the whole history."""

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query
from starlette.concurrency import run_in_threadpool

from precis.core.errors import InvalidMessage
from precis.server.convert import check_sizes, from_anthropic, from_openai, message_out
from precis.server.deps import ConversationDep, LentDep, ServiceDep
from precis.server.limits import ServiceLimits
from precis.server.models import AppendedOut, AppendMessages, ContextOut, HistoryOut, PromptOut
from precis.stores.base import MAX_IDEMPOTENCY_KEY_CHARS

# Largest offset a query may name; beyond it SQLite's integers would overflow.
MAX_OFFSET = 1_000_000_000
_log = logging.getLogger("precis.server")


def router(limits: ServiceLimits) -> APIRouter:
    """The message routes, with the service's size limits in their schema."""
    api = APIRouter(tags=["messages"])

    @api.post(
        "/conversations/{conversation_id}/messages",
        status_code=201,
        response_model=AppendedOut,
        response_model_exclude_unset=True,
    )
    async def append_messages(
        body: AppendMessages,
        lent: LentDep,
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                pattern=r"^[!-~]+$",  # visible ASCII, as a UUID or a random token is
                max_length=MAX_IDEMPOTENCY_KEY_CHARS,
                description="Send the same key again to retry safely: stored once, same answer.",
            ),
        ] = None,
    ) -> Any:
        """Append in one transaction: all the messages or, on any error, none. An answer other
        than 201 means nothing was stored; a retry with the same Idempotency-Key is stored once
        and answered with the messages the first stored."""
        service, conversation, session = lent.service, lent.conversation, lent.session
        if len(body.messages) > limits.max_messages_per_append:
            raise HTTPException(
                413,
                f"messages: {len(body.messages)} messages, over the limit of "
                f"{limits.max_messages_per_append} per request",
            )
        if body.format == "anthropic":
            known = {tc.id for m in await session.context() for tc in m.tool_calls}
            messages, origin = from_anthropic(body.messages, known)
        else:
            messages = from_openai(body.messages)
            origin = list(range(len(messages)))
        check_sizes(messages, origin, limits.max_message_chars)
        try:
            appended, tokens = await service.append(
                session, messages, idempotency_key, conversation.id
            )
        except InvalidMessage as exc:
            raise exc.at(origin[exc.index] if exc.index is not None else None) from None
        stored = [message_out(m) for m in appended]
        try:
            if tokens is None:  # no check ran, or it failed: counted apart
                tokens = await session.tokens()
        except Exception:  # stored all the same: the answer must say so, not fail
            _log.warning("%s: tokens after an append", session.conversation_id, exc_info=True)
            tokens = None
        lent.give_back()
        return {"messages": stored, "tokens": tokens}

    @api.get(
        "/conversations/{conversation_id}/context",
        response_model=ContextOut,
        response_model_exclude_unset=True,
    )
    async def get_context(lent: LentDep) -> Any:
        """The in-context messages in stored order, with the token count the next call carries."""
        service, conversation, session = lent.service, lent.conversation, lent.session
        snapshot = await run_in_threadpool(service.store.context, conversation.stored_id)
        settings = service.settings
        tokens = await session.tokens()
        lent.give_back()
        return {
            "conversation_id": conversation.id,
            "version": snapshot.version,
            "compacted": snapshot.compacted,
            "tokens": tokens,
            "context_window": settings.context_window,
            "threshold": settings.threshold,
            "messages": [message_out(m) for m in snapshot.messages],
        }

    @api.get("/conversations/{conversation_id}/prompt")
    async def get_prompt(lent: LentDep) -> PromptOut:
        """What to send next, OpenAI format: system prompt, pinned, summary, kept messages."""
        session = lent.session
        prompt = PromptOut(messages=await session.prompt(), tokens=await session.tokens())
        lent.give_back()
        return prompt

    @api.get(
        "/conversations/{conversation_id}/history",
        response_model=HistoryOut,
        response_model_exclude_unset=True,
    )
    async def history(
        conversation: ConversationDep,
        service: ServiceDep,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
        limit: Annotated[int, Query(ge=1, le=limits.max_history_page)] = 100,
    ) -> Any:
        """A page of every message ever appended, summaries included, oldest first."""
        store, stored_id = service.store, conversation.stored_id
        await service.require(conversation)
        page = await run_in_threadpool(store.history, stored_id, offset=offset, limit=limit)
        total = await run_in_threadpool(store.count, stored_id)
        return {"total": total, "offset": offset, "messages": [message_out(m) for m in page]}

    return api
