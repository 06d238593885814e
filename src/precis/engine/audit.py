"""What a committed compaction did and checked, kept on its summary for the inspector to show.

The audit goes into the summary's metadata under "audit": which messages it summarized (their
ids, up to `AUDIT_IDS`, and how many), the tail it kept (the last `AUDIT_IDS` ids), what the
verification found, and every attempt that was rolled back before it and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Any, Final

from precis.core.messages import Message
from precis.facts.model import Ledger
from precis.stores.base import HandedOver

__all__ = ["AUDIT_IDS", "audit_of", "audited", "committed_summary", "plain_metadata"]

# Most summarized ids an audit lists: the summary is read with every context read.
AUDIT_IDS = 500


def audited(
    summary: Message,
    before: Sequence[Message],
    context: Sequence[Message],
    attempts: Sequence[str],
    verbatim: Sequence[str],
    *,
    handed: bool = False,
) -> Message:
    """The summary with its audit: what left `before` for `context`, and what was checked.

    `handed`: the summary's metadata, the ids of `before`, `attempts` and `verbatim` are plain
    JSON data, and the metadata made here goes to the store whole (`HandedOver`)."""
    kept = {m.id for m in context}
    gone = [m.id for m in before if m.id not in kept]
    stats = summary.metadata.get("stats", {})
    audit: dict[str, Any] = {
        "summarized": {"count": len(gone), "ids": gone[:AUDIT_IDS]},
        # The tail kept word for word beside the summary (pinned messages apart).
        "kept": [m.id for m in context if not m.pinned and m.id != summary.id][-AUDIT_IDS:],
        "verification": {
            "tool_pairs": "every call answered, in order",
            "pinned_kept": sum(1 for m in context if m.pinned),
            "verbatim_kept": list(verbatim),
            "tokens": [stats.get("context_tokens_before"), stats.get("context_tokens_after")],
        },
        "attempts": list(attempts),
    }
    metadata = {**summary.metadata, "audit": audit}
    return replace(summary, metadata=HandedOver(metadata) if handed else metadata)


def audit_of(summary: Message) -> dict[str, Any]:
    """A summary's audit, or an empty one for a summary made before audits were kept."""
    found = summary.metadata.get("audit")
    if isinstance(found, dict):
        return found
    return {"summarized": {"count": None, "ids": []}, "verification": {}, "attempts": []}


# The types of plain JSON data that are not containers.
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_FACT_FIELDS: Final = tuple(map(attrgetter, ("kind", "text", "source_id", "note")))
_ID: Final = attrgetter("id")


def plain_metadata(
    summary: Message, ledger: Ledger, texts: Sequence[Sequence[Any]], plain_ledger: bool = False
) -> bool:
    """Whether the summary's metadata is plain JSON data throughout, as the engine made it: each
    value a scalar but the ledger (the JSON of `ledger`'s facts, their strings, unless
    `plain_ledger` says so already) and the stats (scalars); and the audit's too (the ids of the
    messages before, the attempts, the texts)."""
    types: set[type] = set()
    for key, value in summary.metadata.items():
        if key == "stats" and type(value) is dict:
            types.update(map(type, value.values()))
        elif key != "ledger":
            types.add(type(value))
    for field in () if plain_ledger else _FACT_FIELDS:
        types.update(map(type, map(field, ledger.facts)))
    before, *rest = texts
    types.update(map(type, map(_ID, before)))
    for items in rest:
        types.update(map(type, items))
    return types <= _SCALARS


def committed_summary(summary: Message, context: Sequence[Message]) -> Message:
    """The summary as the store keeps it, when the store holds its very metadata (handed over,
    not copied), so the result shares nothing with the store that the store did not give out."""
    ledger = summary.metadata.get("ledger")
    for message in context:
        if message.id == summary.id:
            return message if message.metadata.get("ledger") is ledger else summary
    return summary
