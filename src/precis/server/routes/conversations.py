"""Conversations: create, list, describe."""

import secrets

from fastapi import APIRouter, HTTPException
from starlette.concurrency import run_in_threadpool

from precis.server.deps import ConversationId, Service, ServiceDep
from precis.server.models import (
    ConversationList,
    ConversationOut,
    ConversationRef,
    CreateConversation,
)

router = APIRouter(tags=["conversations"])


async def describe(service: Service, conversation_id: str) -> ConversationOut:
    """How much is stored and how much is in context."""
    store = service.store
    await service.require(conversation_id)
    session = service.session(conversation_id)
    snapshot = await run_in_threadpool(store.context, conversation_id)
    count = await run_in_threadpool(store.count, conversation_id)
    return ConversationOut(
        id=conversation_id,
        messages=count,
        in_context=len(snapshot.messages),
        tokens=await session.tokens(),
        context_window=service.settings.context_window,
        version=snapshot.version,
        compacted=snapshot.compacted,
        system_prompt=await session.system_prompt(),
    )


@router.post("/conversations", status_code=201)
async def create_conversation(body: CreateConversation, service: ServiceDep) -> ConversationOut:
    """Start a conversation; 409 if the id is taken, so two agents never share one."""
    conversation_id = body.id or f"conv_{secrets.token_hex(8)}"

    def create() -> None:
        if service.store.exists(conversation_id):
            raise HTTPException(409, f"id: conversation {conversation_id!r} already exists")
        service.store.create(conversation_id, system_prompt=body.system_prompt)

    await run_in_threadpool(create)
    return await describe(service, conversation_id)


@router.get("/conversations")
async def list_conversations(service: ServiceDep) -> ConversationList:
    """Every conversation id in the store."""
    ids = await run_in_threadpool(service.store.conversations)
    return ConversationList(conversations=[ConversationRef(id=i) for i in ids])


@router.get("/conversations/{conversation_id}")
async def get_conversation(conversation_id: ConversationId, service: ServiceDep) -> ConversationOut:
    """How much is stored and how much is in context."""
    return await describe(service, conversation_id)
