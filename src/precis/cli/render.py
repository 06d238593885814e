"""What the commands print: compaction lines, message tables or JSON, recall hits, settings."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from precis.cli.loading import LoadedSettings
    from precis.core.messages import Message
    from precis.engine.results import CompactionStats
    from precis.session import Session
    from precis.stores.base import CompactionEvent

# Characters of message text shown per row in the context and history tables.
PREVIEW_CHARS = 70
# What stood in for a summarizer that failed, in words.
FALLBACK_WORDS = {
    "extractive": "the extractive brief stood in",
    "truncation": "the oldest messages were dropped instead",
}


def console() -> Console:
    """A rich console, 140 columns wide when the output is not a terminal (a pipe, a test)."""
    from rich.console import Console

    return Console(width=140 if not sys.stdout.isatty() else None)


def compaction_line(stats: CompactionStats) -> str:
    """The line each compaction prints, so a person sees when and how much the context shrank,
    and, when the summarizer failed, why and what stood in for it."""
    line = (
        f"⇣ compacted ({stats.trigger}): {stats.messages_count_before} → "
        f"{stats.messages_count_after} messages, ~{stats.context_tokens_before} → "
        f"~{stats.context_tokens_after} tokens"
    )
    if stats.fallback is not None:
        line += f"; {fallback_text(stats.fallback, stats.fallback_reason)}"
    return line


def fallback_text(fallback: object, reason: object) -> str:
    """What a compaction's stats say of its fallback, in words: the summarizer failed (why),
    and what stood in."""
    words = FALLBACK_WORDS.get(str(fallback), f"fallback: {fallback}")
    return f"the summarizer failed ({reason}): {words}"


def report_compaction(stats: CompactionStats) -> None:
    """Print the compaction line on stderr, apart from the replies on stdout."""
    print(compaction_line(stats), file=sys.stderr, flush=True)


def message_json(message: Message, session: Session) -> dict[str, Any]:
    """A message as scripts want it: OpenAI format plus id, kind, pinned and tokens."""
    return {
        **message.to_openai(),
        "id": message.id,
        "kind": message.kind,
        "pinned": message.pinned,
        "tokens": session.counter.count(message),
    }


def _preview(message: Message) -> str:
    from precis.core.messages import KIND_SUMMARY

    raw = message.metadata.get("summary")
    text = raw if message.kind == KIND_SUMMARY and isinstance(raw, str) else message.content
    if message.tool_calls:
        text += " -> " + ", ".join(tc.name for tc in message.tool_calls)
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def print_messages(messages: list[Message], session: Session, title: str, as_json: bool) -> None:
    """A rich table for people, or a JSON array for scripts."""
    if as_json:
        print(json.dumps([message_json(m, session) for m in messages], ensure_ascii=False))
        return
    from rich.table import Table
    from rich.text import Text

    total = sum(session.counter.count(m) for m in messages)
    table = Table(title=f"{title}: {len(messages)} messages, ~{total} tokens")
    for column in ("#", "id", "role", "kind", "pin", "tokens"):
        table.add_column(column, no_wrap=True, justify="right" if column == "tokens" else "left")
    table.add_column("text", overflow="fold")
    for i, m in enumerate(messages):
        table.add_row(
            str(i),
            Text(m.id),
            m.role,
            m.kind,
            "*" if m.pinned else "",
            str(session.counter.count(m)),
            Text(_preview(m)),
        )
    console().print(table)


def print_events(events: list[CompactionEvent], as_json: bool) -> None:
    """Each compaction, oldest first: a rich table for people, or a JSON array for scripts."""
    if as_json:
        rows = [
            {"index": i, "at": e.at, "trigger": e.trigger, "mode": e.mode}
            | {"summary_id": e.summary_id, "stats": dict(e.stats)}
            for i, e in enumerate(events)
        ]
        print(json.dumps(rows, ensure_ascii=False))
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"compactions: {len(events)}")
    for column in ("#", "at", "trigger", "mode", "tokens", "messages"):
        table.add_column(column, no_wrap=True)
    table.add_column("fallback", overflow="fold")
    for i, e in enumerate(events):
        stats = e.stats
        fallback = stats.get("fallback")
        table.add_row(
            str(i),
            e.at,
            e.trigger,
            e.mode,
            f"{stats.get('context_tokens_before')} → {stats.get('context_tokens_after')}",
            f"{stats.get('messages_count_before')} → {stats.get('messages_count_after')}",
            Text(fallback_text(fallback, stats.get("fallback_reason")) if fallback else ""),
        )
    console().print(table)


def print_recall(session: Session, query: str, limit: int) -> int:
    """Print each hit as id, role and snippet; return how many were found."""
    hits = session.recall(query, limit)
    if not hits:
        print(f"no messages match {query!r}")
    for hit in hits:
        print(f"{hit.id}  [{hit.role}]  {' '.join(hit.snippet.split())}")
    return len(hits)


def print_settings(loaded: LoadedSettings, as_json: bool) -> None:
    """Each effective setting, its value and its source: a table, or a JSON object."""
    from dataclasses import asdict

    values = asdict(loaded.settings)
    if as_json:
        rows = {name: {"value": v, "source": loaded.sources[name]} for name, v in values.items()}
        print(json.dumps(rows, ensure_ascii=False))
        return
    from rich.table import Table
    from rich.text import Text

    settings = loaded.settings
    table = Table(
        title="compaction settings",
        caption=f"summarize above {settings.threshold} tokens, "
        f"truncate above {settings.hard_limit} tokens",
    )
    for column in ("setting", "value", "source"):
        table.add_column(column, overflow="fold")
    for name, value in values.items():
        table.add_row(name, Text(_setting_text(value)), Text(loaded.sources[name]))
    console().print(table)


def _setting_text(value: Any) -> str:
    """A value as a person would write it in an env variable: none, plain words, JSON otherwise."""
    if value is None:
        return "none"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
