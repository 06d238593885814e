"""What the inspector's pages show, read from the store in one blocking call per page.

Each function runs in a worker thread (the routes call them through `run_in_threadpool`) and
returns plain values for a template. Nothing here writes: a page never recompiles a system
prompt or records anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from precis.charts import chart_data, fullness_bar
from precis.core.errors import ConversationNotFound, UnknownMessage
from precis.core.messages import Message
from precis.engine.audit import audit_of
from precis.engine.composition import kind_of
from precis.server.deps import Conversation, Service
from precis.server.keys import unscoped
from precis.stores.base import CompactionEvent, RecallHit
from precis.stores.samples import Sample

# Characters and lines of a message a row shows before "show all".
PREVIEW_CHARS = 280
PREVIEW_LINES = 6
# Messages per history page, and the most conversations the list reads.
HISTORY_PAGE = 50
MAX_LISTED = 500
RECALL_HITS = 20

PART_LABELS = {
    "pinned": "pinned",
    "summary": "summary",
    "tool_outputs": "tool output",
    "messages": "message",
}


@dataclass(frozen=True, slots=True)
class ConversationRow:
    id: str
    messages: int
    compactions: int
    latest: Sample | None
    bar: str


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One message as a page shows it: who, what kind, how many tokens, and its text."""

    id: str
    role: str
    kind: str
    part: str
    tokens: int
    pinned: bool
    preview: str
    text: str
    seq: int | None = None

    @property
    def long(self) -> bool:
        return len(self.preview) < len(self.text.rstrip())


def message_row(message: Message, tokens: int, seq: int | None = None) -> MessageRow:
    text = message.content
    if message.tool_calls:
        calls = "\n".join(f"→ {tc.name}({tc.arguments})" for tc in message.tool_calls)
        text = f"{text}\n{calls}" if text else calls
    if message.kind == "summary" and isinstance(message.metadata.get("summary"), str):
        text = message.metadata["summary"]
    preview = "\n".join(text[:PREVIEW_CHARS].splitlines()[:PREVIEW_LINES])
    return MessageRow(
        id=message.id,
        role=message.role,
        kind="task" if message.metadata.get("task") else message.kind,
        part=PART_LABELS[kind_of(message)],
        tokens=tokens,
        pinned=message.pinned,
        preview=preview,
        text=text,
        seq=seq,
    )


def conversation_rows(service: Service, tenant: str | None) -> tuple[list[ConversationRow], int]:
    """The tenant's conversations (the first MAX_LISTED) and how many it has in all."""
    store = service.store
    ids = [i for i in (unscoped(tenant, s) for s in store.conversations()) if i is not None]
    rows: list[ConversationRow] = []
    for conversation_id in ids[:MAX_LISTED]:
        stored = Conversation(conversation_id, tenant).stored_id
        try:
            latest = store.latest_sample(stored)
            row = ConversationRow(
                conversation_id,
                store.count(stored),
                len(store.events(stored)),
                latest,
                fullness_bar(latest),
            )
        except ConversationNotFound:
            continue
        rows.append(row)
    return rows, len(ids)


def chart_payload(service: Service, stored_id: str) -> dict[str, Any]:
    """The JSON behind the chart: a sample per turn, a marker per compaction."""
    samples = service.store.samples(stored_id)
    events = service.store.events(stored_id)
    return chart_data(samples, events, threshold=service.settings.threshold)


@dataclass(frozen=True, slots=True)
class ContextNow:
    system_prompt: str
    system_tokens: int
    rows: list[MessageRow]
    total: int
    window: int | None


def context_now(service: Service, conversation: Conversation) -> ContextNow:
    """The context as the model sees it: system prompt, then pinned items, then the rest."""
    session = service.session(conversation)
    stored = conversation.stored_id
    snapshot = service.store.context(stored)
    prompt, _ = service.store.system_prompt(stored)
    shown = session.view_of(snapshot.messages, session.floor_of(prompt))
    ordered = [m for m in shown if m.pinned] + [m for m in shown if not m.pinned]
    counter = session.counter
    rows = [message_row(m, counter.count(m)) for m in ordered]
    system_tokens = counter.count_text(prompt) if prompt else 0
    return ContextNow(
        prompt,
        system_tokens,
        rows,
        system_tokens + sum(r.tokens for r in rows),
        service.settings.context_window,
    )


@dataclass(frozen=True, slots=True)
class CompactionDetail:
    number: int
    event: CompactionEvent
    summary: MessageRow | None
    audit: dict[str, Any]
    originals: list[MessageRow]
    missing: int
    count: int


def compaction_detail(service: Service, stored_id: str, index: int) -> CompactionDetail | None:
    """One compaction: its event, summary, audit and the originals it summarized."""
    store = service.store
    events = store.events(stored_id)
    if not 0 <= index < len(events):
        return None
    event = events[index]
    counter = service.counter_factory()
    summary: MessageRow | None = None
    audit = audit_of(Message(role="user", content=""))
    try:
        (message,) = store.get(stored_id, [event.summary_id])
    except UnknownMessage:
        pass
    else:
        summary = message_row(message, counter.count(message))
        audit = audit_of(message)
    ids = [str(i) for i in audit["summarized"].get("ids", [])]
    try:
        found = store.get(stored_id, ids)
    except UnknownMessage:
        found = [m for i in ids for m in _one(service, stored_id, i)]
    count = audit["summarized"].get("count")
    count = int(count) if isinstance(count, int) else int(event.stats.get("summarized", 0) or 0)
    originals = [message_row(m, counter.count(m)) for m in found]
    return CompactionDetail(
        index + 1, event, summary, audit, originals, max(0, count - len(found)), count
    )


def _one(service: Service, stored_id: str, message_id: str) -> list[Message]:
    try:
        return service.store.get(stored_id, [message_id])
    except UnknownMessage:
        return []


def history_page(service: Service, stored_id: str, after: int) -> tuple[list[MessageRow], int]:
    """HISTORY_PAGE originals after seq `after`, and how many the log holds."""
    store = service.store
    total = store.count(stored_id)
    counter = service.counter_factory()
    page = store.history(stored_id, offset=after, limit=HISTORY_PAGE)
    rows = [message_row(m, counter.count(m), seq=after + i + 1) for i, m in enumerate(page)]
    return rows, total


def one_message(service: Service, stored_id: str, message_id: str) -> MessageRow | None:
    found = _one(service, stored_id, message_id)
    if not found:
        return None
    counter = service.counter_factory()
    in_context = {m.id for m in service.store.context(stored_id).messages}
    row = message_row(found[0], counter.count(found[0]))
    return row if row.id in in_context else _evicted(row)


def _evicted(row: MessageRow) -> MessageRow:
    return MessageRow(
        row.id, row.role, row.kind, "compacted away", row.tokens, row.pinned, row.preview, row.text
    )


def recall(service: Service, stored_id: str, query: str) -> tuple[list[RecallHit], set[str]]:
    """Up to RECALL_HITS originals matching the query, and which messages are in context now."""
    if not query.strip():
        return [], set()
    hits = service.store.recall(stored_id, query, RECALL_HITS)
    return hits, {m.id for m in service.store.context(stored_id).messages}
