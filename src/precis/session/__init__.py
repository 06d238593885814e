"""Sessions: one conversation as an agent loop sees it, over any store."""

from precis.session._session import Session, compact_messages, compact_messages_sync

__all__ = ["Session", "compact_messages", "compact_messages_sync"]
