"""Conversations: create, list, describe."""

import secrets

from fastapi import APIRouter, HTTPException
from starlette.concurrency import run_in_threadpool

from precis.server.deps import Conversation, ConversationDep, Service, ServiceDep, Tenant
from precis.server.keys import unscoped
from precis.server.models import (
    ConversationList,
    ConversationOut,
    ConversationRef,
    CreateConversation,
)

router = APIRouter(tags=["conversations"])


async def describe(service: Service, conversation: Conversation) -> ConversationOut:
    """How much is stored and how much is in context."""
    store = service.store
    session = await service.lend(conversation)
    snapshot = await run_in_threadpool(store.context, conversation.stored_id)
    count = await run_in_threadpool(store.count, conversation.stored_id)
    described = ConversationOut(
        id=conversation.id,
        messages=count,
        in_context=len(snapshot.messages),
        tokens=await session.tokens(),
        context_window=service.settings.context_window,
        version=snapshot.version,
        compacted=snapshot.compacted,
        system_prompt=await session.system_prompt(),
    )
    service.give_back(session)
    return described


@router.post("/conversations", status_code=201)
async def create_conversation(
    body: CreateConversation, service: ServiceDep, tenant: Tenant
) -> ConversationOut:
    """Start a conversation; 409 if the id is taken, so two agents never share one."""
    conversation = Conversation(body.id or f"conv_{secrets.token_hex(8)}", tenant)

    def create() -> None:
        if service.store.exists(conversation.stored_id):
            raise HTTPException(409, f"id: conversation {conversation.id!r} already exists")
        service.store.create(conversation.stored_id, system_prompt=body.system_prompt)

    await run_in_threadpool(create)
    return await describe(service, conversation)


@router.get("/conversations")
async def list_conversations(service: ServiceDep, tenant: Tenant) -> ConversationList:
    """Every conversation id the caller may see."""
    stored = await run_in_threadpool(service.store.conversations)
    ids = [i for i in (unscoped(tenant, s) for s in stored) if i is not None]
    return ConversationList(conversations=[ConversationRef(id=i) for i in ids])


@router.get("/conversations/{conversation_id}")
async def get_conversation(conversation: ConversationDep, service: ServiceDep) -> ConversationOut:
    """How much is stored and how much is in context."""
    return await describe(service, conversation)
