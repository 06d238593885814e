"""JavaScript's JSON and string lengths: the fast length of a tool call's arguments against the
plain reference, and both against node itself."""

from __future__ import annotations

import json
import json.encoder
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from json_texts import PIECES, argument_texts, js_view, json_values, random_argument_text, write

from precis.core.jscompat import (
    js_json_stringify,
    js_number,
    js_restringified_lengths,
    js_restringify,
    quote,
    utf16_len,
)


def reference_length(text: str) -> int:
    return utf16_len(js_restringify(text))


@pytest.mark.property
@given(st.lists(argument_texts(), max_size=8))
def test_fast_lengths_equal_the_built_json(texts: list[str]) -> None:
    assert js_restringified_lengths(texts) == [reference_length(t) for t in texts]


@pytest.mark.property
@given(json_values, st.integers(0, 4))
def test_fast_length_of_any_json_value_equals_its_stringify(value: object, style: int) -> None:
    value = js_view(value)
    text = write(value, style)
    assert js_restringified_lengths([text]) == [utf16_len(js_json_stringify(json.loads(text)))]


def test_each_kind_of_text_takes_the_path_that_measures_it_right() -> None:
    cases = {
        '{"path":"src/app.py","line":7}': 30,  # canonical: the text's own length
        '{"path": "src/app.py", "line": 7}': 30,  # spaces dropped
        '{"a":1,"a":22}': 8,  # a duplicated key keeps the last value
        '{"a":1.0}': 7,  # JavaScript writes 1
        '{"a":1e21}': 11,  # and 1e+21
        "12345678901234567891": 20,  # rounded to a double: 12345678901234567000
        "99999999999999999": 18,  # rounded up to 100000000000000000
        "1" + "0" * 400: 4,  # past the largest double: Infinity, written null
        '"\\ud800"': 8,  # a lone surrogate stays escaped
        '"\\ud83d\\ude00"': 4,  # a pair becomes the character (2 code units)
        '"\\u0041\\/"': 4,  # needless escapes go
        " [1] ": 3,  # surrounding whitespace
        "ls -la": 8,  # not JSON: quoted
        "NaN": 4,  # Python's json reads it; JSON.stringify(NaN) is null
        "": 2,
    }
    assert js_restringified_lengths(list(cases)) == list(cases.values())
    assert [reference_length(t) for t in cases] == list(cases.values())


def test_one_bad_text_does_not_spoil_the_batch() -> None:
    texts = ['{"a": 1}', "not json", '{"b":2.5}', '"\\ud800"', "[1,2]"]
    expected = [7, 10, 9, 8, 5]
    assert [reference_length(t) for t in texts] == expected
    assert js_restringified_lengths(texts) == expected


def test_lone_surrogates_are_escaped_and_counted_as_code_units() -> None:
    assert quote("a\ud800b") == '"a\\ud800b"'
    assert quote("\udc00\ud800") == '"\\udc00\\ud800"'
    assert quote("\ud83d\ude00") == '"\ud83d\ude00"'  # a pair as two code points stays
    assert utf16_len("\ud800") == 1
    assert utf16_len("😀\ud800") == 3


surrogates_too = st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


def searched_quote(text: str) -> str:
    """`quote` as it was: the JSON text searched for surrogates before any is escaped."""
    quoted = json.encoder.encode_basestring(text)
    if quoted.isascii() or re.search("[\ud800-\udfff]", quoted) is None:
        return quoted
    lone = "[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]"
    return re.sub(lone, lambda m: f"\\u{ord(m.group()):04x}", quoted)


@pytest.mark.property
@given(st.lists(st.sampled_from(PIECES) | st.text(surrogates_too), max_size=6).map("".join))
def test_quote_escapes_what_a_search_for_surrogates_escaped(text: str) -> None:
    assert quote(text) == searched_quote(text)


def test_integers_print_as_the_double_javascript_reads() -> None:
    assert js_number(2**53 - 1) == "9007199254740991"
    assert js_number(2**53 + 1) == "9007199254740992"
    assert js_number(10**21) == "1e+21"
    assert js_number(-(10**400)) == "null"


NODE_RESTRINGIFY = """
const texts = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const out = texts.map((t) => {
  let v;
  try { v = JSON.parse(t); } catch { return JSON.stringify(t).length; }
  return JSON.stringify(v).length;
});
process.stdout.write(JSON.stringify(out));
"""


def test_1500_texts_measure_as_node_measures_them(tmp_path: Path) -> None:
    """The seeded batch through node's own JSON.parse and JSON.stringify."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("NODE DIFFERENTIAL SKIPPED: node is not installed")
    rng = random.Random(20261201)
    texts = [random_argument_text(rng) for _ in range(1500)]
    source = tmp_path / "texts.json"
    source.write_text(json.dumps(texts), encoding="ascii")  # lone surrogates travel escaped
    script = tmp_path / "restringify.js"
    script.write_text(NODE_RESTRINGIFY, encoding="utf-8")
    run = subprocess.run(
        [node, str(script), str(source)], capture_output=True, text=True, check=True
    )
    expected = json.loads(run.stdout)
    got = js_restringified_lengths(texts)
    wrong = [(t, g, e) for t, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert wrong == [], f"{len(wrong)} of 1500 differ from node, first: {wrong[:3]}"
    assert len(set(texts)) > 750  # the batch is varied, not one case repeated


COMPACT = '{"path":"src/app.py","line":7}'


@pytest.mark.parametrize(
    "text",
    [
        '{"cmd":"ls -la","n":1}',  # spaces inside strings only: still compact
        '{"code":"f() { return [1, 2]; }"}',  # braces and brackets inside a string
        '{"when":"2024-01-05","id":"1234567890123456789"}',  # -0 and digits inside strings
        '{"url":"http://x/:a","k":"\\":"}',  # colons inside strings; an escape
        '{"a":{"b":1}}',  # a nested object
        '[{"a":1},{"a":2}]',  # objects below the top
        '{"a":1,"a":2}',  # a key given twice
        '{"a":[1,{"b":2,"b":3}]}',  # twice, deeper
        '{"x":-0}',
        '{"big":12345678901234567}',
        '{"a" :1}',
        '{"é":"中文😀"}',
        '"\ud800"',
        "[]",
        "{}",
        "true",
        '"plain"',
    ],
)
def test_a_text_among_compact_ones_is_measured_right(text: str) -> None:
    """The whole-batch shortcut (every text already compact) must notice the one that is not."""
    batch = [COMPACT, text, COMPACT]
    assert js_restringified_lengths(batch) == [30, reference_length(text), 30]
    assert js_restringified_lengths([text]) == [reference_length(text)]


def test_a_batch_of_compact_texts_measures_as_their_own_length() -> None:
    batch = [COMPACT, '{"cmd":"ls -la"}', '{"é":"😀"}', "[1,2]", '"a"', "null"]
    assert js_restringified_lengths(batch) == [30, 16, 10, 5, 3, 4]
