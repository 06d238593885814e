"""The vocabulary, defined once: modes, triggers, styles, merge policies, chat formats, fact
kinds."""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

from precis.core.errors import InvalidInput

Role = Literal["system", "user", "assistant", "tool"]
# What a stored message is: one of the conversation's, or one precis wrote (a summary, a
# truncation marker, the pinned task).
MessageKind = Literal["message", "summary", "marker", "task"]
# What a planner (and so a summary) can do; a compaction may also truncate, with no model call.
PlanMode = Literal["sliding_window", "all"]
CompactionMode = Literal["sliding_window", "all", "truncate"]
# What a compaction made: a compaction mode, or "mask" (the cheap tier: old outputs stubbed).
MadeMode = Literal["sliding_window", "all", "truncate", "mask"]
# What a compaction's stats report it did: what it made, or "none" (a no-op).
StatsMode = Literal["sliding_window", "all", "truncate", "mask", "none"]
Trigger = Literal[
    "manual",
    "context_window_limit",
    "context_window_overflow",
    "hard_watermark",
    "turn_limit",
    "phase_complete",
]
# letta's sections, S3's five-part task brief, S2's notes.
SummaryStyle = Literal["letta", "brief", "notes"]
# An earlier summary is rebuilt from scratch, or kept section by section with new items added.
MergePolicy = Literal["regenerate", "anchored"]
# Whose chat format a context is held to (its tool-pairing rules) or tools are written in; a
# store's SQL dialect is `stores.dialect.Dialect`.
ChatFormat = Literal["openai", "anthropic"]
# What a fact is, most vital first: a short budget keeps the head of this order.
FactKind = Literal[
    "constraint",
    "task",
    "pinned",
    "state",
    "file_modified",
    "identifier",
    "error",
    "file_read",
    "request",
]

SUMMARY_STYLES: Final[tuple[SummaryStyle, ...]] = get_args(SummaryStyle)
MERGE_POLICIES: Final[tuple[MergePolicy, ...]] = get_args(MergePolicy)
FACT_KINDS: Final[tuple[FactKind, ...]] = get_args(FactKind)

# One rule for a conversation id, wherever one is given (library faces, CLI, API): it must be
# safe in a URL path, a file name and a shell word.
CONVERSATION_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
CONVERSATION_ID_RULE: Final = (
    "an id is 1-128 letters, digits, '.', '_', '-' or ':', starting with a letter or digit"
)
# Between a tenant's name and its conversation's id in the store (the service's scoping); the
# rule never allows it in an id, so no tenant can name another's conversation.
TENANT_SEPARATOR: Final = "/"
_CONVERSATION_ID = re.compile(CONVERSATION_ID_PATTERN)


def is_conversation_id(text: object) -> bool:
    """Whether `text` is an id by the one rule (whole: no trailing newline slips through)."""
    return isinstance(text, str) and _CONVERSATION_ID.fullmatch(text) is not None


def is_stored_conversation_id(text: object) -> bool:
    """Whether a store may hold `text`: an id by the rule, or a tenant's name and an id."""
    if not isinstance(text, str):
        return False
    tenant, separator, own = text.partition(TENANT_SEPARATOR)
    return is_conversation_id(tenant) and (not separator or is_conversation_id(own))


def checked_conversation_id(value: object) -> str:
    """`value` if a store may hold it, else InvalidInput naming it (cut when long)."""
    if isinstance(value, str) and is_stored_conversation_id(value):
        return value
    shown = repr(value)
    if isinstance(value, str) and len(value) > 40:
        shown = f"{value[:40]!r}… ({len(value):,} characters)"
    raise InvalidInput(f"conversation id {shown}: {CONVERSATION_ID_RULE}")
