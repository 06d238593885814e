"""Model clients behind one small protocol."""

from precis.providers.base import ChatProvider, Completion

__all__ = ["ChatProvider", "Completion"]
