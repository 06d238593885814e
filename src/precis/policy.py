"""Compaction settings: one explicit object, letta's behaviour by default."""

from __future__ import annotations

from dataclasses import dataclass

from precis.summarize.packaging import default_clip_chars
from precis.summarize.transcript import DEFAULT_TOOL_RESULT_CHARS
from precis.tokens import letta_threshold

# The system_alert JSON around a summary ("Note: N messages … hidden …", time, stats), in tokens.
SUMMARY_WRAPPER_TOKENS = 64


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """How and when to compact one conversation.

    `clip_chars=None` scales the summary budget to the window (max(200, window*4*0.1) chars), so
    a disobedient model cannot refill a small window. `reserved_tokens=0` keeps letta's exact
    planner; a positive value reserves that much room. `reserve_floor` also reserves what every
    request carries besides the messages (system prompt, tool definitions) plus room for the
    summary itself, so the kept tail really fits and compaction stops sawing every few turns.
    """

    context_window: int | None = None
    sliding_window_percentage: float | None = None
    reserved_tokens: int = 0
    reserve_floor: bool = False
    user_boundary_fallback: bool = False
    clip_chars: int | None = None
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS
    summary_timeout: float | None = 300.0
    commit_retries: int = 1

    def __post_init__(self) -> None:
        if self.context_window is not None and self.context_window <= 0:
            raise ValueError(f"context_window must be positive, got {self.context_window}")
        if self.reserved_tokens < 0:
            raise ValueError(f"reserved_tokens must be >= 0, got {self.reserved_tokens}")
        if self.clip_chars is not None and self.clip_chars < 1:
            raise ValueError(f"clip_chars must be >= 1, got {self.clip_chars}")
        if self.summary_timeout is not None and self.summary_timeout <= 0:
            raise ValueError(f"summary_timeout must be positive, got {self.summary_timeout}")

    @property
    def effective_clip_chars(self) -> int:
        return (
            self.clip_chars
            if self.clip_chars is not None
            else default_clip_chars(self.context_window)
        )

    def planner_reserve(self, floor_tokens: int) -> int:
        """Tokens the sliding planner must leave free besides the kept tail."""
        if not self.reserve_floor:
            return self.reserved_tokens
        summary = self.effective_clip_chars // 4 + SUMMARY_WRAPPER_TOKENS
        return self.reserved_tokens + floor_tokens + summary

    @property
    def threshold(self) -> int | None:
        """Tokens above which to compact: letta's W - min(16384, max(1, floor(0.2W)))."""
        return None if self.context_window is None else letta_threshold(self.context_window)
