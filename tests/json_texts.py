"""Tool-call argument texts of every kind the letta length must handle, two ways: a hypothesis
strategy for the properties, and a seeded generator for the batch checked against node.

The texts are JSON written many ways (compact, spaced, indented, ASCII-escaped, with duplicate
keys, with numbers as a person or another language would write them) and text that is not JSON.
Strings mix ASCII, other scripts, astral characters, control characters, quotes, backslashes and
lone surrogates.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import strategies as st

# Pieces of string content that exercise each escaping rule.
PIECES = [
    "",
    "a",
    "src/app.py",
    "ls -la /tmp",
    'say "hi"',
    "back\\slash",
    "tab\tand\nnewline\r",
    "\x00\x01\x1f\x7f",
    "\b\f",
    "é",
    "中文",
    "😀",
    "\u2028\u2029",
    "\ud800",
    "\udfff",
    "\ud83d\ude00",  # a pair written as two code points
    "x\ud83dy",
    "1234567890123456789",
    "-0",
    "</script>",
]
# Number literals as written in JSON text, each parsed by JavaScript as a double.
NUMBER_LITERALS = [
    "0",
    "-0",
    "7",
    "-12",
    "1.0",
    "-0.0",
    "0.1",
    "1.5",
    "1e5",
    "1E+21",
    "1e21",
    "1e-7",
    "5e-324",
    "1.7976931348623157e308",
    "1e400",
    "123456789012345",
    "1234567890123456",
    "9007199254740993",
    "99999999999999999",
    "123456789012345678901234",
    "0.000001",
    "0.0000001",
    "100000000000000000000",
    "2.5e-3",
    "3.14159",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**25), 10**25),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.sampled_from(PIECES), max_size=4).map("".join),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), inner, max_size=4),
    ),
    max_leaves=12,
)


def js_view(value: Any) -> Any:
    """The value as JavaScript holds it: strings are code units, so a high and a low surrogate
    written as two code points are the one astral character (and may collide as keys)."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, dict):
        return {js_view(k): js_view(v) for k, v in value.items()}
    if isinstance(value, list):
        return [js_view(v) for v in value]
    return value


def write(value: Any, style: int) -> str:
    """JSON text of a value in one of several styles."""
    if style == 0:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == 1:
        return json.dumps(value, ensure_ascii=False)  # ", " and ": "
    if style == 2:
        return json.dumps(value)  # \\uXXXX escapes, lone surrogates escaped
    return json.dumps(value, indent=style - 2, ensure_ascii=False)


@st.composite
def argument_texts(draw: st.DrawFn) -> str:
    """A text an assistant's tool call could carry."""
    kind = draw(st.integers(0, 9))
    if kind <= 5:
        return write(draw(json_values), draw(st.integers(0, 4)))
    if kind == 6:  # an object with a duplicated key and hand-written numbers
        keys = draw(st.lists(st.sampled_from(["a", "b", "é", "k"]), min_size=1, max_size=5))
        nums = draw(st.lists(st.sampled_from(NUMBER_LITERALS), min_size=len(keys)))
        sep = draw(st.sampled_from([",", ", ", " ,\n"]))
        return "{" + sep.join(f'"{k}":{v}' for k, v in zip(keys, nums, strict=False)) + "}"
    if kind == 7:  # a number literal alone, or in an array
        lit = draw(st.sampled_from(NUMBER_LITERALS))
        return draw(st.sampled_from([lit, f"[{lit}]", f" {lit} ", f'{{"n":{lit}}}']))
    if kind == 8:  # escapes JSON allows but JavaScript would not write
        return draw(
            st.sampled_from(
                [
                    '"\\/"',
                    '"\\u0041"',
                    '"\\u00e9"',
                    '"\\ud83d\\ude00"',
                    '"\\ud800"',
                    '"\\u001F"',
                    '"\\u000a"',
                    '{"a":"\\"\\\\"}',
                    '["\\udc00x"]',
                ]
            )
        )
    return draw(st.text(max_size=20))  # mostly not JSON at all


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, 1, -1, 42, rng.randrange(-(10**6), 10**6), rng.randrange(10**22)])
    if kind == 2:
        return rng.choice([0.5, -0.0, 1e21, 1e-7, 123.456, rng.random(), rng.uniform(-1e30, 1e30)])
    if kind in (3, 4, 5):
        return "".join(rng.choice(PIECES) for _ in range(rng.randrange(4)))
    if kind in (6, 7):
        keys = [rng.choice(PIECES) for _ in range(rng.randrange(5))]
        return {k: random_value(rng, depth + 1) for k in keys}
    return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def random_argument_text(rng: random.Random) -> str:
    """The seeded counterpart of `argument_texts`."""
    kind = rng.randrange(10)
    if kind <= 5:
        return write(random_value(rng), rng.randrange(5))
    if kind == 6:
        keys = [rng.choice(["a", "b", "é", "k"]) for _ in range(rng.randrange(1, 6))]
        sep = rng.choice([",", ", ", " ,\n"])
        pairs = (f'"{k}":{rng.choice(NUMBER_LITERALS)}' for k in keys)
        return "{" + sep.join(pairs) + "}"
    if kind == 7:
        lit = rng.choice(NUMBER_LITERALS)
        return rng.choice([lit, f"[{lit}]", f" {lit} ", f'{{"n":{lit}}}'])
    if kind == 8:
        return rng.choice(['"\\/"', '"\\u0041"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\u000a"'])
    return "".join(rng.choice([*PIECES, "{", "}", "[", ":", ","]) for _ in range(rng.randrange(6)))
