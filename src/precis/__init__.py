"""precis: keep a long-running LLM agent inside its context window without losing what mattered."""

from precis.messages import InvalidMessage, Message, ToolCall

__all__ = ["InvalidMessage", "Message", "ToolCall"]
__version__ = "0.1.0"
