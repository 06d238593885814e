"""The planners beyond the vectors: S1's numbers, letta's float quirk, the opt-in improvements,
and the property that a planned context never breaks the validity rules."""

from __future__ import annotations

import contextlib
import math

import pytest
from conversations import tool_conversations
from hypothesis import given
from hypothesis import strategies as st

from precis.core.errors import PlanningError
from precis.core.jscompat import js_round
from precis.core.messages import KIND_SUMMARY, Message, ToolCall
from precis.core.planning import (
    NO_ASSISTANT_MESSAGE,
    _candidate_cuts,
    eviction_steps,
    first_cut,
    has_pending_tool_call,
    normalize_percentage,
    pinned_mask,
    plan_all,
    plan_sliding_window,
)
from precis.core.tokens import LettaEstimator
from precis.core.validity import check


def alternating(n: int, chars: int = 108) -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content="x" * chars, id=f"m{i}")
        for i in range(n)
    ]


@pytest.mark.parametrize(("window", "summarized"), [(1000, 7), (400, 11)])
def test_s1_twenty_messages_of_27_tokens(window: int, summarized: int) -> None:
    messages = alternating(20)
    assert {LettaEstimator().count(m) for m in messages} == {27}
    plan = plan_sliding_window(messages, tokens=LettaEstimator(), context_window=window)
    assert len(plan.summarize) == summarized
    assert plan.keep == tuple(messages[summarized:])
    assert plan.keep[0].role == "assistant"


def test_float_sequence_from_default_percentage() -> None:
    assert eviction_steps(0.3) == [
        0.4,
        0.5,
        0.6,
        0.7,
        0.7999999999999999,
        0.8999999999999999,
        0.9999999999999999,
        1.0999999999999999,
    ]


def test_quirk_raises_after_last_step_even_when_goal_met() -> None:
    # p = 0.95 takes one step to e = 1.05: that pass finds a cut whose tail meets the goal,
    # and letta still raises because e >= 1.0 afterwards.
    messages = alternating(10)
    tokens = [1] * 10
    with pytest.raises(PlanningError, match=NO_ASSISTANT_MESSAGE):
        plan_sliding_window(messages, tokens=tokens, context_window=1000, percentage=0.95)
    # From 0.3 the search runs to 1.0999999999999999 when no pass meets the goal, then raises.
    big = [400] * 10
    with pytest.raises(PlanningError, match=NO_ASSISTANT_MESSAGE):
        plan_sliding_window(messages, tokens=big, context_window=1000)


def test_reserved_tokens_accept_a_final_pass_that_fits() -> None:
    messages = alternating(10)
    plan = plan_sliding_window(
        messages, tokens=[1] * 10, context_window=1000, percentage=0.95, reserved_tokens=10
    )
    assert plan.cutoff == 7


def test_reserved_tokens_make_the_kept_tail_fit() -> None:
    messages = alternating(40)
    tokens = [50] * 40
    letta = plan_sliding_window(messages, tokens=tokens, context_window=2000)
    kept_letta = sum(tokens[letta.cutoff or 0 :])
    reserved = 600
    ours = plan_sliding_window(
        messages, tokens=tokens, context_window=2000, reserved_tokens=reserved
    )
    kept_ours = sum(tokens[ours.cutoff or 0 :])
    assert kept_letta + reserved >= 0.7 * 2000  # letta's tail plus the floor would not fit
    assert kept_ours + reserved < 0.7 * 2000
    assert (ours.cutoff or 0) > (letta.cutoff or 0)


def test_pinned_messages_are_never_summarized() -> None:
    messages = alternating(20)
    messages[2] = Message(role="user", content="never use npm", id="m2", pinned=True)
    plan = plan_sliding_window(messages, tokens=LettaEstimator(), context_window=400)
    assert "m2" not in {m.id for m in plan.summarize}
    assert [m.id for m in plan.pinned] == ["m2"]
    assert [m.id for m in plan_all(messages).pinned] == ["m2"]


def test_pinning_a_tool_result_pins_its_call() -> None:
    messages = [
        Message(role="user", content="go", id="u0"),
        Message(role="assistant", tool_calls=(ToolCall("c1", "read", "{}"),), id="a1"),
        Message(role="tool", content="secret", tool_call_id="c1", id="t1", pinned=True),
        *alternating(12)[1:],
    ]
    plan = plan_all(messages)
    assert [m.id for m in plan.pinned] == ["a1", "t1"]
    assert check([*plan.pinned, *plan.keep]) == []


