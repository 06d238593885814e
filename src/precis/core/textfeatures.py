"""The pieces o200k-style pre-tokenisation cuts text into, counted by character class: what the
default estimator weighs."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from precis.core.memo import Bounded

__all__ = ["CLASSES", "CONTINUATION", "text_features"]


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
CLASSES = _byte_table(
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
CONTINUATION = bytes(range(0x80, 0xC0))
_CLASS_LETTERS = b"ludsnpokye"


def _bits(members: bytes) -> bytes:
    """A table that writes the class string as binary digits: 1 for these classes, else 0."""
    return bytes.maketrans(_CLASS_LETTERS, bytes(b"01"[c in members] for c in _CLASS_LETTERS))


# Each class string becomes a few ints, one bit per character, the first character the highest
# bit: then `m >> 1` marks where the character before is in `m`, `m << 1` where the one after is,
# and counting a pattern is an AND and a bit count instead of a pass of bytes.count. Three ints
# hold a 3-bit code per character (punctuation, symbols and emoji 0, as one class once case is
# gone; l 1, u 2, d 3, s 4, n 5, o 6, k 7), from which each class's bits are a few ANDs.
_CODE_BITS = (_bits(b"ldnk"), _bits(b"udok"), _bits(b"snok"))
_ONLY_PUNCT = bytes.maketrans(_CLASS_LETTERS, b".....p..pp")
_LONG_PUNCT, _LONG_NEWLINES, _LONG_SPACES = b"p" * 64, b"n" * 16, b"s" * 64
_NO_FEATURES = (0,) * 17


def text_features(
    text: str, known: Bounded[bytes, tuple[int, ...]] | None = None
) -> tuple[int, ...]:
    """Counts of the pieces o200k-style pre-tokenisation cuts text into, without a Python loop.

    ASCII text (most of an agent's) has no class o, k, y or e: their counts are 0 unread. A short
    text's class string (a message's stats, a tool's name) is often met before: `known`, the
    caller's (a counter's), keeps the features of those up to `SHORT_CHARS` long."""
    if text.isascii():
        classes = text.encode().translate(CLASSES)
        other = k = y = e = 0
    else:
        classes = text.encode("utf-8", "surrogatepass").translate(CLASSES, CONTINUATION)
        other, k = classes.count(b"o"), classes.count(b"k")
        y, e = classes.count(b"y"), classes.count(b"e")
    if not classes:
        return _NO_FEATURES
    if len(classes) > SHORT_CHARS or known is None:
        return _class_features(classes, other, k, y, e)
    features = known.get(classes)
    if features is None:
        features = known.put(classes, _class_features(classes, other, k, y, e))
    return features


# Class strings up to this long have their features remembered by a caller that keeps them.
SHORT_CHARS = 256


def _class_features(classes: bytes, other: int, k: int, y: int, e: int) -> tuple[int, ...]:
    """`text_features` of a class string, given its counts of o, k, y and e; each pattern
    counted as bytes.count counts it, without overlaps."""
    one, two, four = (int(classes.translate(bit), 2) for bit in _CODE_BITS)
    lower, upper = one & ~(two | four), two & ~(one | four)
    digit, space = one & two & ~four, four & ~(one | two)
    newline = one & four & ~two
    letter = lower | upper | (two & four & ~one if other else 0)
    punct = ((1 << len(classes)) - 1) ^ (one | two | four)
    # One punctuation character glued to the front of a word rides along with it.
    glued = (punct & (letter << 1) & ~((punct | space) >> 1)).bit_count()
    return (
        (letter & ~(letter >> 1)).bit_count() + (lower & (upper << 1)).bit_count(),
        (lower | upper).bit_count(),
        _run_offsets(upper, 2, 1) if upper & (upper << 1) else 0,
        _chained(upper & (lower << 1) & (upper << 2), classes, b"ulu"),
        _chained(digit & (lower << 1) & (digit << 2), classes, b"dld")
        + _chained(lower & (digit << 1) & (lower << 2), classes, b"ldl"),
        glued,
        (punct & ~(punct >> 1)).bit_count() - glued,
        classes.count(_LONG_PUNCT) if not (y or e) else _long_punct(classes, punct),
        _run_offsets(digit, 3, 0) if digit else 0,
        # Newlines right after punctuation join its piece; others make their own.
        (newline & ~((newline | punct) >> 1)).bit_count(),
        (space & ~(space >> 1) & (space << 1)).bit_count(),
        (space & (digit << 1)).bit_count(),
        classes.count(_LONG_NEWLINES) + classes.count(_LONG_SPACES),
        k,
        other,
        y,
        e,
    )


def _chained(starts: int, classes: bytes, pattern: bytes) -> int:
    """Matches of a three-class `pattern` that ends in its first class, found at `starts`,
    counted without overlaps: their number, unless two chain (two apart), then bytes.count's."""
    if starts & (starts << 2):
        return classes.count(pattern)
    return starts.bit_count()


def _long_punct(classes: bytes, punct: int) -> int:
    """Runs of 64 punctuation characters (symbols and emoji with them), read only if one is."""
    run = punct
    for shift in (1, 2, 4, 8, 16, 32):
        run &= run >> shift
    return classes.translate(_ONLY_PUNCT).count(_LONG_PUNCT) if run else 0


def _run_offsets(mask: int, period: int, residue: int) -> int:
    """The set bits `residue` (mod `period`) past the lowest bit of their run: with
    residue period - 1, the sum over runs of len // period (what bytes.count finds of `period`
    copies of the class); with residue 0, the sum of ceil(len / period)."""
    phases = _phases(period, mask.bit_length())
    lowest = mask & ~(mask << 1)
    found = 0
    for phase in range(period):
        # Adding each run's lowest bit carries through the run: these are the runs from `phase`.
        runs = mask ^ ((mask + (lowest & phases[phase])) & mask)
        found += (runs & phases[(phase + residue) % period]).bit_count()
    return found


def _phase_bits(period: int, size: int) -> tuple[int, ...]:
    """For each phase, the bits at that index mod `period`, over `size` bits."""
    every = int(("0" * (period - 1) + "1") * (size // period + 1), 2)
    return tuple(every << phase for phase in range(period))


# The phases of the periods `_run_offsets` is asked about, over texts up to 2^14 characters.
_PHASE_BITS = 1 << 15
_PHASES: Final = MappingProxyType({p: _phase_bits(p, _PHASE_BITS) for p in (2, 3)})


def _phases(period: int, width: int) -> tuple[int, ...]:
    """For each phase, the bits at that index mod `period`, over at least `width` bits: made
    for a longer text, as its features are."""
    known = _PHASES.get(period)
    if known is None or known[0].bit_length() < width:
        return _phase_bits(period, max(2 * width, _PHASE_BITS))
    return known
