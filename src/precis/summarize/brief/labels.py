"""The brief's vocabulary: its sections, their labels in each style and language, their shares.

Also the few patterns that read a brief back (its headings, its phase line, its tool tally).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from precis.summarize.prompts import (
    BRIEF_HEADINGS_EN,
    BRIEF_HEADINGS_ZH,
    NOTES_HEADINGS_EN,
    NOTES_HEADINGS_ZH,
    PHASE_LABEL_EN,
    PHASE_LABEL_ZH,
)

DEFAULT_BRIEF_CHARS: Final = 4000
# Past this a rule-built brief only repeats low-value detail, however large the clip allows:
# the agent's notes and the ranked identifiers fill a clip up to it.
MAX_BRIEF_CHARS: Final = 32000

TASK: Final = "task"
CONSTRAINTS: Final = "constraints"
REQUESTS: Final = "requests"
MODIFIED: Final = "modified"
READ: Final = "read"
IDENTIFIERS: Final = "identifiers"
ERRORS: Final = "errors"
TOOLS: Final = "tools"
STATE: Final = "state"
OPEN: Final = "open"
HINTS: Final = "hints"
# Where the work stands (`brief.state`), the choices made and why, the agent's own notes.
WORK: Final = "work"
NOTES: Final = "notes"
# What the source files the agent read define.
CODE: Final = "code"
# The records the agent's lookups returned (`precis.facts.records`).
RECORDS: Final = "records"
# Sections of the task brief (S3) and the notes (S2); red lines reuse CONSTRAINTS and
# "not done" / "todo" reuse OPEN, so a summary of one style folds into another.
DECISIONS: Final = "decisions"
DONE: Final = "done"
FINDINGS: Final = "findings"
FILES: Final = "files"
PHASE: Final = "phase"

DISPLAY_ORDER: Final = (
    TASK,
    CONSTRAINTS,
    REQUESTS,
    WORK,
    STATE,
    RECORDS,
    OPEN,
    DECISIONS,
    MODIFIED,
    IDENTIFIERS,
    ERRORS,
    NOTES,
    READ,
    CODE,
    TOOLS,
    HINTS,
)
FILL_ORDER: Final = (
    TASK,
    CONSTRAINTS,
    WORK,
    STATE,
    RECORDS,
    DECISIONS,
    NOTES,
    ERRORS,
    MODIFIED,
    REQUESTS,
    IDENTIFIERS,
    OPEN,
    READ,
    TOOLS,
    CODE,
    HINTS,
)

LABELS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "en": MappingProxyType(
            {
                TASK: "Task",
                CONSTRAINTS: "Constraints",
                REQUESTS: "Requests",
                MODIFIED: "Files modified",
                READ: "Files read",
                IDENTIFIERS: "Identifiers",
                ERRORS: "Errors and fixes",
                TOOLS: "Tool activity",
                STATE: "Current state",
                OPEN: "Open items",
                HINTS: "Lookup hints",
                WORK: "Work state",
                DECISIONS: "Decisions",
                NOTES: "Progress notes",
                CODE: "Code read",
                RECORDS: "Records looked up",
                "in": "in",
                "awaiting": "awaiting result",
                "unanswered": "unanswered",
                "earlier": "earlier summary",
                "s_done": "done",
                "s_in_progress": "in progress",
                "s_blocked": "blocked",
                "s_open": "open, not started",
                "s_committed": "committed",
                "last_commit": "last commit",
                "pushed": "pushed",
                "last_push": "Last push",
                "not_committed": "not committed",
                "not_committed_files": "Changed, not committed yet",
                "since": "since",
                "commit_failed": "git commit failed",
                "tests": "Last test run",
                "failed": "failed",
                "also_seen": "also seen",
                "sub_done": "sub-items done",
                "not_acted": "looked up, not yet acted on",
            }
        ),
        "zh": MappingProxyType(
            {
                TASK: "任务",
                CONSTRAINTS: "约束",
                REQUESTS: "请求",
                MODIFIED: "已修改文件",
                READ: "已读文件",
                IDENTIFIERS: "标识符",
                ERRORS: "错误与修复",
                TOOLS: "工具调用",
                STATE: "当前状态",
                OPEN: "待办",
                HINTS: "检索提示",
                WORK: "工作状态",
                DECISIONS: "决定",
                NOTES: "进展记录",
                CODE: "已读代码",
                RECORDS: "查到的记录",
                "in": "目录",
                "awaiting": "等待结果",
                "unanswered": "未回答",
                "earlier": "先前摘要",
                "s_done": "已完成",
                "s_in_progress": "进行中",
                "s_blocked": "受阻",
                "s_open": "未开始",
                "s_committed": "已提交",
                "last_commit": "最近提交",
                "pushed": "已推送",
                "last_push": "最近推送",
                "not_committed": "未提交",
                "not_committed_files": "已改动、尚未提交",
                "since": "自",
                "commit_failed": "git commit 失败",
                "tests": "最近一次测试",
                "failed": "失败",
                "also_seen": "另见",
                "sub_done": "子项已完成",
                "not_acted": "已查询、尚未处理",
            }
        ),
    }
)
_BRIEF_KEYS: Final = (TASK, CONSTRAINTS, DONE, OPEN, FINDINGS, FILES)
_NOTES_KEYS: Final = (TASK, CONSTRAINTS, FINDINGS, DONE, OPEN, DECISIONS)
STYLE_EXTRA: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "en": MappingProxyType(
            {
                PHASE: PHASE_LABEL_EN,
                "confirmed": "confirmed",
                "files": "Files",
                "identifiers": "Identifiers",
                "latest": "Latest",
            }
        ),
        "zh": MappingProxyType(
            {
                PHASE: PHASE_LABEL_ZH,
                "confirmed": "已确认",
                "files": "文件",
                "identifiers": "标识符",
                "latest": "最新",
            }
        ),
    }
)
STYLE_LABELS: Final[Mapping[str, Mapping[str, Mapping[str, str]]]] = MappingProxyType(
    {
        style: MappingProxyType(
            {
                lang: MappingProxyType(
                    {
                        **LABELS[lang],
                        **STYLE_EXTRA[lang],
                        **dict(zip(keys, headings, strict=True)),
                    }
                )
                for lang, headings in (("en", en), ("zh", zh))
            }
        )
        for style, keys, en, zh in (
            ("brief", _BRIEF_KEYS, BRIEF_HEADINGS_EN, BRIEF_HEADINGS_ZH),
            ("notes", _NOTES_KEYS, NOTES_HEADINGS_EN, NOTES_HEADINGS_ZH),
        )
    }
)
STYLE_ORDER: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "letta": (TASK, PHASE, *DISPLAY_ORDER[1:]),
        "brief": (TASK, PHASE, CONSTRAINTS, DONE, OPEN, FINDINGS, FILES),
        "notes": (TASK, PHASE, CONSTRAINTS, FINDINGS, DONE, OPEN, DECISIONS),
    }
)
# Task and red lines first, so a tight clip loses the least vital items.
STYLE_FILL: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "letta": (TASK, PHASE, *FILL_ORDER[1:]),
        "brief": (TASK, PHASE, CONSTRAINTS, OPEN, DONE, FINDINGS, FILES),
        "notes": (TASK, PHASE, CONSTRAINTS, OPEN, FINDINGS, DONE, DECISIONS),
    }
)
SECTION_KEYS: Final = frozenset((*DISPLAY_ORDER, DONE, FINDINGS, FILES, DECISIONS))
HEADING_TO_SECTION: Final[Mapping[str, str]] = MappingProxyType(
    {
        label.lower(): key
        for table in (*LABELS.values(), *(t for s in STYLE_LABELS.values() for t in s.values()))
        for key, label in table.items()
        if key in SECTION_KEYS
    }
)

# First-pass share of the budget per section; a floor keeps task and red lines in tight clips.
SHARES: Final[Mapping[str, float]] = MappingProxyType(
    {
        TASK: 0.3,
        CONSTRAINTS: 0.25,
        MODIFIED: 0.12,
        IDENTIFIERS: 0.08,
        ERRORS: 0.15,
        REQUESTS: 0.15,
        STATE: 0.12,
        READ: 0.08,
        TOOLS: 0.06,
        OPEN: 0.06,
        HINTS: 0.04,
        PHASE: 0.1,
        DONE: 0.2,
        FINDINGS: 0.2,
        FILES: 0.12,
        DECISIONS: 0.1,
        WORK: 0.3,
        NOTES: 0.2,
        CODE: 0.0,
        RECORDS: 0.15,
    }
)
# A small brief (a few thousand characters) is mostly what the work found and did: the task is
# shown by its gist, the rules and requests compactly, and the agent's notes get the most room.
SMALL_BRIEF_CHARS: Final = 3000
SMALL_SHARES: Final[Mapping[str, float]] = MappingProxyType(
    {
        **SHARES,
        TASK: 0.15,
        CONSTRAINTS: 0.2,
        REQUESTS: 0.12,
        STATE: 0.08,
        ERRORS: 0.1,
        DECISIONS: 0.08,
        WORK: 0.2,
        NOTES: 0.35,
        RECORDS: 0.25,
    }
)


SMALL_FILL_ORDER: Final = (
    TASK,
    PHASE,
    CONSTRAINTS,
    WORK,
    STATE,
    RECORDS,
    ERRORS,
    NOTES,
    MODIFIED,
    REQUESTS,
    DECISIONS,
    IDENTIFIERS,
    OPEN,
    READ,
    TOOLS,
)


def shares_for(budget: int) -> Mapping[str, float]:
    """Each section's first-pass share of a brief of `budget` units."""
    return SMALL_SHARES if budget <= SMALL_BRIEF_CHARS else SHARES


