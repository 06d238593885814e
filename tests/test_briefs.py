"""Task briefs (S3) and structured notes (S2): headings, red lines, merge policies, prompts."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from scripted import ScriptedProvider

from precis.core.jscompat import utf16_len
from precis.core.messages import Message, ToolCall
from precis.summarize.base import SummaryRequest
from precis.summarize.extractive import ExtractiveSummarizer
from precis.summarize.llm import LLMSummarizer
from precis.summarize.prompts import (
    ALL_PROMPT,
    BRIEF_PROMPT,
    BRIEF_PROMPT_ZH,
    NOTES_PROMPT,
    SLIDING_WINDOW_PROMPT,
)

TASK_EN = "Add a new reporting module under src/reports/. Never touch the legacy/ directory."
RED_EN = "Never touch the legacy/ directory."
TASK_ZH = "给项目加一个报表模块 src/reports/。不许动 legacy/ 目录，只加新模块"
RED_ZH = "不许动 legacy/ 目录，只加新模块"


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


ENGLISH: tuple[Message, ...] = (
    Message(role="user", content=TASK_EN),
    Message(
        role="assistant",
        content="I'll use the existing csv writer for the export.",
        tool_calls=(call("c1", "write_file", path="src/reports/summary.py", content="x = 1"),),
    ),
    Message(role="tool", tool_call_id="c1", content="File created successfully."),
    Message(role="assistant", content="Shall I add a CLI entry point for the report?"),
    Message(role="user", content="Yes, go ahead."),
    Message(
        role="assistant",
        content="",
        tool_calls=(call("c2", "bash", command="pytest -q tests/test_reports.py"),),
    ),
    Message(
        role="tool",
        tool_call_id="c2",
        content="FAILED tests/test_reports.py::test_totals - KeyError: 'total'",
    ),
    Message(role="assistant", content="The totals key was missing; I added it to the export."),
    Message(role="user", content="Please also add a weekly report with charts for issue #17."),
)

CHINESE: tuple[Message, ...] = (
    Message(role="user", content=TASK_ZH),
    Message(
        role="assistant",
        content="我们决定用现有的 csv 写入器。",
        tool_calls=(call("z1", "write_file", path="src/reports/weekly.py", content="y = 2"),),
    ),
    Message(role="tool", tool_call_id="z1", content="File created successfully."),
    Message(role="assistant", content="已经创建了周报模块，测试也通过了。"),
    Message(role="user", content="再加一个月报，端口用 8080，不要改测试文件。"),
)


def extractive(messages: Sequence[Message], **kw: Any) -> str:
    request = SummaryRequest(tuple(messages), **kw)
    return ExtractiveSummarizer().summarize(request)


def headings(text: str) -> list[str]:
    return re.findall(r"^## (.+?)(?: \(.*\))?$", text, re.M)


def section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


# --- extractive: headings, red lines, task ----------------------------------------------------


def test_english_brief_has_the_five_parts_and_keeps_red_lines_and_task() -> None:
    brief = extractive(ENGLISH, style="brief", task=TASK_EN)
    assert headings(brief)[:2] == ["Task", "Red lines"]
    assert {"Done", "Not done", "Key findings", "Files"} <= set(headings(brief))
    assert TASK_EN in section(brief, "Task")
    assert RED_EN in section(brief, "Red lines")
    assert "write_file(src/reports/summary.py)" in section(brief, "Done")
    assert "weekly report" in section(brief, "Not done")
    assert "KeyError" in section(brief, "Key findings")
    assert "src/reports/summary.py" in section(brief, "Files")


def test_english_notes_have_known_done_todo_decisions() -> None:
    notes = extractive(ENGLISH, style="notes", task=TASK_EN)
    assert headings(notes)[:2] == ["Task", "Red lines"]
    assert {"Known", "Done", "Todo", "Decisions"} <= set(headings(notes))
    assert RED_EN in section(notes, "Red lines")
    decisions = section(notes, "Decisions")
    assert "I'll use the existing csv writer" in decisions
    assert "CLI entry point" in decisions and "Yes, go ahead." in decisions
    assert "KeyError" in section(notes, "Known")


def test_chinese_brief_and_notes_use_chinese_headings() -> None:
    brief = extractive(CHINESE, style="brief", task=TASK_ZH)
    assert headings(brief)[:2] == ["任务", "红线"]
    assert {"已完成", "未完成", "文件"} <= set(headings(brief))
    assert RED_ZH in section(brief, "红线") and TASK_ZH in section(brief, "任务")
    assert "不要改测试文件" in section(brief, "红线")
    notes = extractive(CHINESE, style="notes", task=TASK_ZH)
    assert {"任务", "红线", "已知", "已完成", "待办", "决定"} <= set(headings(notes))
    assert RED_ZH in section(notes, "红线")
    assert "我们决定用现有的 csv 写入器" in section(notes, "决定")


def test_the_first_user_message_is_the_task_when_none_is_given() -> None:
    brief = extractive(CHINESE, style="brief")
    assert RED_ZH in brief and "## 任务" in brief


@pytest.mark.parametrize("style", ["brief", "notes", "letta"])
@pytest.mark.parametrize("clip", [300, 800, 2000])
def test_the_clip_is_respected_with_task_and_red_lines_first(style: str, clip: int) -> None:
    for messages, task, red in ((ENGLISH, TASK_EN, RED_EN), (CHINESE, TASK_ZH, RED_ZH)):
        text = extractive(messages * 3, style=style, task=task, clip_chars=clip, phase="setup")
        assert utf16_len(text) <= clip
        assert task in text and red in text
        assert "setup" in text


def test_a_brief_keeps_to_four_hundred_words() -> None:
    long = tuple(
        Message(role="user", content=f"Step {i}: rename field_{i} to column_{i} in models/m{i}.py")
        for i in range(200)
    )
    brief = extractive(long, style="brief", task=TASK_EN, clip_chars=16000)
    assert len(brief.split()) <= 400 and TASK_EN in brief


# --- merge policies ---------------------------------------------------------------------------


def items(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("## ")]


@pytest.mark.parametrize("style", ["brief", "notes"])
def test_anchored_keeps_every_previous_item_verbatim_and_adds_new_ones(style: str) -> None:
    previous = extractive(ENGLISH[:5], style=style, task=TASK_EN)
    newer = (
        Message(role="user", content="Now export the report as PDF to out/report.pdf please."),
        Message(role="assistant", content="Let's go with reportlab for the PDF export."),
    )
    merged = extractive(
        newer, style=style, merge="anchored", task=TASK_EN, previous_summary=previous
    )
    for line in items(previous):
        assert line in merged.splitlines()
    assert "export the report as PDF" in merged
    assert merged.count(RED_EN) == previous.count(RED_EN)
    assert section(merged, "Task").strip() == TASK_EN


def test_anchored_counts_a_previous_summary_in_the_span_once() -> None:
    previous = extractive(ENGLISH[:5], style="brief", task=TASK_EN)
    packed = Message(role="user", content="…", kind="summary", metadata={"summary": previous})
    span = (packed, Message(role="user", content="Also add a monthly report for finance team."))
    merged = extractive(span, style="brief", merge="anchored", previous_summary=previous)
    assert merged.count(RED_EN) == previous.count(RED_EN)
    assert "monthly report" in merged
    for line in items(previous):
        assert line in merged.splitlines()


def test_anchored_keeps_an_unstructured_previous_summary_whole() -> None:
    previous = "The user wants reports. Port 8080 is reserved for the dashboard."
    newer = (Message(role="user", content="Add a yearly report to the module, with totals."),)
    merged = extractive(newer, style="notes", merge="anchored", previous_summary=previous)
    assert previous in merged and "yearly report" in merged


def test_regenerate_rebuilds_from_task_previous_brief_and_new_messages() -> None:
    previous = extractive(ENGLISH, style="brief", task=TASK_EN)
    newer = (
        Message(role="user", content="Also keep the public API stable: do not rename functions."),
        Message(role="assistant", content="Understood, the API stays as it is."),
    )
    rebuilt = extractive(newer, style="brief", task=TASK_EN, previous_summary=previous)
    assert TASK_EN in rebuilt and RED_EN in section(rebuilt, "Red lines")
    assert "do not rename functions" in section(rebuilt, "Red lines")
    assert "src/reports/summary.py" in rebuilt


def test_regenerate_carries_chinese_red_lines_through_many_rounds() -> None:
    summary: str | None = None
    for round_ in range(5):
        span = (Message(role="user", content=f"第 {round_} 步：继续写报表的第 {round_} 部分。"),)
        summary = extractive(
            span, style="brief", task=TASK_ZH, previous_summary=summary, clip_chars=800
        )
        assert RED_ZH in summary and TASK_ZH in summary


def test_the_phase_name_appears_in_every_style_and_policy() -> None:
    previous = extractive(ENGLISH[:3], style="brief", task=TASK_EN)
    for style in ("letta", "brief", "notes"):
        for merge in ("regenerate", "anchored"):
            text = extractive(
                ENGLISH[3:],
                style=style,
                merge=merge,
                task=TASK_EN,
                previous_summary=previous,
                phase="data model",
            )
            assert "Phase completed: data model" in text


def test_a_previous_phase_is_carried_into_the_next_summary() -> None:
    first = extractive(ENGLISH[:3], style="brief", task=TASK_EN, phase="scaffold")
    second = extractive(ENGLISH[3:], style="brief", task=TASK_EN, previous_summary=first)
    assert "Phase completed: scaffold" in second


def test_defaults_keep_the_letta_brief() -> None:
    plain = extractive(ENGLISH)
    assert plain == extractive(ENGLISH, style="letta", merge="regenerate")
    assert "## Constraints" in plain and "## Red lines" not in plain


# --- the model-backed summarizer --------------------------------------------------------------


def llm(provider: ScriptedProvider, messages: Sequence[Message], **kw: Any) -> str:
    summarizer = LLMSummarizer(provider, prompt=kw.pop("prompt", None))
    return summarizer.summarize(SummaryRequest(tuple(messages), **kw))


def test_llm_defaults_send_todays_prompts_and_transcript() -> None:
    provider = ScriptedProvider("a", "b")
    assert llm(provider, ENGLISH) == "a"
    assert provider.sent[0][0]["content"] == SLIDING_WINDOW_PROMPT
    assert provider.sent[0][1]["content"].startswith(" \n[user] Add a new reporting module")
    llm(provider, ENGLISH, mode="all")
    assert provider.sent[1][0]["content"] == ALL_PROMPT


def test_llm_brief_sends_the_brief_prompt_task_and_previous_summary() -> None:
    provider = ScriptedProvider(f"## Task\n{TASK_EN}\n## Red lines\n- {RED_EN}")
    llm(provider, ENGLISH[3:], style="brief", task=TASK_EN, previous_summary="OLD BRIEF TEXT")
    system, transcript = (m["content"] for m in provider.sent[0])
    assert system.startswith(BRIEF_PROMPT) and "word for word" in system
    assert "Rebuild the whole summary" in system
    assert transcript.startswith(f"Task: {TASK_EN}\n\nPrevious summary:\nOLD BRIEF TEXT\n")
    assert transcript.count("OLD BRIEF TEXT") == 1


def test_llm_notes_prompt_and_previous_summary_in_the_span_counted_once() -> None:
    packed = Message(role="user", content="…", kind="summary", metadata={"summary": "OLD NOTES"})
    provider = ScriptedProvider("notes")
    llm(provider, (packed, *ENGLISH[3:]), style="notes", previous_summary="OLD NOTES")
    system, transcript = (m["content"] for m in provider.sent[0])
    assert system.startswith(NOTES_PROMPT)
    assert transcript.count("OLD NOTES") == 1


def test_llm_anchored_gives_the_previous_summary_in_the_prompt() -> None:
    provider = ScriptedProvider("merged")
    llm(provider, ENGLISH[3:], style="brief", merge="anchored", previous_summary="OLD ITEMS")
    system, transcript = (m["content"] for m in provider.sent[0])
    assert "OLD ITEMS" in system and "section by section" in system
    assert "OLD ITEMS" not in transcript


def test_llm_chinese_span_gets_chinese_headings() -> None:
    provider = ScriptedProvider("摘要")
    llm(provider, CHINESE, style="brief", task=TASK_ZH)
    system = provider.sent[0][0]["content"]
    assert system.startswith(BRIEF_PROMPT_ZH)
    for heading in ("已完成", "未完成", "关键发现", "文件", "红线"):
        assert heading in system


def test_llm_adds_the_task_and_phase_when_the_model_drops_them() -> None:
    provider = ScriptedProvider("## Done\n- nothing much")
    out = llm(provider, ENGLISH, style="brief", task=TASK_EN, phase="scaffold")
    assert TASK_EN in out and "Phase completed: scaffold" in out
    assert 'Phase completed: scaffold"' in provider.sent[0][0]["content"]


def test_llm_custom_prompt_replaces_the_built_in_one() -> None:
    provider = ScriptedProvider("mine", "theirs")
    llm(provider, ENGLISH, style="brief", task=TASK_EN, instructions="ONLY MY PROMPT")
    assert provider.sent[0][0]["content"] == "ONLY MY PROMPT"
    assert provider.sent[0][1]["content"].startswith(f"Task: {TASK_EN}")
    llm(provider, ENGLISH, style="notes", prompt="CONSTRUCTOR PROMPT")
    assert provider.sent[1][0]["content"] == "CONSTRUCTOR PROMPT"


def test_an_item_shown_by_the_guards_words_is_not_widened_into_a_cut() -> None:
    """A task shown by the guard's words for it (a whole shorter form) is given back more of
    its text only as a longer whole form: a head+tail cut of the gist would lose those words,
    and the guard would add them again, cutting the brief's tail."""
    from precis.summarize.brief.fill import _Brief
    from precis.summarize.brief.items import Item
    from precis.summarize.brief.labels import TASK, labels_for

    words = "We're solving the following issue. Here's the issue text: ISSUE: precision is lost"
    gist = f"{words} … " + " ".join(f"sentence {i} of the issue." for i in range(40))
    longer = f"{words} … sentence 0 of the issue."
    brief = _Brief(2000, labels_for("letta", "en"), "")
    item = Item(gist, 0, variants=(longer, words), must=0)
    brief.add_section(TASK, [item])
    section = brief.sections[TASK]
    brief._try_item(section, item, utf16_len(words) + 20)
    assert item.shown == words
    brief._widen(section, item, 300)
    assert item.shown == longer  # the longer whole form that fits, not a cut of the gist
    brief._widen(section, item, 2000)
    assert item.shown == longer  # no longer whole form: as it was
    plain = Item(gist, 1, variants=(words,))
    brief.add_section("notes", [plain])
    brief._try_item(brief.sections["notes"], plain, utf16_len(words) + 20)
    brief._widen(brief.sections["notes"], plain, brief.used + 200)
    assert plain.shown != words and "…" in plain.shown  # no fact at stake: a cut may widen it
