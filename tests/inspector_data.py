"""A real recorded conversation replayed into a store the way an agent would, for the inspector's
tests: one append per message, compacting when due and now and then by hand."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from conformance import trajectory

from precis import CompactionSettings, Session
from precis.eval import load_conversation
from precis.stores.base import ConversationStore

# gpt-4o as an airline agent with a simulated user: a long system prompt, tool calls, 62 lines.
TRAJECTORY = "tau-bench__gpt-4o-airline.top5_longest__task2_trial1.jsonl"
WINDOW = 4000


def messages() -> list[dict[str, Any]]:
    return load_conversation(trajectory(TRAJECTORY))


def replay(
    store: ConversationStore,
    conversation_id: str,
    *,
    manual_every: int = 20,
    settings: CompactionSettings | None = None,
) -> list[str]:
    """Replay the conversation; return what each turn was, in order ('append' or 'compaction').

    Compaction is consulted before each model call (after a message no tool result follows),
    and every `manual_every` messages one is asked for by hand, as an operator would.
    """
    items = messages()
    session = Session(store, conversation_id, settings=settings or CompactionSettings(WINDOW))
    turns: list[str] = []
    for i, item in enumerate(items):
        if i == 0 and item["role"] == "system":
            session.set_system_prompt(item["content"])
            continue
        session.append(item)
        turns.append("append")
        if i + 1 < len(items) and items[i + 1]["role"] == "tool":
            continue
        turns += ["compaction"] * len(session.maybe_compact())
        if i % manual_every == 0:
            session.compact()
            turns.append("compaction")
    return turns


def compacted_away_term(store: ConversationStore, conversation_id: str) -> tuple[str, str]:
    """A word only one original holds, that original no longer in context: (word, its id)."""
    history = store.history(conversation_id)
    in_context = {m.id for m in store.context(conversation_id).messages}
    counts: dict[str, int] = {}
    for message in history:
        for word in set(_words(message.content)):
            counts[word] = counts.get(word, 0) + 1
    for message in history:
        if message.id in in_context or message.kind != "message":
            continue
        unique = sorted(w for w in set(_words(message.content)) if counts[w] == 1)
        if unique:
            return unique[0], message.id
    raise AssertionError("every original is still in context or shares all its words")


def _words(text: str) -> Sequence[str]:
    return re.findall(r"[A-Za-z][A-Za-z0-9]{7,}", text)


def long_conversation(
    store: ConversationStore, conversation_id: str, *, turns: int = 2500, per_turn: int = 8
) -> None:
    """A conversation of `turns` × `per_turn` messages, compacted after every turn, written
    straight to the store (a 20,000-message run in seconds): the inspector at scale."""
    from precis.core.messages import Message
    from precis.stores.base import CompactionEvent
    from precis.stores.samples import Sample

    window, threshold = 4000, 3200
    store.create(conversation_id, system_prompt="You are a patient agent.")
    for turn in range(turns):
        batch = [
            Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {turn} line {i}")
            for i in range(per_turn)
        ]
        stored = store.append(conversation_id, batch)
        grown = 900 + (turn * 37) % 2400
        store.add_sample(conversation_id, Sample("append", "t", 3, window, 0, 40, 0, 0, 300, grown))
        snapshot = store.context(conversation_id)
        stats = {
            "context_tokens_before": 340 + grown,
            "context_tokens_after": 600,
            "context_window": window,
            "threshold": threshold,
            "summarized": per_turn,
        }
        summary = Message(
            role="user",
            content=f"summary {turn}",
            kind="summary",
            id=f"s{turn}",
            metadata={"summary": f"summary after turn {turn}", "stats": stats},
        )
        store.commit_compaction(
            conversation_id,
            expected_version=snapshot.version,
            snapshot_last_seq=snapshot.last_seq,
            summary=summary,
            context_ids=[summary.id, stored[-1].id],
            event=CompactionEvent("context_window_limit", "sliding_window", stats, summary.id, "t"),
        )
        store.add_sample(
            conversation_id, Sample("compaction", "t", 2, window, 0, 40, 0, 0, 300, 260)
        )
