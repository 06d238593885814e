"""What a route depends on: the service, the caller's key, and a session on an existing
conversation — as FastAPI dependencies, so routes stay a few lines each."""

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from precis.core.errors import ConversationNotFound
from precis.core.messages import Message
from precis.core.steps import Steps
from precis.core.tokens import TokenCounter
from precis.core.types import CONVERSATION_ID_PATTERN
from precis.engine.settings import CompactionSettings
from precis.server.changes import Changes
from precis.server.keys import ApiKeys, scoped
from precis.server.limits import ServiceLimits
from precis.session import AsyncSession, ThreadedSession
from precis.session._io import SessionRequest
from precis.stores.base import ConversationStore
from precis.summarize.base import Summarizer

API_KEY_HINT = "Authorization: Bearer <PRECIS_API_KEY>"
_log = logging.getLogger("precis.server")

SummarizerFactory = Callable[[], Summarizer]
CounterFactory = Callable[[], TokenCounter]


@dataclass(slots=True)
class StreamGauge:
    """How many event streams are open (and were ever opened), so disconnects can be seen."""

    open: int = 0
    started: int = 0


class IdleSessions:
    """Sessions between requests, one per conversation at most, the least recently used let go
    first: a conversation's next request finds what its last one read (the memo of each
    message's facts and folded text), and a worker holds at most `size` of them, however many
    conversations it has served. A session is lent to one request at a time (`take` removes
    it), so two requests on one conversation never share one."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: OrderedDict[str, AsyncSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._idle)

    def take(self, key: str) -> AsyncSession | None:
        """The idle session of this conversation, now the caller's alone; None if none is."""
        return self._idle.pop(key, None)

    def give(self, session: AsyncSession) -> None:
        """Keep `session` for its conversation's next request (a newer one already kept
        stays); past `size`, the least recently used goes, and its memo with it."""
        key = session.conversation_id
        if self.size < 1 or key in self._idle:
            return
        self._idle[key] = session
        while len(self._idle) > self.size:
            self._idle.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation as its caller names it (`id`) and as the store holds it (`stored_id`)."""

    id: str
    tenant: str | None

    @property
    def stored_id(self) -> str:
        return scoped(self.tenant, self.id)


@dataclass(frozen=True, slots=True)
class Service:
    """Everything the routes share; one per app, nothing global."""

    store: ConversationStore
    settings: CompactionSettings
    summarizer_factory: SummarizerFactory
    counter_factory: CounterFactory
    limits: ServiceLimits
    keys: ApiKeys
    streams: StreamGauge = field(default_factory=StreamGauge)
    changes: Changes = field(default_factory=Changes)
    # The sessions whose compaction runs behind the requests, by stored conversation id: one
    # each in this worker, let go when it ends (`aclose` waits for the rest at shutdown).
    behind: dict[str, AsyncSession] = field(default_factory=dict)
    idle: IdleSessions = field(default_factory=lambda: IdleSessions(0))

    def session(self, conversation: Conversation) -> AsyncSession:
        """A fresh session (routes borrow one through `lend`); its work runs on a worker
        thread, so one tenant's compaction never stalls the loop."""
        return ThreadedSession(
            self.store,
            conversation.stored_id,
            self.counter_factory(),
            self.summarizer_factory(),
            self.settings,
        )

    async def lend(self, conversation: Conversation) -> AsyncSession:
        """The conversation's idle session if one is kept (it exists then: conversations are
        never deleted), else a fresh one once the store says the conversation exists."""
        session = self.idle.take(conversation.stored_id)
        if session is not None:
            return session
        await self.require(conversation)
        return self.session(conversation)

    def give_back(self, session: AsyncSession) -> None:
        """A request is done with `session`: kept idle for the next, unless a compaction runs
        behind on it (`_let_go` gives it back when that ends)."""
        if session.behind is not None and session.behind.running:
            return
        self.idle.give(session)

    async def append(
        self,
        session: AsyncSession,
        messages: Sequence[Message],
        idempotency_key: str | None,
        name: str,
    ) -> tuple[list[Message], int | None]:
        """Append, then check for a compaction behind the request (`compact_behind`): in one hop
        off the loop when this request's session is the one that would run it. The tokens the
        context carries come with the stored messages (None when no check counted them)."""
        key = session.conversation_id
        if not self.settings.background_compaction or self.behind.get(key, session) is not session:
            appended = await session.append(*messages, idempotency_key=idempotency_key)
            return appended, await self.compact_behind(session, name)
        assert session.behind is not None
        before = session.behind.task
        appended, tokens = await session._drive(_checked_append(session, messages, idempotency_key))
        self._follow(key, name, session, before)
        return appended, tokens

    async def compact_behind(self, session: AsyncSession, name: str) -> int | None:
        """After an append: start the compaction due behind the request, or (over the hard
        watermark) wait for the one running; a failure is logged, the append stands. When it
        ends, the inspector's streams on `name` (the caller's id) are woken. The tokens the
        context carries, as the check counted them (None when none ran, or it failed)."""
        if not self.settings.background_compaction:
            return None
        key = session.conversation_id
        # The session whose compaction runs (its check waits for it only over the hard
        # watermark), or this request's.
        target = self.behind.get(key, session)
        assert target.behind is not None
        before = target.behind.task
        try:
            _, tokens = await target.maybe_compact_counted()
        except Exception:
            _log.warning("%s: no compaction after an append", key, exc_info=True)
            return None
        self._follow(key, name, target, before)
        return tokens

    def _follow(self, key: str, name: str, target: AsyncSession, before: object) -> None:
        """A compaction the check started behind: kept by conversation until it ends."""
        assert target.behind is not None
        task = target.behind.task
        if task is not None and task is not before and not task.done():
            self.behind[key] = target
            task.add_done_callback(lambda done: self._let_go(key, name, target, done))

    def _let_go(self, key: str, name: str, session: AsyncSession, task: object) -> None:
        """A compaction behind ended: wake the streams on it, and forget its session unless it
        started another."""
        self.changes.signal(name)
        if self.behind.get(key) is session and session.behind and session.behind.task is task:
            del self.behind[key]
            self.give_back(session)

    async def aclose(self) -> None:
        """Wait for every compaction running behind the requests (at shutdown)."""
        for session in list(self.behind.values()):
            await session.aclose()

    async def require(self, conversation: Conversation) -> None:
        """Refuse a conversation the store does not hold (a session would create it)."""
        if not await run_in_threadpool(self.store.exists, conversation.stored_id):
            raise ConversationNotFound(conversation.id)


