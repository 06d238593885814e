"""precis: keep a long-running LLM agent inside its context window without losing what mattered."""

from precis.core.errors import InvalidMessage
from precis.core.messages import Message, ToolCall
from precis.engine.compactor import CompactionStats, Compactor
from precis.engine.settings import CompactionSettings
from precis.session import Session, compact_messages, compact_messages_sync

__all__ = [
    "CompactionSettings",
    "CompactionStats",
    "Compactor",
    "InvalidMessage",
    "Message",
    "Session",
    "ToolCall",
    "compact_messages",
    "compact_messages_sync",
]
__version__ = "0.1.0"
