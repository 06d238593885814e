"""What the inspector's pages show, read from the store in one blocking call per page.

Each function runs in a worker thread (the routes call them through `run_in_threadpool`) and
returns plain values for a template. Nothing here writes: a page never recompiles a system
prompt or records anything.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from precis.charts import CONVENTION, fullness_bar, what_it_did
from precis.charts.composition import MAX_POINTS, marker_dict, series_data, settings_of
from precis.core.errors import ConversationNotFound, UnknownMessage
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.engine.audit import audit_of
from precis.engine.composition import kind_of
from precis.facts.model import Ledger
from precis.server.deps import Conversation, Service
from precis.server.keys import unscoped
from precis.stores.base import CompactionEvent
from precis.stores.samples import PARTS, Sample
from precis.stores.series import SeriesReads, series_of

# Characters and lines of a message a row shows before "show all".
PREVIEW_CHARS = 280
PREVIEW_LINES = 6
# Messages per history page, and conversations per page of the list.
HISTORY_PAGE = 50
CONVERSATIONS_PAGE = 50
RECALL_HITS = 20
# Samples a page reads for its charts: as many as the widest one draws (composition_chart).
DRAWN_POINTS = 960 * 2 // 3
# Compactions the conversation page lists (the latest), and per page of the full list.
LATEST_COMPACTIONS = 10
COMPACTIONS_PAGE = 50
# A part of the window is shown in amber from this share of the threshold on, red above it.
WARN_SHARE = 0.8

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


def conversation_rows(
    service: Service, tenant: str | None, after: int = 0
) -> tuple[list[ConversationRow], int]:
    """CONVERSATIONS_PAGE of the tenant's conversations from the `after`-th on, and how many it
    has in all."""
    store = service.store
    ids = [i for i in (unscoped(tenant, s) for s in store.conversations()) if i is not None]
    rows: list[ConversationRow] = []
    for conversation_id in ids[after : after + CONVERSATIONS_PAGE]:
        stored = Conversation(conversation_id, tenant).stored_id
        try:
            latest = store.latest_sample(stored)
            row = ConversationRow(
                conversation_id,
                store.count(stored),
                series_of(store).compaction_count(stored),
                latest,
                fullness_bar(latest),
            )
        except ConversationNotFound:
            continue
        rows.append(row)
    return rows, len(ids)


def chart_payload(
    service: Service,
    stored_id: str,
    *,
    most: int = MAX_POINTS,
    stats: bool = False,
    bins: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The JSON behind the chart: samples (thinned past `most` by the store), a marker per
    compaction (with what stood in for a failed summarizer when `stats`), how many compactions,
    and the conversation's own window and watermarks. Given `bins` (what a page draws), the
    markers come counted per stretch of turns instead (`marker_bins`, one list per number of
    stretches), and `markers` is empty. Reads what it shows, not every row."""
    reads = series_of(service.store)
    turns, shown = reads.thinned_samples(stored_id, most)
    if bins is None:
        rows = reads.marker_rows(stored_id, stats=stats)
        count = len(rows)
    else:
        rows, count = [], reads.compaction_count(stored_id)
    payload = series_data(turns, shown, rows, _own_settings(service, reads, stored_id, count))
    payload["compactions"] = count
    if bins is not None:
        payload["marker_bins"] = {n: reads.marker_bins(stored_id, n) for n in bins}
    return payload


def _own_settings(
    service: Service, reads: SeriesReads, stored_id: str, count: int
) -> tuple[int | None, int | None, int | None]:
    """The conversation's window and watermarks, from its latest sample and latest event."""
    last = reads.marker_rows(stored_id, offset=count - 1, limit=1, stats=True) if count else []
    stats = last[0].stats if last and last[0].stats else {}
    return settings_of(service.store.latest_sample(stored_id), stats)


def latest_markers(service: Service, stored_id: str, count: int) -> list[dict[str, Any]]:
    """The newest LATEST_COMPACTIONS of `count` markers, newest first, read with their stats."""
    start = max(0, count - LATEST_COMPACTIONS)
    rows = series_of(service.store).marker_rows(stored_id, offset=start, stats=True)
    return [marker_dict(row) for row in rows][::-1]


def stream_cursor(service: Service, stored_id: str) -> tuple[int, int]:
    """Where the conversation is: its latest turn and how many compactions it has (two reads
    of an index, whatever its length)."""
    latest = service.store.latest_sample(stored_id)
    turn = latest.turn if latest is not None else 0
    return turn, series_of(service.store).compaction_count(stored_id)


