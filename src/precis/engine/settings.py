"""Compaction settings: one explicit object, letta's behaviour by default, loadable from files."""

from __future__ import annotations

import math
from dataclasses import dataclass

from precis.core.errors import InvalidSetting
from precis.core.tokens import letta_threshold
from precis.core.types import MERGE_POLICIES, SUMMARY_STYLES, MergePolicy, SummaryStyle
from precis.summarize.packaging import default_clip_chars
from precis.summarize.transcript import DEFAULT_TOOL_RESULT_CHARS

# The ceiling of every count setting (tokens, characters, lines, turns): a billion is past any
# model's window, and every store's integer columns hold it.
MAX_SETTING_COUNT = 1_000_000_000
# Retrying a failed summary or a lost commit more often than this only delays the error.
MAX_RETRIES = 100
# The longest wait a timeout may ask for: a week (the OS's own timeouts overflow far above it).
MAX_SECONDS = 7 * 24 * 3600.0
# Where the default policy compacts when no soft watermark is set: later than letta's 80 %, so
# that, landing at the low watermark, each compaction frees more and they come less often
# (letta's own threshold where it is later, in windows over about 109k).
DEFAULT_SOFT_WATERMARK = 0.85
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

    `soft_watermark` (a fraction of the window) triggers a compaction; unset, it is 85 % of the
    window (or letta's threshold where that is later), and letta's threshold under letta's
    policy. `hard_watermark` triggers an immediate truncation without a model call. A
    compaction aims at `low_watermark` (a fraction of the window, default 40 %): it masks old
    tool outputs, or summarizes, or drops, down to there, so that each one frees real room;
    `low_watermark=None` is letta's policy (its sliding window, which keeps just under the
    threshold). `turn_limit` compacts after that many turns since the last compaction. With
    `background_compaction` (the default) an async session (the integrations, the service) makes
    that summary behind the turn, which waits for it only over the hard watermark; a sync
    `Session` always compacts within the call. Tool outputs longer than `tool_output_max_chars`
    are shown as head+tail lines (None: never shortened);
    `mask_after_turns` masks tool outputs older than that many turns before summarizing.
    Hooks are shell commands run before/after a compaction, each within `hook_timeout` seconds.
    `guard` appends the task and the users' red lines verbatim to a summary that dropped them;
    without it such a summary fails verification and the next fallback runs.
    A summarizer that fails is asked again up to `summary_retries` times (not when it ran out of
    `summary_timeout` or said the request is too big), then the extractive brief stands in.
    """

    context_window: int | None = None
    sliding_window_percentage: float | None = None
    reserved_tokens: int = 0
    reserve_floor: bool = False
    user_boundary_fallback: bool = False
    clip_chars: int | None = None
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS
    summary_timeout: float | None = 300.0
    summary_retries: int = 2
    commit_retries: int = 1
    soft_watermark: float | None = None
    hard_watermark: float = 0.95
    low_watermark: float | None = 0.4
    background_compaction: bool = True
    turn_limit: int | None = None
    tool_output_max_chars: int | None = 20000
    tool_output_head_lines: int = 40
    tool_output_tail_lines: int = 20
    mask_after_turns: int | None = None
    summary_style: SummaryStyle = "letta"
    merge_policy: MergePolicy = "regenerate"
    pin_task: bool = True
    guard: bool = True
    pre_compact_hooks: tuple[str, ...] = ()
    post_compact_hooks: tuple[str, ...] = ()
    hook_timeout: float = 30.0

    def __post_init__(self) -> None:
        _count("context_window", self.context_window, 1, "must be positive")
        _count("reserved_tokens", self.reserved_tokens, 0, "must be >= 0")
        _count("clip_chars", self.clip_chars, 1, "must be >= 1")
        _count("tool_result_chars", self.tool_result_chars, 0, "must be >= 0")
        _positive_seconds("summary_timeout", self.summary_timeout)
        _count("summary_retries", self.summary_retries, 0, "must be >= 0", MAX_RETRIES)
        _count("commit_retries", self.commit_retries, 0, "must be >= 0", MAX_RETRIES)
        hard = self.hard_watermark
        if not 0 < hard <= 1:
            raise InvalidSetting("hard_watermark", f"must be in (0, 1], got {hard}")
        soft = self.soft_watermark
        if soft is not None and not 0 < soft < hard:
            raise InvalidSetting(
                "soft_watermark", f"must be between 0 and hard_watermark ({hard}), got {soft}"
            )
        low = self.low_watermark
        if low is not None and not (
            isinstance(low, int | float) and not isinstance(low, bool) and 0 < low < hard
        ):
            raise InvalidSetting(
                "low_watermark", f"must be between 0 and hard_watermark ({hard}), got {low!r}"
            )
        _count("turn_limit", self.turn_limit, 1, "must be positive")
        _count("tool_output_max_chars", self.tool_output_max_chars, 1, "must be positive")
        _count("tool_output_head_lines", self.tool_output_head_lines, 1, "must be positive")
        _count("tool_output_tail_lines", self.tool_output_tail_lines, 1, "must be positive")
        _count("mask_after_turns", self.mask_after_turns, 1, "must be positive")
        _one_of("summary_style", self.summary_style, SUMMARY_STYLES)
        _one_of("merge_policy", self.merge_policy, MERGE_POLICIES)
        _commands("pre_compact_hooks", self.pre_compact_hooks)
        _commands("post_compact_hooks", self.post_compact_hooks)
        _positive_seconds("hook_timeout", self.hook_timeout)

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
        """Tokens above which to compact: floor(soft * W); unset, letta's W - min(16384, …)
        under letta's policy, else the later of that and `DEFAULT_SOFT_WATERMARK` (never past
        the hard watermark)."""
        window = self.context_window
        if window is None:
            return None
        if self.soft_watermark is not None:
            return math.floor(self.soft_watermark * window)
        letta = letta_threshold(window)
        if self.low_watermark is None or letta is None:
            return letta
        later = max(letta, math.floor(DEFAULT_SOFT_WATERMARK * window))
        return min(later, math.floor(self.hard_watermark * window))

    @property
    def target(self) -> int | None:
        """Tokens a compaction aims to leave: floor(low * W), never above the threshold; the
        threshold itself under letta's policy (`low_watermark=None`). None without a window."""
        threshold = self.threshold
        if threshold is None or self.low_watermark is None or self.context_window is None:
            return threshold
        return min(threshold, math.floor(self.low_watermark * self.context_window))

    def target_reserve(self, floor_tokens: int) -> int:
        """What stays beside the kept tail when planning to the target: the system prompt and
        tools, and room for the summary (its clip at four characters a token, and its wrapper)."""
        return floor_tokens + self.effective_clip_chars // 3 + SUMMARY_WRAPPER_TOKENS

    @property
    def hard_limit(self) -> int | None:
        """Tokens above which to truncate at once, without a model call: floor(hard * W)."""
        if self.context_window is None:
            return None
        return math.floor(self.hard_watermark * self.context_window)


