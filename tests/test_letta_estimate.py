"""letta's estimate counted a column at a time, and the counters' memo, against the one-message
reference."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from json_texts import PIECES, argument_texts

from precis.core.messages import Message, ToolCall
from precis.core.tokens import LettaEstimator, TextEstimator, letta_chars

texts = st.one_of(st.text(max_size=30), st.lists(st.sampled_from(PIECES), max_size=5).map("".join))
plain_texts = texts.filter(lambda t: "\x00" not in t)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """Any message letta's estimate reads: list content, images, reasoning, tool calls."""
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    mid = draw(st.sampled_from(["", "m1", "m2", "m3", "m4"]))
    if draw(st.booleans()):
        parts = draw(
            st.lists(
                st.one_of(
                    plain_texts.map(lambda t: {"type": "text", "text": t}),
                    st.just({"type": "image_url", "image_url": {"url": "data:,"}}),
                ),
                max_size=4,
            )
        )
        data: dict[str, object] = {"role": role, "content": parts}
        if role == "tool":
            data["tool_call_id"] = "c"
        message = Message.from_openai(data, id=mid)
    else:
        message = Message(
            role=role,
            content=draw(plain_texts),
            id=mid,
            tool_call_id="c" if role == "tool" else None,
        )
    if role == "assistant":
        calls = draw(st.lists(st.tuples(plain_texts, argument_texts()), max_size=3))
        message = replace(
            message,
            reasoning=draw(st.one_of(st.just(""), plain_texts)),
            tool_calls=tuple(ToolCall(f"c{i}", n, a) for i, (n, a) in enumerate(calls)),
        )
    return message


def with_ids(batch: list[Message], copies: list[int]) -> list[Message]:
    """Each message its own id (a few none), and displayed copies of some: same id, shorter
    content, as a view shows a long tool output."""
    named = [replace(m, id="" if i % 5 == 4 else f"m{i}") for i, m in enumerate(batch)]
    shown = [replace(named[i], content=named[i].content[:-1]) for i in copies if i < len(named)]
    return named + [m for m in shown if m.id]


@pytest.mark.property
@given(
    st.lists(messages(), max_size=10),
    st.lists(st.integers(0, 9), max_size=3),
    st.integers(0, 12),
    st.sampled_from([LettaEstimator, TextEstimator]),
)
def test_count_many_equals_count_cold_warm_and_mixed(
    batch: list[Message],
    copies: list[int],
    split: int,
    counter_type: type[LettaEstimator] | type[TextEstimator],
) -> None:
    """Whatever was counted before (other forms under the same id included), a batch answers as
    message-by-message counting on a fresh counter does."""
    batch = with_ids(batch, copies)
    first, second = batch[:split], batch[split:]
    expected = [counter_type().count(m) for m in batch]
    batched = counter_type()
    assert batched.count_many(first) + batched.count_many(second) == expected
    assert batched.count_many(batch) == expected  # all warm now
    single = counter_type()
    assert [single.count(m) for m in first] + single.count_many(second) == expected
    assert [single.count(m) for m in batch] == expected


def test_a_displayed_copy_is_remembered_beside_its_original() -> None:
    original = Message(role="tool", content="x" * 4000, id="m7", tool_call_id="c")
    shown = replace(original, content="x" * 400)
    counter = LettaEstimator()
    assert counter.count_many([original, shown, original]) == [1000, 100, 1000]
    assert counter.count(shown) == 100 and counter.count(original) == 1000
    assert counter.count_many([shown, original]) == [100, 1000]


def test_one_call_per_message_and_several_are_summed_to_their_owner() -> None:
    one = Message(
        role="assistant", content="ab", id="a", tool_calls=(ToolCall("c1", "Read", '{"p": 1}'),)
    )
    two = replace(one, id="b", tool_calls=(ToolCall("c1", "Read", "{}"), ToolCall("c2", "Ls", "x")))
    # "ab" 2 + "Read" 4 + '{"p":1}' 7; and 2 + "Read" 4 + "{}" 2 + "Ls" 2 + '"x"' 3
    assert [letta_chars(one), letta_chars(two)] == [13, 13]
    assert LettaEstimator().count_many([one, two]) == [4, 4]


def test_a_batch_filed_later_is_not_spoiled_by_changes_to_the_lists() -> None:
    messages = [Message(role="user", content="x" * (4 * k), id=f"m{k}") for k in range(1, 6)]
    counter = LettaEstimator()
    counts = counter.count_many(messages)
    assert counts == [1, 2, 3, 4, 5] and counter.remembers_nothing is False
    counts[0] = 99  # the caller's list is the caller's
    messages[1] = Message(role="user", content="y", id="other")
    assert counter.count_many(messages) == [1, 1, 3, 4, 5]
    assert counter.count(Message(role="user", content="x" * 8, id="m2")) == 2


def test_unseen_batches_count_the_same_and_are_remembered() -> None:
    messages = [Message(role="user", content="x" * (4 * k), id=f"m{k}") for k in range(1, 7)]
    counter = LettaEstimator()
    assert counter.remembers_nothing
    first = counter.count_many(messages[3:], unseen=True)
    second = counter.count_many(messages[:3], unseen=True)
    assert second + first == [1, 2, 3, 4, 5, 6]
    shown = replace(messages[0], content="x")  # a displayed copy of m1
    assert counter.count_many([shown, *messages]) == [1, 1, 2, 3, 4, 5, 6]


@pytest.mark.property
@given(st.lists(messages(), max_size=12))
def test_the_cheap_lower_bound_never_exceeds_the_count(batch: list[Message]) -> None:
    counter = LettaEstimator()
    assert counter.tokens_at_least(batch) <= sum(counter.count_many(batch))


def test_the_lower_bound_is_close_for_plain_text_and_ignores_list_content() -> None:
    plain = [Message(role="user", content="x" * 10, id=f"m{i}") for i in range(8)]
    listed = Message.from_openai(
        {"role": "user", "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "c"}]}
    )
    counter = LettaEstimator()
    assert counter.tokens_at_least(plain) == 20 and sum(counter.count_many(plain)) == 24
    assert counter.tokens_at_least([listed]) == 0  # its content "ab\n\nc" is not what is counted


def test_a_remembered_count_is_what_count_gives_back() -> None:
    counter = TextEstimator()
    summary = Message(role="user", content="a summary", id="s1")
    counter.remember(summary, counter.count(replace(summary, id="")))
    assert counter.count(summary) == TextEstimator().count(summary)
    counter.remember(Message(role="user", content="no id"), 99)  # nothing to file it under
    assert counter.count(Message(role="user", content="no id")) != 99
