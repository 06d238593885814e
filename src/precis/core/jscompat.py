"""JavaScript semantics that letta-compatible paths must reproduce: UTF-16 lengths and slices,
`Math.round`, and `JSON.stringify` number formatting."""

from __future__ import annotations

import json
import json.encoder
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any


def utf16_len(text: str) -> int:
    """`text.length` in JavaScript: UTF-16 code units (a non-BMP character counts 2)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def utf16_slice(text: str, start: int, end: int | None = None) -> str:
    """`text.slice(start, end)` in JavaScript (negative indices count from the end).

    A surrogate pair cut in half, which JavaScript would leave as a lone surrogate, becomes
    U+FFFD so the result stays encodable.
    """
    if text.isascii() or utf16_len(text) == len(text):
        return text[start:end]
    units = text.encode("utf-16-le")
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


def js_number(x: float | int) -> str:
    """`Number.prototype.toString` for a finite number (shortest round-trip digits)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
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


# `json.dumps(text, ensure_ascii=False)` of a str (JSON.stringify's quoting), without the encoder
# object json.dumps makes on every call.
quote: Callable[[str], str] = json.encoder.encode_basestring


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