FLOORS: Final[Mapping[str, int]] = MappingProxyType({TASK: 60, CONSTRAINTS: 60, PHASE: 120})
LAYOUTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        TASK: "plain",
        STATE: "plain",
        MODIFIED: "inline",
        READ: "inline",
        IDENTIFIERS: "inline",
        HINTS: "inline",
        FILES: "inline",
        PHASE: "bare",
    }
)
MIN_ITEM_UNITS: Final = 48
MAX_HINTS: Final = 100

# Instruction words that name a section the caller cares about most.
INSTRUCTION_SECTIONS: Final = (
    (re.compile(r"(?i)\b(?:task|goal)s?\b|任务|目标"), (TASK,)),
    (re.compile(r"(?i)\bconstraints?\b|\bred[- ]lines?\b|\brules?\b|约束|红线"), (CONSTRAINTS,)),
    (re.compile(r"(?i)\brequests?\b|请求"), (REQUESTS,)),
    (re.compile(r"(?i)\bfiles?\b|\bpaths?\b|文件|路径"), (MODIFIED, READ)),
    (re.compile(r"(?i)\bidentifiers?\b|\bids\b|标识"), (IDENTIFIERS,)),
    (re.compile(r"(?i)\berrors?\b|\bfix(?:es)?\b|错误"), (ERRORS,)),
    (re.compile(r"(?i)\btools?\b|工具"), (TOOLS,)),
    (re.compile(r"(?i)\bcurrent state\b|\bstate\b|当前状态"), (STATE,)),
    (re.compile(r"(?i)\bopen items?\b|\btodos?\b|\bnext steps?\b|待办"), (OPEN,)),
    (re.compile(r"(?i)\b(?:lookup )?hints?\b|检索"), (HINTS,)),
)
# Reading a brief back: its headings (with the project root a file list names), its phase line.
HEADING_RE: Final = re.compile(r"^#{1,4}\s*(.+?)\s*$")
# (It starts where a run of spaces starts: a scan stays linear on a long run of them.)
HEADING_ROOT_RE: Final = re.compile(r"(?<!\s)\s*\((?:in|目录) ([^)]*)\)\s*$")
# A tool's count ("bash×3"): each word, with its count when it has one, so a scan reads a long
# word once (`counts` keeps those with a count).
COUNT_RE: Final = re.compile(r"([^\s,×]+)(?:×(\d+))?")
PHASE_LINE_RE: Final = re.compile(
    rf"^(?:{re.escape(PHASE_LABEL_EN)}|{re.escape(PHASE_LABEL_ZH)})\s*[:：]\s*(.+?)\s*$"
)
# Words as a reader counts them, for S3's word limit.
WORD_RE: Final = re.compile(r"[^\s\u3400-\u9fff]+|[\u3400-\u9fff]")


def labels_for(style: str, language: str) -> Mapping[str, str]:
    if style == "letta":
        return MappingProxyType({**LABELS[language], **STYLE_EXTRA[language]})
    return STYLE_LABELS[style][language]