def _checked_append(
    session: AsyncSession, messages: Sequence[Message], idempotency_key: str | None
) -> Steps[SessionRequest, tuple[list[Message], int | None]]:
    """The append's steps, then the check's (a compaction due starts behind): a failed check is
    logged and the append stands, its tokens unknown."""
    appended, read = yield from session._append_read_steps(messages, idempotency_key)
    try:
        _, tokens = yield from session._counted_compact_steps(read=read)
    except Exception:
        _log.warning("%s: no compaction after an append", session.conversation_id, exc_info=True)
        return appended, None
    return appended, tokens


def service_of(request: Request) -> Service:
    """The app's service, read where a dependency already has the request (no node of its own:
    FastAPI solves each dependency's whole subtree again wherever it appears)."""
    service = request.app.state.service
    assert isinstance(service, Service)
    return service


async def get_service(request: Request) -> Service:
    """The app's service. Async, as every dependency here: FastAPI runs a plain `def` one on a
    worker thread, a hop per request for a lookup."""
    return service_of(request)


ServiceDep = Annotated[Service, Depends(get_service)]
ConversationId = Annotated[
    str, Path(description="The conversation's id.", pattern=CONVERSATION_ID_PATTERN)
]

_bearer = HTTPBearer(auto_error=False, description=f"Send `{API_KEY_HINT}`.")


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def require_key(request: Request, credentials: Credentials) -> str | None:
    """The caller's tenant; callers without a configured key are refused."""
    return tenant_of(service_of(request), credentials)


def tenant_of(service: Service, credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The tenant `credentials` name, or a 401 (None: the service has no keys)."""
    if not service.keys:
        return None
    known, tenant = service.keys.tenant(credentials.credentials if credentials else "")
    if not known:
        raise HTTPException(
            401,
            f"missing or wrong bearer token; send {API_KEY_HINT}",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return tenant


Tenant = Annotated[str | None, Depends(require_key)]


async def conversation(conversation_id: ConversationId, tenant: Tenant) -> Conversation:
    return Conversation(conversation_id, tenant)


ConversationDep = Annotated[Conversation, Depends(conversation)]


@dataclass(frozen=True, slots=True)
class Lent:
    """What a route on an existing conversation works with: the service, the conversation and
    its session, lent for the request. The route gives it back (`give_back`) when it has
    succeeded; after a failure it is let go, and a fresh one reads the store again."""

    service: Service
    conversation: Conversation
    session: AsyncSession

    def give_back(self) -> None:
        self.service.give_back(self.session)


async def lent_session(
    conversation_id: ConversationId, credentials: Credentials, request: Request
) -> Lent:
    """The conversation's session for one request, the route's to give back, after the key's
    check. One plain dependency over the bearer scheme's: FastAPI solves a dependency's subtree
    again at each place it is named, and each level costs its own (with the key's check made
    here, not as a level between, an append's dependencies took 11-19 % less time to solve under
    cProfile), and a `yield` dependency costs it an exit stack and a cancel scope."""
    service = service_of(request)
    conversation = Conversation(conversation_id, tenant_of(service, credentials))
    return Lent(service, conversation, await service.lend(conversation))


LentDep = Annotated[Lent, Depends(lent_session)]
