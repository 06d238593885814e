"""The estimator's features read as bit masks against the bytes.count reading they replaced."""

from __future__ import annotations

from itertools import repeat
from operator import add, floordiv

import pytest
from hypothesis import given
from hypothesis import strategies as st

from precis.core.memo import Bounded
from precis.core.textfeatures import CLASSES, CONTINUATION, text_features

# The reference: each pattern found by bytes.count in a projection of the class string.
_CASELESS = bytes.maketrans(b"luoye", b"LLLpp")
_ONLY_LETTERS = bytes.maketrans(b"ludsnpokye", b"LL....L...")
_ONLY_PUNCT = bytes.maketrans(b"ludsnpokye", b".....p..pp")
_ONLY_SPACES = bytes.maketrans(b"ludsnpokye", b"...s......")
_ONLY_DIGITS = bytes.maketrans(b"ludsnpokye", b"  d       ")
_NEWLINES_AFTER_PUNCT = bytes.maketrans(b"ludsnpokye", b"....np..pp")


def counted_features(text: str) -> tuple[int, ...]:
    if text.isascii():
        classes = text.encode().translate(CLASSES)
        other = k = y = e = 0
    else:
        classes = text.encode("utf-8", "surrogatepass").translate(CLASSES, CONTINUATION)
        other, k = classes.count(b"o"), classes.count(b"k")
        y, e = classes.count(b"y"), classes.count(b"e")
    letters = classes.translate(_ONLY_LETTERS)
    ascii_letters = letters.count(b"L") - other
    caseless = classes.translate(_CASELESS)
    punct = classes.translate(_ONLY_PUNCT)
    spaces = classes.translate(_ONLY_SPACES)
    newlines = classes.translate(_NEWLINES_AFTER_PUNCT)
    digit_runs = classes.translate(_ONLY_DIGITS).split()
    glued = caseless.count(b"pL") - caseless.count(b"ppL") - caseless.count(b"spL")
    return (
        letters.count(b".L") + (letters[:1] == b"L") + classes.count(b"lu"),
        ascii_letters,
        classes.count(b"uu"),
        classes.count(b"ulu"),
        classes.count(b"dld") + classes.count(b"ldl"),
        glued,
        punct.count(b".p") + (punct[:1] == b"p") - glued,
        punct.count(b"p" * 64),
        sum(map(floordiv, map(add, map(len, digit_runs), repeat(2)), repeat(3))),
        newlines.count(b".n") + (newlines[:1] == b"n"),
        spaces.count(b".ss") + (spaces[:2] == b"ss"),
        caseless.count(b"sd"),
        caseless.count(b"n" * 16) + spaces.count(b"s" * 64),
        k,
        other,
        y,
        e,
    )


# One character or more of each class (and surrogates, which the estimator reads as bytes too).
CHARACTERS = 'aZ7 \t\n\r.-{"é中→😀\ud800\udfff'
runs = st.tuples(st.sampled_from(CHARACTERS), st.integers(1, 70)).map(lambda r: r[0] * r[1])
texts = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=CHARACTERS, max_size=300),
    st.lists(
        st.one_of(runs, st.sampled_from(["ulul", "uLuLuL", "a1b2c3", "1a2b3", "AbAbA"])),
        max_size=12,
    ).map("".join),
)


@pytest.mark.property
@given(texts)
def test_the_bit_masks_count_what_bytes_count_counts(text: str) -> None:
    assert text_features(text) == counted_features(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "AAAAA",
        "uLuLuLu",
        "ZaZaZaZa",
        "3f9a2c",
        "1" * 10,
        "." * 130,
        "\n" * 40,
        " " * 200,
        '{"key": 12, "k2": [1, 2]}\n\n  x',
        "é" * 5 + "!" * 70 + "→" * 3,
        "😀" * 64 + "a",
        "中文 12",
    ],
)
def test_runs_and_chains_count_without_overlaps(text: str) -> None:
    assert text_features(text) == counted_features(text)


def test_short_texts_of_one_class_string_share_their_features() -> None:
    """The memo of short class strings answers for any text of the same classes; when full it
    drops the oldest, and keeps no more than its size."""
    known: Bounded[bytes, tuple[int, ...]] = Bounded(2)
    for text in ["ab 12", "cd 34", "Ab 12", "x" * 300, "", "é1", "ab 12"]:
        assert text_features(text, known) == counted_features(text)
        assert text_features(text, known) == counted_features(text)
        assert len(known) <= 2
    newest = [text.encode().translate(CLASSES, CONTINUATION) for text in ("é1", "ab 12")]
    assert list(known) == newest  # "" has no class string to keep
