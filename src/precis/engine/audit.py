"""What a committed compaction did and checked, kept on its summary for the inspector to show.

The audit goes into the summary's metadata under "audit": which messages it summarized (their
ids, up to `AUDIT_IDS`, and how many), the tail it kept (the last `AUDIT_IDS` ids), what the
verification found, and every attempt that was rolled back before it and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from precis.core.messages import Message

__all__ = ["AUDIT_IDS", "audit_of", "audited"]

# Most summarized ids an audit lists: the summary is read with every context read.
AUDIT_IDS = 500


def audited(
    summary: Message,
    before: Sequence[Message],
    context: Sequence[Message],
    attempts: Sequence[str],
    verbatim: Sequence[str],
) -> Message:
    """The summary with its audit: what left `before` for `context`, and what was checked."""
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
    return replace(summary, metadata={**summary.metadata, "audit": audit})


def audit_of(summary: Message) -> dict[str, Any]:
    """A summary's audit, or an empty one for a summary made before audits were kept."""
    found = summary.metadata.get("audit")
    if isinstance(found, dict):
        return found
    return {"summarized": {"count": None, "ids": []}, "verification": {}, "attempts": []}
