"""precis: keep a long-running LLM agent inside its context window without losing what mattered."""

from precis.core.errors import InvalidMessage, PrecisError
from precis.core.messages import Message, ToolCall
from precis.engine.results import CompactionResult, CompactionStats
from precis.engine.settings import CompactionSettings
from precis.session import (
    Agent,
    AsyncAgent,
    AsyncSession,
    Session,
    acompact_messages,
    compact_messages,
)

__all__ = [
    "Agent",
    "AsyncAgent",
    "AsyncSession",
    "CompactionResult",
    "CompactionSettings",
    "CompactionStats",
    "InvalidMessage",
    "Message",
    "PrecisError",
    "Session",
    "ToolCall",
    "acompact_messages",
    "compact_messages",
]
__version__ = "0.1.0"
