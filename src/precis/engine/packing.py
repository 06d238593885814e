"""The tokens a context holds after a compaction, its summary counted: the summary's stats carry
that very count, so it is found as a fixed point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from precis.core.messages import Message
from precis.core.tokens import MESSAGE_OVERHEAD_TOKENS, TextEstimator, TokenCounter
from precis.summarize.packaging import with_stats

__all__ = ["settle_tokens_after"]

# Where the summary's stats give the tokens after: the one number the fixed point changes.
_AFTER_KEY = '"context_tokens_after":'
# Packings tried past the first before the count is taken as it stands.
_ROUNDS = 3


def settle_tokens_after(
    counter: TokenCounter,
    head: str,
    stats_of: Callable[[int], dict[str, Any]],
    kept_tokens: int,
) -> tuple[int, bool]:
    """(the context's tokens after, whether the count settled): the kept messages' tokens plus
    the summary's, packed from `head` with the stats `stats_of` gives for that total."""
    split = type(counter) is TextEstimator

    def total(tokens_after: int) -> int:
        """The context's tokens as a reader counts them: the summary is a message too."""
        content = with_stats(head, stats_of(tokens_after))
        if split:
            # Only the stats differ between the packings: the text before the count of tokens
            # after is read once (the same count, see `count_text_split`).
            at = content.find(_AFTER_KEY, len(head)) + len(_AFTER_KEY)
            assert isinstance(counter, TextEstimator)
            return kept_tokens + MESSAGE_OVERHEAD_TOKENS + counter.count_text_split(content, at)
        return kept_tokens + counter.count(Message(role="user", content=content))

    after = total(kept_tokens)
    if split and _same_digits(after, kept_tokens):
        # The stats of both packings differ only in digits, as many of them: the estimator sees
        # the same classes of characters, so counts the same (`count_text_split`).
        return after, True
    for _ in range(_ROUNDS):
        settled = total(after)
        if settled == after:
            return after, True
        after = settled
    return after, False


def _same_digits(a: int, b: int) -> bool:
    """Whether two token counts are written with as many digits (plain ints, as JSON writes
    them: non-negative, below 2**53)."""
    return (
        type(a) is int
        and type(b) is int
        and 0 <= a < _SAFE
        and 0 <= b < _SAFE
        and len(str(a)) == len(str(b))
    )


# Below JavaScript's largest safe integer: written as its digits (`js_number`).
_SAFE = 2**53
