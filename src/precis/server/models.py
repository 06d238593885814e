"""The service's request and response bodies, declared so /openapi.json states them exactly."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from precis.core.types import CONVERSATION_ID_PATTERN

# Longest system prompt and compaction instructions accepted, in characters.
MAX_SYSTEM_PROMPT_CHARS = 200_000
MAX_INSTRUCTIONS_CHARS = 20_000


class ErrorOut(BaseModel):
    """Every 4xx/5xx answer: one line a person can act on, naming the field at fault."""

    detail: str


class Health(BaseModel):
    """What a load balancer or a supervisor polls."""

    status: Literal["ok"]
    version: str


class CreateConversation(BaseModel):
    """A new conversation; the service picks an id when none is given."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, pattern=CONVERSATION_ID_PATTERN)
    system_prompt: str = Field(default="", max_length=MAX_SYSTEM_PROMPT_CHARS)


class ConversationOut(BaseModel):
    """One conversation's vital signs: how much is stored, how much is in context."""

    id: str
    messages: int
    in_context: int
    tokens: int
    context_window: int | None
    version: int
    compacted: bool
    system_prompt: str


class ConversationRef(BaseModel):
    """A conversation in a listing."""

    id: str


class ConversationList(BaseModel):
    """Every conversation id in the store, sorted."""

    conversations: list[ConversationRef]


class MessageOut(BaseModel):
    """A stored message: the OpenAI chat dict plus what precis keeps about it."""

    model_config = ConfigDict(extra="allow")

    id: str
    kind: str
    pinned: bool
    created_at: str | None
    role: str
    content: str | list[Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class AppendMessages(BaseModel):
    """Messages to append in one transaction, in the OpenAI or the Anthropic chat format."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]] = Field(
        min_length=1,
        json_schema_extra={
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {
                    "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
                    "content": {"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]},
                },
            }
        },
    )
    format: Literal["openai", "anthropic"] = "openai"


class AppendedOut(BaseModel):
    """The appended messages with the ids and times the store gave them, and the tokens in
    context after them (null when they could not be counted just then: the append stands)."""

    messages: list[MessageOut]
    tokens: int | None


class ContextOut(BaseModel):
    """What is in context now, in stored order, and what it costs."""

    conversation_id: str
    version: int
    compacted: bool
    tokens: int
    context_window: int | None
    threshold: int | None
    messages: list[MessageOut]


class PromptOut(BaseModel):
    """What to send to the model: system prompt, pinned items, the summary, the rest (OpenAI)."""

    messages: list[dict[str, Any]]
    tokens: int


class CompactRequest(BaseModel):
    """How to compact; the defaults are the engine's (sliding window, falling back to all)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["sliding_window", "all", "truncate"] | None = None
    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS_CHARS)


class CompactionStatsOut(BaseModel):
    """What one compaction did; `fallback` (with `fallback_reason`, the failure in one line) is
    there only when the summarizer failed and the extractive brief or truncation stood in."""

    trigger: str
    mode: str
    context_tokens_before: int
    context_tokens_after: int
    context_window: int | None
    messages_count_before: int
    messages_count_after: int
    summarized: int
    fallback: Literal["extractive", "truncation"] | None = None
    fallback_reason: str | None = None


class CompactOut(BaseModel):
    """The compaction: its stats, the summary message and hook reports. `compacted` is false
    when nothing could make the context smaller: nothing was written, `reason` says why and
    there is no summary."""

    compacted: bool
    stats: CompactionStatsOut
    summary: MessageOut | None = None
    reason: str | None = None
    reports: list[str]


class RecallHitOut(BaseModel):
    """One message recall found; fetch it whole from the history if the snippet is not enough."""

    id: str
    role: str
    seq: int
    snippet: str
    score: float


class RecallOut(BaseModel):
    """Recall hits, best first."""

    query: str
    hits: list[RecallHitOut]


class HistoryOut(BaseModel):
    """A page of the append-only log, oldest first."""

    total: int
    offset: int
    messages: list[MessageOut]


class EventOut(BaseModel):
    """One committed compaction, numbered from 0 in the order it happened; its `stats` hold
    `fallback` and `fallback_reason` when the summarizer failed and something stood in."""

    index: int
    trigger: str
    mode: str
    stats: dict[str, Any]
    summary_id: str
    at: str


class EventList(BaseModel):
    """The compaction events, oldest first."""

    events: list[EventOut]