def stream_since(
    service: Service, stored_id: str, turn: int, events: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The samples after `turn` and the markers from event `events` on, as the chart's JSON:
    what a live page has not seen (reads of those rows only)."""
    samples = service.store.samples(stored_id, since=turn)
    rows = series_of(service.store).marker_rows(stored_id, offset=events, stats=True)
    newest = max((row.turn for row in rows), default=turn)
    if newest > (samples[-1].turn if samples else turn):
        # A compaction committed between the two reads: its sample (written with it) is there
        # now; a later turn's waits for its own marker, so no turn is sent before its marker.
        samples = [s for s in service.store.samples(stored_id, since=turn) if s.turn <= newest]
    return [s.as_dict() for s in samples], [marker_dict(row) for row in rows]


@dataclass(frozen=True, slots=True)
class PartRow:
    """One line of the window's table: a part, its tokens, its share of the window."""

    label: str
    tokens: int
    share: float | None
    level: str


@dataclass(frozen=True, slots=True)
class ContextNow:
    system_prompt: str
    system_tokens: int
    rows: list[MessageRow]
    total: int
    window: int | None
    threshold: int | None
    parts: list[PartRow]
    level: str
    convention: str = CONVENTION


def _level(tokens: int, window: int | None, threshold: int | None) -> str:
    """ok, warn (near the threshold) or over (past it), for the table's colours."""
    limit = threshold or window
    if not limit:
        return "ok"
    if tokens > limit:
        return "over"
    return "warn" if tokens >= WARN_SHARE * limit else "ok"


def context_now(
    service: Service, conversation: Conversation, chart: dict[str, Any] | None = None
) -> ContextNow:
    """The context as the model sees it: system prompt, then pinned items, then the rest; the
    figures are the latest sample's, at the conversation's own window (as the chart counts,
    whose data `chart` is, when the page has read it already)."""
    session = service.session(conversation)
    stored = conversation.stored_id
    snapshot = service.store.context(stored)
    prompt, _ = service.store.system_prompt(stored)
    shown = session.view_of(snapshot.messages, session.floor_of(prompt))
    ordered = [m for m in shown if m.pinned] + [m for m in shown if not m.pinned]
    counter = session.counter
    rows = [message_row(m, counter.count(m)) for m in ordered]
    latest = service.store.latest_sample(stored)
    if chart is None:
        reads = series_of(service.store)
        count = reads.compaction_count(stored)
        window, threshold, _ = _own_settings(service, reads, stored, count)
    else:
        window, threshold = chart["window"], chart["threshold"]
    system_tokens = latest.system if latest else (counter.count_text(prompt) if prompt else 0)
    total = latest.total if latest else system_tokens + sum(r.tokens for r in rows)
    parts: list[PartRow] = []
    if latest is not None:
        figures = [(PART_TITLES[name], latest.part(name)) for name in PARTS]
        if window:
            figures += [("reserved", latest.reserved_shown), ("free", latest.free)]
        for label, tokens in figures:
            share = tokens / window if window else None
            parts.append(PartRow(label, tokens, share, "ok"))
    return ContextNow(
        prompt,
        system_tokens,
        rows,
        total,
        window,
        threshold,
        parts,
        _level(total, window, threshold),
    )


PART_TITLES = {
    "system": "system prompt",
    "tools": "tool definitions",
    "pinned": "pinned and task",
    "summary": "summary",
    "messages": "messages",
    "tool_outputs": "tool outputs",
}


@dataclass(frozen=True, slots=True)
class Fact:
    kind: str
    text: str
    source_id: str


@dataclass(frozen=True, slots=True)
class KeptLine:
    """A line the compaction had to keep word for word, and where it lives now."""

    text: str
    where: str


@dataclass(frozen=True, slots=True)
class CompactionDetail:
    number: int
    of: int
    event: CompactionEvent
    summary: MessageRow | None
    audit: dict[str, Any]
    originals: list[MessageRow]
    missing: int
    count: int
    what: str
    tokens: tuple[int | None, int | None]
    window: int | None
    ledger: list[Fact]
    kept: list[KeptLine]
    tail: list[MessageRow] | None
    diff: list[tuple[str, str]]
    convention: str = CONVENTION


def compaction_detail(service: Service, stored_id: str, index: int) -> CompactionDetail | None:
    """One compaction: its event, summary, ledger, audit, the originals it summarized, where
    each line it kept lives, and its summary against the one before."""
    store = service.store
    reads = series_of(store)
    if index < 0:
        return None
    near = reads.marker_rows(
        stored_id, offset=max(0, index - 1), limit=2 if index else 1, stats=True
    )
    rows = [r for r in near if r.event == index]
    if not rows:
        return None
    (marker,) = rows
    previous_id = near[0].summary_id if index else ""
    event = CompactionEvent(
        marker.trigger, marker.mode, marker.stats or {}, marker.summary_id, marker.at
    )
    total = reads.compaction_count(stored_id)
    counter = service.counter_factory()
    summary: MessageRow | None = None
    audit = audit_of(Message(role="user", content=""))
    ledger: list[Fact] = []
    stored_summary: Message | None = None
    try:
        (stored_summary,) = store.get(stored_id, [event.summary_id])
    except UnknownMessage:
        pass
    else:
        summary = message_row(stored_summary, counter.count(stored_summary))
        audit = audit_of(stored_summary)
        ledger = [
            Fact(f.kind, f.text, f.source_id)
            for f in Ledger.from_json(stored_summary.metadata.get("ledger")).facts
        ]
    ids = [str(i) for i in audit["summarized"].get("ids", [])]
    try:
        found = store.get(stored_id, ids)
    except UnknownMessage:
        found = [m for i in ids for m in _one(service, stored_id, i)]
    count = audit["summarized"].get("count")
    count = int(count) if isinstance(count, int) else int(event.stats.get("summarized", 0) or 0)
    originals = [message_row(m, counter.count(m)) for m in found]
    window = event.stats.get("context_window")
    verbatim = audit.get("verification", {}).get("verbatim_kept", [])
    pinned = [m.content for m in store.context(stored_id).messages if m.pinned]
    kept = [KeptLine(line, _where(line, summary, pinned)) for line in verbatim]
    previous = _summary_text(service, stored_id, previous_id) if index else ""
    tail_ids = audit.get("kept")
    tail = None
    if isinstance(tail_ids, list):
        tail_found = [m for i in tail_ids for m in _one(service, stored_id, str(i))]
        tail = [message_row(m, counter.count(m)) for m in tail_found]
    return CompactionDetail(
        index + 1,
        total,
        event,
        summary,
        audit,
        originals,
        max(0, count - len(found)),
        count,
        what_it_did(event.mode),
        (marker.before, marker.after),
        window if isinstance(window, int) else None,
        ledger,
        kept,
        tail,
        _diff(previous, summary.text if summary else "") if index else [],
    )


def _where(line: str, summary: MessageRow | None, pinned: list[str]) -> str:
    if summary is not None and line in summary.text:
        return "in the summary"
    if any(line in text for text in pinned):
        return "in a pinned message"
    return "in the kept messages"


def _summary_text(service: Service, stored_id: str, summary_id: str) -> str:
    found = _one(service, stored_id, summary_id)
    if not found:
        return ""
    return message_row(found[0], 0).text


def _diff(before: str, after: str) -> list[tuple[str, str]]:
    """The summary's lines against the previous summary's: ('+'|'-'|' ', line), changes with
    a line of context around them."""
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), n=1, lineterm="")
    return [
        (line[0], line[1:])
        for line in lines
        if line[:1] in "+- " and line[:3] not in ("+++", "---")
    ]