def test_user_boundary_fallback_when_no_assistant_cut() -> None:
    messages = [Message(role="user", content="x" * 400, id=f"u{i}") for i in range(8)]
    with pytest.raises(PlanningError, match=NO_ASSISTANT_MESSAGE):
        plan_sliding_window(messages, tokens=LettaEstimator(), context_window=500)
    plan = plan_sliding_window(
        messages, tokens=LettaEstimator(), context_window=500, user_boundary_fallback=True
    )
    assert plan.cutoff is not None and plan.keep[0].role == "user"


def test_token_list_length_mismatch_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="3 entries for 20 messages"):
        plan_sliding_window(alternating(20), tokens=[1, 2, 3], context_window=100)


SUMMARY = Message(role="user", content="summary", id="summary", kind=KIND_SUMMARY)


@pytest.mark.property
@given(
    conversation=tool_conversations(),
    window=st.one_of(st.none(), st.integers(0, 20000)),
    percentage=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    reserved=st.sampled_from([0, 0, 500]),
    fallback=st.booleans(),
)
def test_planned_context_is_always_valid(
    conversation: list[Message],
    window: int | None,
    percentage: float | None,
    reserved: int,
    fallback: bool,
) -> None:
    assert check(conversation) == []
    counter = LettaEstimator()
    plans = [plan_all(conversation)]
    with contextlib.suppress(PlanningError):
        plans.append(
            plan_sliding_window(
                conversation,
                tokens=counter,
                context_window=window,
                percentage=percentage,
                reserved_tokens=reserved,
                user_boundary_fallback=fallback,
            )
        )
    plans.append(plan_all(conversation, keep_newest=True))
    for plan in plans:
        context = [*plan.pinned, SUMMARY, *plan.keep]
        assert check(context) == [], plan
        assert not any(m.pinned for m in plan.summarize)
        assert len(plan.summarize) + len(plan.pinned) + len(plan.keep) == len(conversation)
        if conversation and (plan.mode == "sliding_window" or plan is plans[-1]):
            assert plan.keep[-1] is conversation[-1]  # the newest message is never summarized


def reference_cut(
    messages: list[Message],
    counts: list[int],
    *,
    context_window: int | None,
    percentage: float | None,
    reserved: int,
    roles: tuple[str, ...],
) -> int | None:
    """letta's loop as written in letta-code, every kept tail summed afresh (plus the pinned
    messages before the cut); None where letta throws."""
    n = len(messages)
    pins = pinned_mask(messages)
    max_cut = n - 2 if has_pending_tool_call(messages[-1]) else n - 1
    p = normalize_percentage(percentage)
    goal = None if context_window is None else (1 - p) * context_window
    approx: float = math.inf if context_window is None else context_window
    cut: int | None = None
    e = p
    while (cut is None if goal is None else approx + reserved >= goal) and e < 1.0:
        e += 0.1
        idx = min(js_round(e * n), n - 1)
        valid = [i for i in range(1, n) if i <= idx and i < max_cut and messages[i].role in roles]
        cut = valid[-1] if valid else None
        if cut is not None:
            approx = sum(c for i, c in enumerate(counts) if i >= cut or pins[i])
    met_goal = goal is not None and approx + reserved < goal
    if cut is None or (e >= 1.0 and not (reserved > 0 and met_goal)):
        return None
    return cut


@pytest.mark.property
@given(
    conversation=tool_conversations(min_size=6, max_turns=40),
    fill=st.one_of(st.floats(0.35, 1.2), st.floats(0, 1.6)),
    percentage=st.one_of(st.none(), st.sampled_from([0.05, 0.1, 0.25, 0.3, 0.5, 0.9, 1.0, 2.0])),
    reserved=st.sampled_from([0, 0, 0, 1, 300, 5000]),
    fallback=st.booleans(),
    given_list=st.booleans(),
)
def test_planner_matches_letta_loop_run_forwards(
    conversation: list[Message],
    fill: float,
    percentage: float | None,
    reserved: int,
    fallback: bool,
    given_list: bool,
) -> None:
    """The backward search (given a counter: it counts only the tail it needs) and the forward
    one (given a list of counts) find letta's cut, or letta's error, for any window from none to
    past the whole conversation, with pinned messages."""
    counts = LettaEstimator().count_many(conversation)
    window = None if fill > 1.5 else int(fill * sum(counts))
    expected = None
    if len(conversation) >= 4:
        for roles in (("assistant",), ("assistant", "user")) if fallback else (("assistant",),):
            expected = reference_cut(
                conversation,
                counts,
                context_window=window,
                percentage=percentage,
                reserved=reserved,
                roles=roles,
            )
            if expected is not None:
                break
    try:
        plan = plan_sliding_window(
            conversation,
            tokens=counts if given_list else LettaEstimator(),
            context_window=window,
            percentage=percentage,
            reserved_tokens=reserved,
            user_boundary_fallback=fallback,
        )
    except PlanningError:
        assert expected is None
    else:
        assert plan.cutoff == expected


