"""Tool output views: head+tail display, observation masking, paginated sections."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conformance import TRAJECTORY_FILES, trajectory_as_openai
from hypothesis import given
from hypothesis import strategies as st

from precis.core.memo import Memo
from precis.core.messages import KIND_SUMMARY, Message, ToolCall, messages_from_openai
from precis.core.tokens import LettaEstimator
from precis.core.validity import check
from precis.engine.views import (
    display_message,
    head_tail,
    mask_observations,
    read_section,
    sections,
)

NUMBERED = "\n".join(f"line {i}" for i in range(1, 1001))


def test_head_tail_is_none_when_the_text_fits() -> None:
    text = "short\ntext"
    assert head_tail(text, message_id="m", max_chars=len(text), head_lines=1, tail_lines=1) is None


def test_head_tail_shows_first_and_last_lines_around_the_note() -> None:
    view = head_tail(NUMBERED, message_id="msg_1", max_chars=2000, head_lines=5, tail_lines=3)
    assert view is not None
    assert view.split("\n") == [
        "line 1",
        "line 2",
        "line 3",
        "line 4",
        "line 5",
        "[… 992 lines omitted; read_original(msg_1, section) …]",
        "line 998",
        "line 999",
        "line 1000",
    ]


def test_head_tail_cuts_long_lines_to_stay_within_max_chars() -> None:
    text = "\n".join(f"{i}:" + "x" * 5000 for i in range(100))
    view = head_tail(text, message_id="msg_2", max_chars=1000, head_lines=10, tail_lines=10)
    assert view is not None
    assert len(view) <= 1000
    assert view.startswith("0:xxx")
    assert view.endswith("x" * 50)
    assert "lines omitted; read_original(msg_2, section) …]" in view


def test_head_tail_cuts_by_characters_when_there_are_few_lines() -> None:
    text = "a" * 6000 + "\n" + "b" * 6000
    view = head_tail(text, message_id="msg_3", max_chars=1000, head_lines=20, tail_lines=20)
    assert view is not None
    assert len(view) <= 1000
    head, note, tail = view.split("\n")
    assert text.startswith(head) and text.endswith(tail)
    omitted = len(text) - len(head) - len(tail)
    assert note == f"[… {omitted} characters omitted; read_original(msg_3, section) …]"


def test_head_tail_with_a_tiny_limit_is_just_the_note() -> None:
    view = head_tail(NUMBERED, message_id="m", max_chars=10, head_lines=5, tail_lines=5)
    assert view == "[… 1000 lines omitted; read_original(m, section) …]"


SHELL_OUTPUT = "\n".join(
    [
        *(f"<p>row {i}</p>" for i in range(40)),
        "FLAG{found_it}",
        "</body></html>",
        "(Open file: /work/ctf/2016/quals/web/i-got-id/printenv.pl)",
        "(Current directory: /work/ctf/2016/quals/web/i-got-id)",
        "bash-$",
    ]
)


def test_head_tail_shows_the_result_s_tail_before_the_harness_prompt() -> None:
    # The prompt lines a harness prints after every output follow the tail, outside its share:
    # the tail is the result's last lines (the flag), not the prompt's.
    view = head_tail(SHELL_OUTPUT, message_id="m", max_chars=480, head_lines=40, tail_lines=20)
    assert view is not None and len(view) <= 480
    assert "FLAG{found_it}\n</body></html>\n(Open file: /work/ctf/2016/quals/web/i-got" in view
    assert view.endswith("(Current directory: /work/ctf/2016/quals/web/i-got-id)\nbash-$")


def test_head_tail_leaves_out_a_harness_prompt_too_big_for_the_room() -> None:
    # A prompt that would take over a third of the room is left out, and counted as omitted.
    view = head_tail(SHELL_OUTPUT, message_id="m", max_chars=260, head_lines=40, tail_lines=20)
    assert view is not None and len(view) <= 260
    assert view.endswith("FLAG{found_it}\n</body></html>")
    head, rest = view.split("\n[… ", 1)
    note, tail = rest.split(" …]\n", 1)
    omitted = len(SHELL_OUTPUT) - len(head) - len(tail)
    assert note == f"{omitted} characters omitted; read_original(m, section)"


def test_head_tail_keeps_a_last_line_that_is_the_result() -> None:
    # A value in parentheses is output, not a prompt: it stays the tail's last line.
    text = "\n".join([*(f"step {i}" for i in range(200)), "(344, 345)"])
    view = head_tail(text, message_id="m", max_chars=300, head_lines=40, tail_lines=20)
    assert view is not None and view.endswith("step 199\n(344, 345)")


@pytest.mark.property
@given(
    text=st.text(alphabet="ab \n", max_size=3000),
    max_chars=st.integers(0, 2000),
    head=st.integers(0, 30),
    tail=st.integers(0, 30),
)
def test_head_tail_size_property(text: str, max_chars: int, head: int, tail: int) -> None:
    view = head_tail(
        text, message_id="msg_x", max_chars=max_chars, head_lines=head, tail_lines=tail
    )
    if len(text) <= max_chars:
        assert view is None
        return
    assert view is not None
    note_room = len("[… 3000 characters omitted; read_original(msg_x, section) …]")
    assert len(view) <= max(max_chars, note_room)
    assert "omitted; read_original(msg_x, section)" in view


def tool_message(content: str, *, list_content: bool = False) -> Message:
    extra = {"content": [{"type": "text", "text": content}]} if list_content else {}
    return Message(
        id="msg_t",
        role="tool",
        content=content,
        tool_call_id="call_1",
        metadata={"is_error": False},
        openai_extra=extra,
    )


@pytest.mark.parametrize("list_content", [False, True])
def test_display_message_shortens_long_tool_output_keeping_its_id(list_content: bool) -> None:
    message = tool_message(NUMBERED, list_content=list_content)
    shown = display_message(message, max_chars=500, head_lines=3, tail_lines=3)
    assert shown.id == message.id and shown.tool_call_id == "call_1"
    assert shown.content == head_tail(
        NUMBERED, message_id="msg_t", max_chars=500, head_lines=3, tail_lines=3
    )
    assert shown.metadata == {"is_error": False, "shortened_from": len(NUMBERED)}
    assert shown.to_openai()["content"] == shown.content
    assert LettaEstimator().count(shown) < LettaEstimator().count(message)


def test_display_message_leaves_other_messages_alone() -> None:
    short = tool_message("ok")
    assert display_message(short, max_chars=500, head_lines=3, tail_lines=3) is short
    long_user = Message(role="user", content=NUMBERED)
    assert display_message(long_user, max_chars=500, head_lines=3, tail_lines=3) is long_user
    long_tool = tool_message(NUMBERED)
    assert display_message(long_tool, max_chars=None, head_lines=3, tail_lines=3) is long_tool


def turns() -> list[Message]:
    """Three user turns, each with a tool call whose output is 40 lines."""
    out: list[Message] = [Message(id="sum", role="user", kind=KIND_SUMMARY, content="earlier")]
    for t in range(3):
        out.append(Message(id=f"u{t}", role="user", content=f"request {t}"))
        out.append(
            Message(
                id=f"a{t}",
                role="assistant",
                content=f"thinking {t}",
                reasoning=f"why {t}",
                tool_calls=(ToolCall(f"call{t}", f"grep{t}", "{}"),),
            )
        )
        out.append(
            Message(
                id=f"t{t}",
                role="tool",
                content="\n".join(f"out {t}.{i}" for i in range(40)),
                tool_call_id=f"call{t}",
            )
        )
        out.append(Message(id=f"r{t}", role="assistant", content=f"done {t}"))
    return out


def test_masking_replaces_old_outputs_with_a_one_line_placeholder() -> None:
    messages = turns()
    masked = mask_observations(messages, keep_last_turns=1)
    assert [m.id for m in masked] == [m.id for m in messages]
    assert masked[3].content == "[output of grep0 omitted (40 lines); read_original(t0)]"
    assert masked[7].content == "[output of grep1 omitted (40 lines); read_original(t1)]"
    assert masked[3].metadata["masked"] is True
    assert masked[11] is messages[11]  # the last turn is left whole
    for before, after in zip(messages, masked, strict=True):
        if before.role != "tool":
            assert after is before  # calls, assistant text and reasoning stay
    assert check(masked) == []
    assert mask_observations(masked, keep_last_turns=1) == masked


def test_masking_counts_turns_from_user_messages_only() -> None:
    messages = turns()
    assert mask_observations(messages, keep_last_turns=3) == messages
    assert mask_observations(messages, keep_last_turns=5) == messages
    everything = mask_observations(messages, keep_last_turns=0)
    assert all(m.metadata.get("masked") for m in everything if m.role == "tool")
    with pytest.raises(ValueError, match="keep_last_turns"):
        mask_observations(messages, keep_last_turns=-1)


def test_masking_spares_pinned_groups_and_short_outputs() -> None:
    messages = turns()
    messages[2] = replace(messages[2], pinned=True)
    messages[7] = replace(messages[7], content="ok")
    masked = mask_observations(messages, keep_last_turns=1)
    assert masked[3] is messages[3]  # its call is pinned
    assert masked[7] is messages[7]  # shorter than any placeholder


@pytest.mark.parametrize("keep", [1, 3])
@pytest.mark.parametrize("path", TRAJECTORY_FILES, ids=lambda p: p.stem[:50])
def test_masking_keeps_shared_trajectories_valid_and_smaller(path: Path, keep: int) -> None:
    messages = messages_from_openai(trajectory_as_openai(path))
    assert check(messages) == []
    masked = mask_observations(messages, keep_last_turns=keep)
    assert check(masked) == []
    assert [m.tool_calls for m in masked] == [m.tool_calls for m in messages]
    counter = LettaEstimator()
    before = sum(counter.count(m) for m in messages)
    after = sum(counter.count(m) for m in masked)
    assert after <= before
    starts = [i for i, m in enumerate(messages) if m.role == "user"]
    if len(starts) > keep and any(
        m.role == "tool" and len(m.content) > 200 for m in messages[: starts[-keep]]
    ):
        assert after < before


def test_masking_shrinks_the_shared_trajectories_overall() -> None:
    counter = LettaEstimator()
    before = after = 0
    for path in TRAJECTORY_FILES:
        messages = messages_from_openai(trajectory_as_openai(path))
        before += sum(counter.count(m) for m in messages)
        after += sum(counter.count(m) for m in mask_observations(messages, keep_last_turns=1))
    assert after < 0.8 * before


def test_sections_cover_the_text_in_pages() -> None:
    pages = sections(NUMBERED, lines_per_section=300)
    assert [(p.index, p.first_line, p.last_line) for p in pages] == [
        (1, 1, 300),
        (2, 301, 600),
        (3, 601, 900),
        (4, 901, 1000),
    ]
    assert pages[1].preview == "line 301"
    assert sections("") == []
    with pytest.raises(ValueError, match="lines_per_section"):
        sections("x", lines_per_section=0)


def test_read_section_table_of_contents_and_errors() -> None:
    toc = read_section(NUMBERED, None, lines_per_section=300, message_id="msg_9")
    lines = toc.split("\n")
    assert lines[0] == "message msg_9: 1000 lines in 4 sections"
    assert lines[1] == "section 1: lines 1-300: line 1"
    assert lines[4] == "section 4: lines 901-1000: line 901"
    one = read_section(NUMBERED, 2, lines_per_section=300, message_id="msg_9")
    header, body = one.split("\n", 1)
    assert header == "message msg_9, section 2 of 4 (lines 301-600 of 1000):"
    assert body.split("\n")[0] == "line 301" and body.endswith("line 600\n")
    for bad in (0, 5, -1):
        error = read_section(NUMBERED, bad, lines_per_section=300, message_id="msg_9")
        assert error.startswith("error:") and "sections 1 to 4" in error
    assert "empty" in read_section("", 1, message_id="m")


def test_table_of_contents_previews_are_short() -> None:
    text = "\n\n   " + "word " * 100 + "\nrest"
    toc = read_section(text, None, message_id="m")
    assert toc.split("\n")[1] == "section 1: lines 1-4: " + ("word " * 12)[:59] + "…"


@pytest.mark.property
@given(text=st.text(alphabet="ab\n\r é", max_size=2000), per=st.integers(1, 40))
def test_sections_reassemble_the_original_exactly(text: str, per: int) -> None:
    pages = sections(text, lines_per_section=per)
    bodies = []
    for page in pages:
        header, body = read_section(text, page.index, lines_per_section=per).split("\n", 1)
        assert header.startswith(f"the text, section {page.index} of {len(pages)}")
        bodies.append(body)
    assert "".join(bodies) == text


def test_a_long_output_is_cut_once_and_its_view_follows_its_text() -> None:
    """display_message remembers a long output's view by id in the memo it is given; a new text
    under the same id (or another id for the same text) gets a view of its own."""
    memo = Memo()
    first = Message(role="tool", tool_call_id="c1", id="msg_view", content=NUMBERED)
    options: dict[str, Any] = {"max_chars": 2000, "head_lines": 5, "tail_lines": 3}
    view = display_message(first, memo=memo, **options)
    assert memo.entries() == 1
    assert display_message(first, memo=memo, **options) == view
    assert view.content == head_tail(NUMBERED, message_id="msg_view", **options)
    other = replace(first, content=NUMBERED.replace("line", "row"))
    assert display_message(other, memo=memo, **options).content == head_tail(
        other.content, message_id="msg_view", **options
    )
    moved = replace(first, id="msg_moved")
    assert "msg_moved" in display_message(moved, memo=memo, **options).content
    pinned = replace(first, pinned=True)
    assert display_message(pinned, memo=memo, **options).pinned
    assert display_message(first, **options) == view  # without a memo: the same, made again
