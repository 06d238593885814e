"""Clipping a summary and wrapping it as letta-code's `system_alert` message (its packaging),
and the tokens a context holds once that message is in it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from precis.core.jscompat import js_json_stringify, js_number, quote, utf16_len, utf16_slice
from precis.core.messages import Message
from precis.core.tokens import TokenCounter

NO_MESSAGES_SUMMARY = "No prior conversation messages."
SUMMARY_TRUNCATION_SUFFIX = "... [summary truncated to fit]"
LETTA_CLIP_CHARS = 50000
# precis caps a summary at this share of the window (at ~4 chars per token).
CLIP_WINDOW_SHARE = 0.1
MIN_CLIP_CHARS = 200

# What JavaScript's String.prototype.trim removes: WhiteSpace and LineTerminator code points.
_JS_TRIM_CHARS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    """`String.prototype.trim`, which differs from `str.strip` on a few control characters."""
    return text.strip(_JS_TRIM_CHARS)


def clip_summary(text: str, clip_chars: int | None) -> str:
    """Trim and cap a summary so a long-winded model cannot refill the window it just freed."""
    summary = js_trim(text)
    if clip_chars is None or utf16_len(summary) <= clip_chars:
        return summary
    kept = utf16_slice(summary, 0, clip_chars)
    if kept.endswith("\ufffd") and not summary.startswith(kept):
        # The cut fell inside a surrogate pair: drop the half character rather than keep garbage.
        kept = kept[:-1]
    return kept + SUMMARY_TRUNCATION_SUFFIX


def default_clip_chars(context_window: int | None) -> int:
    """The clip for a window: a tenth of it in chars, or letta's fixed 50000 when it is unknown."""
    if context_window is None:
        return LETTA_CLIP_CHARS
    return max(MIN_CLIP_CHARS, int(context_window * 4 * CLIP_WINDOW_SHARE))


def _evicted_count(stats: Mapping[str, Any] | None) -> str | None:
    if stats is None or "messages_count_before" not in stats or "messages_count_after" not in stats:
        return None
    before, after = stats["messages_count_before"], stats["messages_count_after"]
    # JavaScript subtracts null as 0; other non-numbers fall back to the count-free wording.
    before = 0 if before is None else before
    after = 0 if after is None else after
    if not isinstance(before, int | float) or not isinstance(after, int | float):
        return None
    return js_number(before - after)


def package_summary(
    summary: str, stats: Mapping[str, Any] | None, mode: str | None, *, time: str
) -> str:
    """The summary as the JSON text letta stores in its history, so both read each other's logs."""
    return with_stats(packed_head(summary, stats, mode, time=time), stats)


def packed_head(
    summary: str, stats: Mapping[str, Any] | None, mode: str | None, *, time: str
) -> str:
    """`package_summary`'s text up to its stats: what stays the same when only token counts
    change (the note reads the message counts only), so the summary is encoded once."""
    evicted = _evicted_count(stats)
    if mode is not None and "sliding_window" in mode:
        if evicted is not None:
            note = (
                f"Note: {evicted} messages from the beginning of the conversation have been hidden"
                " from view due to memory constraints."
            )
        else:
            note = (
                "Note: prior messages from the beginning of the conversation have been hidden from"
                " view due to conversation memory constraints."
            )
    else:
        note = (
            "Note: prior messages have been hidden from view due to conversation memory"
            " constraints."
        )
    message = f"{note}\nThe following is a summary of the previous messages:\n {summary}"
    alert = {"type": "system_alert", "message": message, "time": time}
    return js_json_stringify(alert)[:-1]  # left open for the stats


def with_stats(head: str, stats: Mapping[str, Any] | None) -> str:
    """A `packed_head` closed with these stats: `package_summary` of the same arguments."""
    if stats is None:
        return head + "}"
    return f'{head},"compaction_stats":{_stats_json(stats)}}}'


def _stats_json(stats: Mapping[str, Any]) -> str:
    """`js_json_stringify(_plain(stats))`; for flat str keys and str or int values (what the
    engine writes) without walking the value twice."""
    items: list[str] = []
    for key, value in stats.items():
        kind = type(value)
        if type(key) is not str or (kind is not int and kind is not str):
            return js_json_stringify(_plain(stats))
        # An int is written as str(int) by js_number; a str quoted as JSON.stringify does.
        items.append(f"{quote(key)}:{value if kind is int else quote(value)}")
    return "{" + ",".join(items) + "}"


def _plain(value: Any) -> Any:
    """Mappings as dicts, all the way down, so the JSON writer accepts any Mapping."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# Packagings tried past the first before the count is taken as it stands.
_SETTLE_ROUNDS = 3


def settle_tokens_after(
    counter: TokenCounter,
    head: str,
    stats_of: Callable[[int], dict[str, Any]],
    kept_tokens: int,
) -> tuple[int, bool]:
    """(the context's tokens after a compaction, whether the count settled): the kept messages'
    tokens plus the summary's, packaged from `head` with the stats `stats_of` gives for that
    total. The stats carry that very count, so it is found as a fixed point."""

    def total(tokens_after: int) -> int:
        content = with_stats(head, stats_of(tokens_after))
        return kept_tokens + counter.count(Message(role="user", content=content))

    after = total(kept_tokens)
    for _ in range(_SETTLE_ROUNDS):
        settled = total(after)
        if settled == after:
            return after, True
        after = settled
    return after, False