def compaction_page(
    service: Service, stored_id: str, after: int
) -> tuple[list[dict[str, Any]], int]:
    """COMPACTIONS_PAGE markers from event `after` on, and how many compactions there are."""
    reads = series_of(service.store)
    rows = reads.marker_rows(stored_id, offset=after, limit=COMPACTIONS_PAGE, stats=True)
    return [marker_dict(row) for row in rows], reads.compaction_count(stored_id)


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


@dataclass(frozen=True, slots=True)
class Hit:
    """One recall hit as the page shows it: a summary labelled so, its text without the JSON
    wrapper, the query's terms marked (the template escapes every piece)."""

    id: str
    seq: int
    label: str
    summary: bool
    in_context: bool
    score: float
    pieces: list[tuple[str, bool]]


def _pieces(text: str, terms: list[str]) -> list[tuple[str, bool]]:
    if not terms:
        return [(text, False)]
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    out: list[tuple[str, bool]] = []
    at = 0
    for match in pattern.finditer(text):
        out += [(text[at : match.start()], False), (match.group(), True)]
        at = match.end()
    return [*out, (text[at:], False)]


def _snippet(text: str, terms: list[str], width: int = 240) -> str:
    """About `width` characters of `text` around its first match."""
    lowered = text.lower()
    first = min((i for i in (lowered.find(t.lower()) for t in terms) if i >= 0), default=0)
    start = max(0, first - width // 3)
    cut = text[start : start + width]
    return ("…" if start else "") + cut + ("…" if start + width < len(text) else "")


def recall(
    service: Service, stored_id: str, query: str, originals_only: bool = False
) -> tuple[list[Hit], bool]:
    """Up to RECALL_HITS messages matching the query (originals only, if asked), and whether
    more matched than are shown."""
    if not query.strip():
        return [], False
    store = service.store
    asked = RECALL_HITS * 3 if originals_only else RECALL_HITS + 1
    found = store.recall(stored_id, query, asked)
    in_context = {m.id for m in store.context(stored_id).messages}
    messages = {m.id: m for m in store.get(stored_id, [h.id for h in found])} if found else {}
    terms = [t for t in re.findall(r"\w+", query) if len(t) > 1][:20]
    hits: list[Hit] = []
    for hit in found:
        message = messages.get(hit.id)
        summary = message is not None and message.kind in (KIND_SUMMARY, KIND_MARKER)
        if summary and originals_only:
            continue
        text = message_row(message, 0).text if message is not None else hit.snippet
        label = (
            what_it_did(message.metadata.get("stats", {}).get("mode", ""))
            if summary and message
            else hit.role
        )
        hits.append(
            Hit(
                hit.id,
                hit.seq,
                label,
                summary,
                hit.id in in_context,
                hit.score,
                _pieces(_snippet(text, terms), terms),
            )
        )
    hits.sort(key=lambda h: h.summary)  # originals first, each kind best first
    return hits[:RECALL_HITS], len(hits) > RECALL_HITS or len(found) >= asked
