"""JavaScript semantics that letta-compatible paths must reproduce: UTF-16 lengths and slices,
`Math.round`, and `JSON.stringify` number formatting."""

from __future__ import annotations

import json
import json.encoder
import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from itertools import compress, repeat
from operator import itemgetter
from typing import Any

from precis.core.messages import SURROGATE_RE, parse_json


def utf16_len(text: str) -> int:
    """`text.length` in JavaScript: UTF-16 code units (a non-BMP character counts 2, a lone
    surrogate 1)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_slice(text: str, start: int, end: int | None = None) -> str:
    """`text.slice(start, end)` in JavaScript (negative indices count from the end).

    A surrogate pair cut in half, which JavaScript would leave as a lone surrogate, becomes
    U+FFFD so the result stays encodable.
    """
    if text.isascii() or utf16_len(text) == len(text):
        return text[start:end]
    units = text.encode("utf-16-le", "surrogatepass")
    n = len(units) // 2
    s = _clamp(start, n)
    e = n if end is None else _clamp(end, n)
    if e <= s:
        return ""
    return units[2 * s : 2 * e].decode("utf-16-le", errors="replace")


def _clamp(index: int, n: int) -> int:
    if index < 0:
        return max(0, n + index)
    return min(index, n)


def js_round(x: float) -> int:
    """`Math.round`: halves round up (towards +inf), unlike Python's banker's rounding."""
    return math.floor(x + 0.5)


# Number.MAX_SAFE_INTEGER: integers up to it are exact as doubles.
MAX_SAFE_INTEGER = 2**53 - 1


def js_number(x: float | int) -> str:
    """`Number.prototype.toString` for a finite number (shortest round-trip digits)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        if -MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER:
            return str(x)
        # JSON.parse reads every number as a double: a bigger integer is rounded (and past the
        # largest double it is Infinity, which JSON.stringify writes as null).
        try:
            x = float(x)
        except OverflowError:
            return "null"
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    dec = Decimal(repr(abs(x)))
    digits_t = dec.as_tuple()
    digits = "".join(str(d) for d in digits_t.digits).rstrip("0") or "0"
    k = len(digits)
    exp = digits_t.exponent
    assert isinstance(exp, int)
    # value = 0.digits × 10^n, with n the position of the decimal point
    n = len(digits_t.digits) + exp
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mant = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = f"{mant}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


# `json.dumps(text, ensure_ascii=False)` of a str, without the encoder object json.dumps makes on
# every call: JSON.stringify's quoting except for lone surrogates, which it leaves raw.
_encode_basestring: Callable[[str], str] = json.encoder.encode_basestring
# A surrogate that is not half of a pair, as JavaScript sees the string (UTF-16 code units).
_LONE_SURROGATE = re.compile(
    "[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]"
)


def quote(text: str) -> str:
    """`JSON.stringify(text)`: quotes, short escapes, `\\u00xx` for other control characters and,
    as JavaScript has done since ES2019, `\\udxxx` for a lone surrogate; the rest raw."""
    quoted = _encode_basestring(text)
    if quoted.isascii():
        return quoted
    try:
        quoted.encode()  # UTF-8 refuses exactly the surrogates, and sooner than a search finds none
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(_escape_code_unit, quoted)
    return quoted


