"""Turning the oldest messages into a summary: transcript, prompts, overflow ladder, packaging."""

from __future__ import annotations

from precis.facts import raw_summary_text, span_language
from precis.summarize.base import Summarizer, SummaryRequest, split_previous
from precis.summarize.extractive import ExtractiveSummarizer, build_brief
from precis.summarize.ladder import LADDER_STEPS, SummaryCall, summarize_with_ladder
from precis.summarize.llm import LLMSummarizer
from precis.summarize.mock import MockSummarizer
from precis.summarize.packaging import (
    LETTA_CLIP_CHARS,
    NO_MESSAGES_SUMMARY,
    SUMMARY_TRUNCATION_SUFFIX,
    clip_summary,
    default_clip_chars,
    js_trim,
    package_summary,
)
from precis.summarize.prompts import (
    ALL_PROMPT,
    BRIEF_PROMPT,
    BRIEF_PROMPT_ZH,
    NOTES_PROMPT,
    NOTES_PROMPT_ZH,
    SLIDING_WINDOW_PROMPT,
    style_prompt,
)
from precis.summarize.transcript import (
    DEFAULT_TOOL_RESULT_CHARS,
    middle_truncate,
    render_transcript,
    transcript_line,
    truncate_tool_result,
)

__all__ = [
    "ALL_PROMPT",
    "BRIEF_PROMPT",
    "BRIEF_PROMPT_ZH",
    "DEFAULT_TOOL_RESULT_CHARS",
    "LADDER_STEPS",
    "LETTA_CLIP_CHARS",
    "NOTES_PROMPT",
    "NOTES_PROMPT_ZH",
    "NO_MESSAGES_SUMMARY",
    "SLIDING_WINDOW_PROMPT",
    "SUMMARY_TRUNCATION_SUFFIX",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "MockSummarizer",
    "Summarizer",
    "SummaryCall",
    "SummaryRequest",
    "build_brief",
    "clip_summary",
    "default_clip_chars",
    "js_trim",
    "middle_truncate",
    "package_summary",
    "raw_summary_text",
    "render_transcript",
    "span_language",
    "split_previous",
    "style_prompt",
    "summarize_with_ladder",
    "transcript_line",
    "truncate_tool_result",
]