def _count(key: str, value: int | None, low: int, rule: str, high: int = MAX_SETTING_COUNT) -> None:
    """Refuse an int below its floor or above a sane ceiling (None means unset), naming the key,
    so a mistyped window is refused up front, not after something was written with it."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidSetting(key, f"must be an integer, got {value!r}")
    if value < low:
        raise InvalidSetting(key, f"{rule}, got {value}")
    if value > high:
        raise InvalidSetting(key, f"must be at most {high:,}, got {value:,}")


def _positive_seconds(key: str, value: float | None) -> None:
    """Refuse a duration that is not a positive number of seconds up to a week."""
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidSetting(key, f"must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise InvalidSetting(
            key, f"must be a positive number of seconds up to {MAX_SECONDS:,g}, got {value}"
        )


def _one_of(key: str, value: str, choices: tuple[str, ...]) -> None:
    """Reject a word the engine does not know, listing the ones it does."""
    if value not in choices:
        raise InvalidSetting(key, f"must be one of {', '.join(choices)}, got {value!r}")


def _commands(key: str, value: tuple[str, ...]) -> None:
    """Hooks must be a tuple of non-empty command strings (a tuple keeps settings hashable)."""
    if not isinstance(value, tuple) or not all(isinstance(c, str) and c.strip() for c in value):
        raise InvalidSetting(key, f"must be a tuple of non-empty commands, got {value!r}")