@pytest.mark.property
@given(
    conversation=tool_conversations(min_size=4, max_turns=30),
    more=st.integers(0, 12),
    fill=st.one_of(st.floats(0.35, 1.2), st.floats(0, 1.6)),
    percentage=st.one_of(st.none(), st.sampled_from([0.05, 0.1, 0.3, 0.5, 0.9, 1.0, 2.0])),
    reserved=st.sampled_from([0, 0, 1, 300, 5000]),
    fallback=st.booleans(),
)
def test_no_plan_summarizes_less_than_the_first_cut_of_fewer_messages(
    conversation: list[Message],
    more: int,
    fill: float,
    percentage: float | None,
    reserved: int,
    fallback: bool,
) -> None:
    """What the next compaction's ledger reads ahead (`first_cut` of the context as it is) is
    summarized by any plan of it with messages appended, whatever the window."""
    earlier = conversation[: max(0, len(conversation) - more)]
    cut = first_cut(earlier, percentage)
    assert cut == 0 or earlier[cut].role == "assistant"
    if len(earlier) >= 4:  # the first of the cuts the sliding window's steps try
        pending = has_pending_tool_call(earlier[-1])
        max_cut = len(earlier) - 2 if pending else len(earlier) - 1
        p = normalize_percentage(percentage)
        found = _candidate_cuts(earlier, p, max_cut, ("assistant",))
        assert cut <= (found[0][1] if found else 0)
    counts = LettaEstimator().count_many(conversation)
    window = None if fill > 1.5 else int(fill * sum(counts))
    plans = [plan_all(conversation), plan_all(conversation, keep_newest=True)]
    with contextlib.suppress(PlanningError):
        plans.append(
            plan_sliding_window(
                conversation,
                tokens=counts,
                context_window=window,
                percentage=percentage,
                reserved_tokens=reserved,
                user_boundary_fallback=fallback,
            )
        )
    for plan in plans:
        evicted = {id(m) for m in (*plan.summarize, *plan.pinned)}
        assert all(id(m) in evicted for m in earlier[:cut]), plan.mode


def test_a_negative_token_count_is_refused_naming_the_message() -> None:
    tokens = [5] * 20
    tokens[13] = -1
    with pytest.raises(ValueError, match="token count -1 of message 13 is negative"):
        plan_sliding_window(alternating(20), tokens=tokens, context_window=100)


def test_the_first_cut_is_before_a_longer_lists_earlier_step_cut() -> None:
    """13 messages find a cut only at the fourth step (index 5); with one more message the third
    step reaches index 4, an assistant message: the first cut may be no later than that."""
    roles = ["A", "t", "t", "u", "a", "A", "t", "A", "t", "u", "a", "u", "a"]
    calls = iter(range(100))
    made: list[Message] = []
    for i, role in enumerate(roles):
        if role == "A":  # an assistant message with a call, answered by the tool after it
            call = ToolCall(f"c{next(calls)}", "run", "{}")
            made.append(Message(role="assistant", content="", id=f"m{i}", tool_calls=(call,)))
        elif role == "t":
            answered = next(c.id for m in reversed(made) for c in m.tool_calls)
            made.append(Message(role="tool", content="ok", id=f"m{i}", tool_call_id=answered))
        else:
            made.append(
                Message(role="user" if role == "u" else "assistant", content="x", id=f"m{i}")
            )
    longer = [*made, Message(role="assistant", content="y", id="m13")]
    plan = plan_sliding_window(
        longer, tokens=[1] * len(longer), context_window=None, percentage=0.05
    )
    assert plan.cutoff == 4
    assert first_cut(made, 0.05) <= plan.cutoff
