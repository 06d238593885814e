"""Sessions: one conversation as an agent loop sees it, over any store, sync or async."""

from precis.session._async import AsyncSession, ThreadedSession, acompact_messages
from precis.session._base import BaseSession
from precis.session._io import adrive, drive
from precis.session._sync import Session, compact_messages
from precis.session.agent import Agent, AsyncAgent

__all__ = [
    "Agent",
    "AsyncAgent",
    "AsyncSession",
    "BaseSession",
    "Session",
    "ThreadedSession",
    "acompact_messages",
    "adrive",
    "compact_messages",
    "drive",
]
