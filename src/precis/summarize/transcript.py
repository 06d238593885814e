"""The plain-text transcript handed to the summarizer, byte-for-byte as letta-code renders it."""

from __future__ import annotations

import math
from collections.abc import Sequence

from precis.core.jscompat import utf16_len, utf16_slice
from precis.core.messages import Message
from precis.facts import raw_summary_text

DEFAULT_TOOL_RESULT_CHARS = 2000

_TRANSCRIPT_HEAD = " \n"
_TRANSCRIPT_TAIL = "\n \n. Generate the summary."


def middle_truncate(text: str, budget_chars: int, head: float = 0.3, tail: float = 0.3) -> str:
    """Keep the start and the end of an oversized text, since both carry the most context."""
    total = utf16_len(text)
    if budget_chars <= 0 or total <= budget_chars:
        return text
    head_units = max(0, math.floor(budget_chars * head))
    tail_units = max(0, math.floor(budget_chars * tail))
    if head_units + tail_units > budget_chars:
        tail_units = max(0, budget_chars - head_units)
    head_text = utf16_slice(text, 0, head_units)
    tail_text = utf16_slice(text, -tail_units) if tail_units > 0 else ""
    dropped = max(0, total - (utf16_len(head_text) + utf16_len(tail_text)))
    marker = f"\n[TRUNCATED: dropped {dropped} middle chars due to context budget]\n"
    return f"{head_text}{marker}{tail_text}"


def truncate_tool_result(text: str, limit: int | None) -> str:
    """Cap one tool output so a single huge log cannot crowd out the rest of the transcript."""
    total = utf16_len(text)
    if limit is None or total <= limit:
        return text
    return f"{utf16_slice(text, 0, limit)}... [truncated {total - limit} chars]"


def _with_image_placeholder(text: str, images: int) -> str:
    if images <= 0:
        return text
    placeholder = "[Image omitted]" if images == 1 else f"[{images} images omitted]"
    return f"{text}{' ' if text else ''}{placeholder}"


def _assistant_text(message: Message) -> str:
    spoken = "\n\n".join(part for part in (message.reasoning, message.content) if part)
    if not message.tool_calls:
        return spoken
    calls = ", ".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
    return f"{spoken}{' ' if spoken else ''}-> {calls}"


def transcript_line(message: Message, *, tool_result_chars: int | None) -> str | None:
    """One `[role] text` line, or None for a message with nothing worth showing the summarizer."""
    summary = raw_summary_text(message)
    if summary is not None:
        role, text = "user", summary
    elif message.role == "assistant":
        role, text = "assistant", _assistant_text(message)
    elif message.role == "tool":
        role = "tool"
        text = _with_image_placeholder("\n".join(message.text_parts), message.images)
        if text:
            text = truncate_tool_result(text, tool_result_chars)
    else:
        # letta has no system role in its history; precis shows one like a user turn.
        role, text = message.role, _with_image_placeholder(message.content, message.images)
    return f"[{role}] {text}" if text else None


def render_transcript(
    messages: Sequence[Message],
    *,
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
    max_chars: int | None = None,
) -> str:
    """The summarizer's input in letta's exact format, so precis and letta summarize alike."""
    lines = [
        line
        for message in messages
        if (line := transcript_line(message, tool_result_chars=tool_result_chars)) is not None
    ]
    transcript = _TRANSCRIPT_HEAD + "\n".join(lines) + _TRANSCRIPT_TAIL
    return middle_truncate(transcript, max_chars) if max_chars else transcript
