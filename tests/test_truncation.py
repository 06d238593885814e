"""Hard-watermark truncation: fits the budget, tool outputs first, protected kept, pairs whole."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from conformance import TRAJECTORY_FILES, trajectory_as_openai
from conversations import tool_conversations
from hypothesis import given
from hypothesis import strategies as st

from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message, ToolCall, messages_from_openai
from precis.core.planning import call_groups, pinned_mask
from precis.core.tokens import LettaEstimator
from precis.core.validity import check
from precis.engine.truncation import TruncationPlan, context_after, plan_truncation


def user(i: int, chars: int = 400, **kw: object) -> Message:
    return Message(id=f"u{i}", role="user", content="u" * chars, **kw)  # type: ignore[arg-type]


def assistant(i: int, chars: int = 400) -> Message:
    return Message(id=f"a{i}", role="assistant", content="a" * chars)


def call(i: int, *, pinned: bool = False) -> list[Message]:
    """An assistant call and its large result (about 1000 tokens)."""
    return [
        Message(
            id=f"c{i}",
            role="assistant",
            tool_calls=(ToolCall(f"call{i}", "bash", '{"cmd":"ls"}'),),
            pinned=pinned,
        ),
        Message(id=f"t{i}", role="tool", content="t" * 4000, tool_call_id=f"call{i}"),
    ]


def tokens(messages: Sequence[Message]) -> int:
    counter = LettaEstimator()
    return sum(counter.count(m) for m in messages)


def real(plan: TruncationPlan) -> list[Message]:
    return [m for m in plan.kept if m.kind != KIND_MARKER]


def test_nothing_to_drop_returns_messages_unchanged() -> None:
    messages = [user(0), assistant(0)]
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=10_000)
    assert plan.kept == tuple(messages)
    assert plan.dropped == ()
    assert plan.marker is None
    assert context_after(plan) == messages


def test_floor_tokens_count_against_the_budget() -> None:
    messages = [user(0), assistant(0), user(1), assistant(1)]  # 100 tokens each
    fits = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=400)
    assert fits.marker is None
    squeezed = plan_truncation(
        messages, counter=LettaEstimator(), budget_tokens=400, floor_tokens=150
    )
    assert squeezed.marker is not None
    counter = LettaEstimator()
    assert tokens(squeezed.kept) + 150 <= 400
    assert counter.count(squeezed.marker) == tokens([squeezed.marker])


def test_tool_outputs_go_before_older_plain_messages() -> None:
    messages = [user(0), assistant(0), *call(1), user(1), *call(2), user(2), assistant(2)]
    before = tokens(messages)
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=before - 1500)
    assert [m.id for m in plan.dropped] == ["c1", "t1", "c2", "t2"]
    assert [m.id for m in real(plan)] == ["u0", "a0", "u1", "u2", "a2"]
    assert tokens(plan.kept) <= before - 1500


def test_drops_the_oldest_tool_output_first_and_stops_when_it_fits() -> None:
    messages = [user(0), *call(1), *call(2), user(1), assistant(1)]
    budget = tokens(messages) - 900
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=budget)
    assert [m.id for m in plan.dropped] == ["c1", "t1"]
    assert tokens(plan.kept) <= budget


def test_then_the_oldest_remaining_messages() -> None:
    messages = [user(0), assistant(0), *call(1), user(1), assistant(1), user(2), assistant(2)]
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=350)
    assert [m.id for m in plan.dropped] == ["u0", "a0", "c1", "t1", "u1"]  # original order
    assert [m.id for m in real(plan)] == ["a1", "u2", "a2"]
    assert tokens(plan.kept) <= 350


def test_pinned_newest_summary_system_and_last_two_are_never_dropped() -> None:
    old_summary = Message(id="s0", role="user", kind=KIND_SUMMARY, content="s" * 400)
    new_summary = Message(id="s1", role="user", kind=KIND_SUMMARY, content="s" * 400)
    system = Message(id="sys", role="system", content="be careful")
    messages = [
        system,
        old_summary,
        user(0, pinned=True),
        new_summary,
        *call(1, pinned=True),
        *call(2),
        user(1),
        assistant(1),
        *call(3),
    ]
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=1)
    kept = {m.id for m in plan.kept}
    assert {"sys", "u0", "s1", "c1", "t1", "c3", "t3"} <= kept  # t3 is last, so its call stays
    assert {m.id for m in plan.dropped} == {"s0", "c2", "t2", "u1", "a1"}
    assert check(plan.kept) == []


def test_marker_sits_after_the_leading_pinned_and_summary_messages() -> None:
    summary = Message(id="s", role="user", kind=KIND_SUMMARY, content="summary")
    messages = [user(0, pinned=True), summary, *call(1, pinned=True), *call(2)]
    messages += [user(1), assistant(1), user(2), assistant(2)]
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=1400)
    assert [m.id or m.kind for m in plan.kept] == ["u0", "s", "c1", "t1", "marker", "u2", "a2"]
    assert plan.marker is not None
    assert plan.marker.role == "user" and plan.marker.id == ""
    assert plan.marker.content.startswith("[4 earlier messages omitted — search the history")


def test_marker_lists_the_red_lines_verbatim() -> None:
    messages = [user(0), assistant(0), user(1), assistant(1)]
    red = ["不许动 legacy/ 目录，只加新模块", "never use npm"]
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=250, red_lines=red)
    assert plan.marker is not None
    assert plan.marker.content == (
        "[2 earlier messages omitted — search the history for them]\n"
        "Constraints stated in them, verbatim:\n"
        "- 不许动 legacy/ 目录，只加新模块\n"
        "- never use npm"
    )
    assert tokens(plan.kept) <= 250


def test_keep_last_protects_the_whole_call_group_of_the_last_messages() -> None:
    messages = [user(0), assistant(0), *call(1)]
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=1, keep_last=1)
    assert [m.id for m in real(plan)] == ["c1", "t1"]
    with pytest.raises(ValueError, match="keep_last"):
        plan_truncation(messages, counter=LettaEstimator(), budget_tokens=1, keep_last=-1)


def test_call_groups_keep_calls_with_their_results() -> None:
    messages = [user(0), *call(1), assistant(1), *call(2)]
    assert call_groups(messages) == [(0,), (1, 2), (3,), (4, 5)]
    result = Message(id="t1", role="tool", content="x", tool_call_id="call1", pinned=True)
    pinned_result = [user(0), call(1)[0], result]
    assert pinned_mask(pinned_result) == [False, True, True]


@pytest.mark.property
@given(
    messages=tool_conversations(),
    budget=st.integers(0, 8000),
    keep_last=st.integers(0, 3),
    floor=st.integers(0, 300),
)
def test_property_never_splits_pairs_and_fits_or_only_protected_remain(
    messages: list[Message], budget: int, keep_last: int, floor: int
) -> None:
    counter = LettaEstimator()
    plan = plan_truncation(
        messages, counter=counter, budget_tokens=budget, keep_last=keep_last, floor_tokens=floor
    )
    assert check(plan.kept) == []
    kept = real(plan)
    kept_ids = {m.id for m in kept}
    dropped_ids = {m.id for m in plan.dropped}
    # A partition of the input, both halves in the original order.
    assert sorted(kept_ids | dropped_ids) == sorted(m.id for m in messages)
    assert not kept_ids & dropped_ids
    assert kept == [m for m in messages if m.id in kept_ids]
    assert list(plan.dropped) == [m for m in messages if m.id in dropped_ids]
    # Call groups leave whole.
    for group in call_groups(messages):
        assert len({messages[i].id in kept_ids for i in group}) == 1
    # Protected messages stay.
    protected = {m.id for m, pin in zip(messages, pinned_mask(messages), strict=True) if pin}
    protected |= {m.id for m in messages[max(0, len(messages) - keep_last) :] if keep_last}
    protected |= {m.id for m in messages if m.role == "system"}
    assert protected <= kept_ids
    # A marker exactly when something went, placed after the leading protected messages.
    assert (plan.marker is None) == (not plan.dropped)
    if plan.marker is not None:
        at = plan.kept.index(plan.marker)
        assert all(m.pinned or m.role in {"system", "tool"} for m in plan.kept[:at])
        assert f"[{len(plan.dropped)} earlier messages omitted" in plan.marker.content
    # Either it fits, or every group still in context is protected.
    if tokens(plan.kept) + floor > budget:
        for group in call_groups(messages):
            if messages[group[0]].id in kept_ids:
                assert any(messages[i].id in protected for i in group)


@pytest.mark.parametrize("path", TRAJECTORY_FILES, ids=lambda p: p.stem[:50])
def test_shared_trajectories_fit_4000_tokens_or_keep_only_the_undroppable(path: Path) -> None:
    messages = messages_from_openai(trajectory_as_openai(path))
    messages = [m.with_id(f"m{i:04d}") for i, m in enumerate(messages)]
    assert check(messages) == []
    plan = plan_truncation(messages, counter=LettaEstimator(), budget_tokens=4000)
    assert check(plan.kept) == []
    if tokens(plan.kept) > 4000:
        last_two = {m.id for m in messages[-2:]}
        for group in call_groups(messages):
            ids = {messages[i].id for i in group}
            if ids <= {m.id for m in plan.kept}:
                assert ids & last_two or any(messages[i].role == "system" for i in group)
    else:
        assert plan.dropped or tokens(messages) <= 4000
