"""S1's deliberately dumb summarizer, so recall and engine tests run without a model."""

from __future__ import annotations

from precis.core.jscompat import utf16_slice
from precis.core.messages import KIND_SUMMARY, Message
from precis.facts import raw_summary_text
from precis.summarize.base import LocalSummarizer, SummaryRequest
from precis.summarize.packaging import NO_MESSAGES_SUMMARY

MOCK_PREFIX_CHARS = 12
MOCK_SEPARATOR = " | "


def _user_text(message: Message) -> str | None:
    """The text a user turn contributes: an earlier summary's raw text, never its JSON wrapper."""
    raw = raw_summary_text(message)
    if raw is not None:
        return raw
    if message.kind == KIND_SUMMARY or message.role != "user":
        return None
    return message.content


class MockSummarizer(LocalSummarizer):
    """Joins the first 12 characters of each user message, so tests can tell what was summarized."""

    @property
    def name(self) -> str:
        return "mock"

    def summarize(self, request: SummaryRequest) -> str:
        """The prefixes joined by " | "; never empty, since an empty answer counts as a failure."""
        if not request.messages:
            return NO_MESSAGES_SUMMARY
        prefixes = [
            utf16_slice(text, 0, MOCK_PREFIX_CHARS)
            for message in request.messages
            if (text := _user_text(message)) is not None
        ]
        joined = MOCK_SEPARATOR.join(prefixes)
        if not joined.strip():
            return f"({len(request.messages)} messages, no user text)"
        return joined