def _escape_code_unit(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def js_json_stringify(value: Any) -> str:
    """`JSON.stringify(value)` for JSON-shaped data: compact, non-ASCII raw, JS numbers."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, dict):
        items = (f"{quote(str(k))}:{js_json_stringify(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json_stringify(v) for v in value) + "]"
    raise TypeError(f"not JSON-shaped: {type(value).__name__}")


def js_restringify(text: str) -> str:
    """`JSON.stringify(JSON.parse(text))`; a text that is not JSON stays the string it is, which
    JSON.stringify quotes. (letta holds tool-call arguments parsed and measures them this way.)"""
    if not text.isascii() and SURROGATE_RE.search(text) is not None:
        # JavaScript sees code units: a high and a low surrogate side by side are one character
        # (so "\ud83d\ude00" and "😀" are the same key). Python only after a UTF-16 round trip.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    try:
        return js_json_stringify(parse_json(text))
    except (ValueError, TypeError):
        return quote(text)


# The C scanner and encoder of the json module. The scanner refuses floats and NaN/Infinity (int()
# of their text raises), the two places where Python's printing differs from JavaScript's.
_decoder: Any = json.JSONDecoder(parse_float=int, parse_constant=int)
_scan_once: Callable[[str, int], tuple[Any, int]] = _decoder.scan_once
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_encode: Callable[[Any, int], Sequence[str]] | None = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(None, None, _encode_basestring, None, ":", ",", False, False, True)
)
_SCAN_ERRORS = (StopIteration, ValueError, RecursionError)
# Bytes of UTF-8 text mapped so that a run of 16 digits (an integer JSON.parse may round) is
# found with one search.
_DIGIT_RUNS = bytes(ord("d") if chr(b).isdigit() and b < 128 else ord(".") for b in range(256))
_SIXTEEN_DIGITS = b"d" * 16


def js_restringified_lengths(texts: Sequence[str]) -> list[int]:
    """`utf16_len(js_restringify(t))` for each text, without building JSON in Python.

    Each text is parsed by the json module's C scanner, which refuses floats and NaN/Infinity.
    When every text parsed whole and is already what JSON.stringify writes for its value (see
    `_already_compact`), the lengths are the texts' own. Otherwise the values are re-encoded by
    the json module's C encoder, compact and non-ASCII raw: exactly what `js_json_stringify`
    writes unless a value holds a lone surrogate (JavaScript escapes it) or an integer past 15
    digits (JavaScript rounds it to a double). A text with either, with a float, or that does
    not parse whole is measured through `js_restringify` itself.
    """
    n = len(texts)
    if _encode is None or n == 0:
        return [utf16_len(js_restringify(t)) for t in texts]
    try:
        parsed = list(map(_scan_once, texts, repeat(0)))
    except _SCAN_ERRORS:
        parsed = []
    if len(parsed) != n:  # one raised (StopIteration ends the map early): one at a time
        return [_restringified_length(t) for t in texts]
    values = list(map(_VALUE, parsed))
    lengths = list(map(len, texts))
    whole = list(map(_END, parsed)) == lengths
    joined = "".join(texts)
    if whole and _already_compact(joined, values):
        return lengths if joined.isascii() else list(map(utf16_len, texts))
    encoded = list(map("".join, map(_encode, values, repeat(0))))
    all_encoded = "".join(encoded)
    sizes = list(map(len if all_encoded.isascii() else utf16_len, encoded))
    if not whole or not _plain(all_encoded):
        for i, text in enumerate(texts):
            if parsed[i][1] != len(text) or not _plain(encoded[i]):
                sizes[i] = utf16_len(js_restringify(text))
    return sizes


def _already_compact(joined: str, values: list[Any]) -> bool:
    """Whether each of the texts joined here, parsed whole into its value with no float, is
    already the value's JSON.stringify: no escape and no surrogate in it; no whitespace, -0 or
    integer past 15 digits outside its strings; and no key given twice in an object."""
    if "\\" in joined or not (joined.isascii() or SURROGATE_RE.search(joined) is None):
        return False
    # With no escapes, every quote opens or closes a string. When nothing to refuse is anywhere
    # in the texts, it is not outside their strings either; else look at the outside alone.
    outside = joined
    if _unwanted(joined):
        outside = "".join(joined.split('"')[::2])
        if _unwanted(outside):
            return False
    dicts = values if list(map(type, values)).count(dict) == len(values) else None
    if dicts is None:
        dicts = list(compress(values, map(isinstance, values, repeat(dict))))
    parsed_keys = sum(map(len, dicts))
    # The keys written are the strings followed by a colon (no whitespace, and no quote inside a
    # string). Each is a distinct key of a text's top-level object only when as many were parsed
    # there: a key given twice, or any key in a deeper object, makes more written than parsed.
    # (Colons are counted first, the cheaper bound: parsed <= written <= colons.)
    return joined.count(":") == parsed_keys or joined.count('":') == parsed_keys


def _unwanted(text: str) -> bool:
    """Whitespace, -0 or 16 digits in a row somewhere in this (escape-free, ASCII-or-not) text."""
    if any(map(text.__contains__, _WHITESPACE)) or ("-" in text and "-0" in text):
        return True
    return _SIXTEEN_DIGITS in text.encode("utf-8").translate(_DIGIT_RUNS)


_WHITESPACE = (" ", "\n", "\t", "\r")
_VALUE = itemgetter(0)
_END = itemgetter(1)


def _restringified_length(text: str) -> int:
    assert _encode is not None
    try:
        value, end = _scan_once(text, 0)
    except _SCAN_ERRORS:
        return utf16_len(js_restringify(text))
    encoded = "".join(_encode(value, 0))
    if end != len(text) or not _plain(encoded):
        return utf16_len(js_restringify(text))
    return utf16_len(encoded)


def _plain(encoded: str) -> bool:
    """No lone surrogate and no run of 16 digits: Python's JSON is JavaScript's here."""
    if encoded.isascii():
        raw = encoded.encode("ascii")
    elif SURROGATE_RE.search(encoded) is None:
        raw = encoded.encode("utf-8")
    else:
        return False
    return _SIXTEEN_DIGITS not in raw.translate(_DIGIT_RUNS)
