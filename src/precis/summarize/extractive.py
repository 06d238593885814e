"""The embedded default summarizer: a brief built by rule from the span, with no model (S2/S3).

It keeps what a model most often drops (requests and red lines verbatim, paths, identifiers,
errors with their fixes) and plans its own size, so the engine's blunt clip never has to cut it.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from precis.core.jscompat import utf16_len
from precis.core.messages import Message
from precis.summarize.base import (
    LocalSummarizer,
    SummaryRequest,
    earlier_summary_text,
    split_previous,
)
from precis.summarize.packaging import NO_MESSAGES_SUMMARY
from precis.summarize.prompts import (
    BRIEF_HEADINGS_EN,
    BRIEF_HEADINGS_ZH,
    BRIEF_WORD_LIMIT,
    NOTES_HEADINGS_EN,
    NOTES_HEADINGS_ZH,
    PHASE_LABEL_EN,
    PHASE_LABEL_ZH,
    phase_line,
)

DEFAULT_BRIEF_CHARS: Final = 4000
# Past this a rule-built brief only repeats low-value detail, however large the clip allows.
MAX_BRIEF_CHARS: Final = 16000

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
# Sections of the task brief (S3) and the notes (S2); red lines reuse CONSTRAINTS and
# "not done" / "todo" reuse OPEN, so a summary of one style folds into another.
DONE: Final = "done"
FINDINGS: Final = "findings"
FILES: Final = "files"
DECISIONS: Final = "decisions"
PHASE: Final = "phase"

DISPLAY_ORDER: Final = (
    TASK,
    CONSTRAINTS,
    REQUESTS,
    MODIFIED,
    READ,
    IDENTIFIERS,
    ERRORS,
    TOOLS,
    STATE,
    OPEN,
    HINTS,
)
FILL_ORDER: Final = (
    TASK,
    CONSTRAINTS,
    MODIFIED,
    IDENTIFIERS,
    ERRORS,
    REQUESTS,
    STATE,
    READ,
    TOOLS,
    OPEN,
    HINTS,
)

_LABELS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
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
                "in": "in",
                "awaiting": "awaiting result",
                "unanswered": "unanswered",
                "earlier": "earlier summary",
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
                "in": "目录",
                "awaiting": "等待结果",
                "unanswered": "未回答",
                "earlier": "先前摘要",
            }
        ),
    }
)
_BRIEF_KEYS: Final = (TASK, CONSTRAINTS, DONE, OPEN, FINDINGS, FILES)
_NOTES_KEYS: Final = (TASK, CONSTRAINTS, FINDINGS, DONE, OPEN, DECISIONS)
_STYLE_EXTRA: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
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
_STYLE_LABELS: Final[Mapping[str, Mapping[str, Mapping[str, str]]]] = MappingProxyType(
    {
        style: MappingProxyType(
            {
                lang: MappingProxyType(
                    {
                        **_LABELS[lang],
                        **_STYLE_EXTRA[lang],
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
_STYLE_ORDER: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "letta": (TASK, PHASE, *DISPLAY_ORDER[1:]),
        "brief": (TASK, PHASE, CONSTRAINTS, DONE, OPEN, FINDINGS, FILES),
        "notes": (TASK, PHASE, CONSTRAINTS, FINDINGS, DONE, OPEN, DECISIONS),
    }
)
# Task and red lines first, so a tight clip loses the least vital items.
_STYLE_FILL: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "letta": (TASK, PHASE, *FILL_ORDER[1:]),
        "brief": (TASK, PHASE, CONSTRAINTS, OPEN, DONE, FINDINGS, FILES),
        "notes": (TASK, PHASE, CONSTRAINTS, OPEN, FINDINGS, DONE, DECISIONS),
    }
)
_SECTION_KEYS: Final = frozenset((*DISPLAY_ORDER, DONE, FINDINGS, FILES, DECISIONS))
_HEADING_TO_SECTION: Final[Mapping[str, str]] = MappingProxyType(
    {
        label.lower(): key
        for table in (*_LABELS.values(), *(t for s in _STYLE_LABELS.values() for t in s.values()))
        for key, label in table.items()
        if key in _SECTION_KEYS
    }
)

# First-pass share of the budget per section; a floor keeps task and red lines in tight clips.
_SHARES: Final[Mapping[str, float]] = MappingProxyType(
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
        DECISIONS: 0.15,
    }
)
_FLOORS: Final[Mapping[str, int]] = MappingProxyType({TASK: 60, CONSTRAINTS: 60, PHASE: 120})
_LAYOUTS: Final[Mapping[str, str]] = MappingProxyType(
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
_ELLIPSIS: Final = " … "
_MIN_ITEM_UNITS: Final = 32
_MAX_SYSTEM_CONSTRAINTS: Final = 8
_MAX_IDENTIFIER_UNITS: Final = 160
_RECENT_CALLS: Final = 5
_RECENT_TODOS: Final = 6
_MAX_HINTS: Final = 100

# Instruction words that name a section the caller cares about most.
_INSTRUCTION_SECTIONS: Final = (
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

# --- what the rules look for ------------------------------------------------------------------

_CONSTRAINT_EN_RE: Final = re.compile(
    r"(?i)\b(?:don['’]?t|do not|never|must(?:n['’]t| not)?|only|always|instead of|avoid|"
    r"without|required?|requires)\b"
)
_STRONG_CONSTRAINT_RE: Final = re.compile(
    r"(?i)\b(?:don['’]?t|do not|never|must not|mustn['’]t|avoid|instead of)\b"
    r"|不要|禁止|不能|别|务必|不许|不准|不得|严禁|切勿"
)
_CONSTRAINT_ZH_RE: Final = re.compile(
    r"不要|禁止|必须|只能|不能|务必|不许|不准|不得|严禁|切勿|"
    r"(?<![特区分识类级性告辨差派个鉴])别(?![人的名处墅])"
)
# "I don't have / know / remember …" describes the speaker; it sets no rule.
_SELF_REPORT_RE: Final = re.compile(
    r"(?i)\b(?:I|we)(?:['’]m| am| are)? (?:do not|don['’]?t|not) (?:have|know|remember|recall|see|"
    r"think|understand|mind|care|sure)\b"
)
_ACK_RE: Final = re.compile(
    r"(?i)^(?:thanks?|thank you|ok(?:ay)?|great|perfect|yes|no|sure|continue|go on|proceed)\b"
)
_SENTENCE_SPLIT_RE: Final = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
_CJK_RE: Final = re.compile(r"[\u3400-\u9fff]")
_LATIN_RE: Final = re.compile(r"[A-Za-z]")
_REMINDER_RE: Final = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_COMMAND_RE: Final = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
_COMMAND_ARGS_RE: Final = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# User-role turns an agent harness writes itself; they are not requests.
_NOTICE_PREFIXES: Final = (
    "<task-notification>",
    "<local-command-",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "[Request interrupted",
    "Base directory for this skill",
    "Caveat: The messages below",
)

_URL_RE: Final = re.compile(r"https?://[^\s<>\"'`()\[\]{}|$]+")
_PATH_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_@+.\-/~:\\*])"
    r"(?:(?P<slash>(?:~/|\.\.?/|/)?(?:[A-Za-z0-9_@+.\-]+/)+[A-Za-z0-9_@+.\-]*)"
    r"|(?P<bare>[A-Za-z0-9_\-][A-Za-z0-9_@+.\-]*\.(?:py|pyi|ipynb|js|jsx|mjs|cjs|ts|tsx|json|"
    r"jsonl|ya?ml|toml|ini|cfg|conf|md|rst|txt|csv|tsv|html?|css|scss|sh|bash|zsh|ex|exs|"
    r"heex|eex|erl|go|rs|rb|java|kt|kts|c|h|cc|cpp|hpp|cs|swift|php|sql|lock|xml|pony|lua|vue|"
    r"svelte|gradle|proto|dockerfile|mk|cmake|patch|diff)))"
    r"(?![A-Za-z0-9_\-])"
)
# Build products and caches: never what the work was about.
_BUILD_OUTPUT_RE: Final = re.compile(
    r"(?:^|/)(?:_build|node_modules|__pycache__|\.git|\.mypy_cache|\.pytest_cache)(?:/|$)"
    r"|\.(?:beam|pyc|o|so|class|plt)$"
)
_PATH_EXT_RE: Final = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_SYSTEM_DIRS: Final = frozenset({"home", "tmp", "usr", "etc", "var", "dev", "proc", "opt", "Users"})
_SOURCE_DIRS: Final = frozenset(
    [
        "lib",
        "src",
        "test",
        "tests",
        "app",
        "apps",
        "assets",
        "config",
        "priv",
        "docs",
        "doc",
        "spec",
        "pkg",
        "cmd",
        "internal",
        "include",
        "scripts",
        "bin",
        "packages",
        "node_modules",
        "deps",
        "_build",
        "build",
        "dist",
        "target",
    ]
)
_OPEN_FILE_RE: Final = re.compile(r"\(Open file: ([^)\s]+)\)")
_PATCH_FILE_RE: Final = re.compile(
    r"(?m)^(?:\*\*\* (?:Add|Update|Delete) File: (\S+)|\+\+\+ b/(\S+))"
)
_WROTE_MARK_RE: Final = re.compile(
    r"(?i)\b(?:created file|file created|has been (?:updated|edited|modified|created|written|"
    r"overwritten)|successfully (?:created|wrote|written|updated|modified)|"
    r"wrote \d+ (?:lines|bytes)|file updated)\b"
)
_HEREDOC_RE: Final = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n.*?\n\s*\1\b", re.DOTALL)
_QUOTED_RE: Final = re.compile(r"'[^']*'|\"[^\"]*\"")
_SED_INPLACE_RE: Final = re.compile(
    r"\bsed\s+(?:[^|;&\n]*?\s)?(?:-[A-Za-z]*i[A-Za-z]*|--in-place)\b[^|;&\n]*"
)
_REDIRECT_RE: Final = re.compile(r"(?<![<>&0-9])>>?\s*([^\s;&|<>()'\"]+)")
_TEE_TOUCH_RE: Final = re.compile(r"\b(?:tee(?:\s+-a)?|touch)\s+([^;&|<>\n]+)")
_MOVE_RE: Final = re.compile(r"\b(?:mv|cp)\s+(?:-\w+\s+)*\S+\s+([^\s;&|<>]+)")
_FINAL_TOOL_RE: Final = re.compile(r"(?i)finish|submit|complete|final_answer")
_READ_SHELL_RE: Final = re.compile(r"^\s*(?:cat|head|tail|nl|less|more|bat)\b")

_WRITE_TOOL_RE: Final = re.compile(
    r"(?i)write|edit|create|str_replace|apply_patch|patch|insert|append|replace|save|undo"
)
_READ_TOOLS: Final = frozenset(
    [
        "read",
        "read_file",
        "view",
        "view_file",
        "open",
        "open_file",
        "goto",
        "scroll_up",
        "scroll_down",
        "glob",
        "grep",
        "search",
        "find",
        "find_file",
        "search_file",
        "search_dir",
        "ls",
        "list",
        "list_dir",
        "webfetch",
        "websearch",
    ]
)
_SHELL_TOOLS: Final = frozenset(
    {"bash", "shell", "execute_bash", "terminal", "run", "exec", "sh", "run_command", "cmd"}
)
_EDITOR_COMMANDS: Final = frozenset(
    {"view", "create", "str_replace", "insert", "undo_edit", "write", "edit", "append", "delete"}
)
_PATH_KEYS: Final = frozenset(
    [
        "path",
        "file_path",
        "filepath",
        "file",
        "filename",
        "file_name",
        "notebook_path",
        "target_file",
        "paths",
        "files",
    ]
)
# Argument keys holding file bodies rather than names: scanned, but not as "read".
_BODY_KEYS: Final = frozenset(
    [
        "content",
        "contents",
        "new_str",
        "old_str",
        "new_string",
        "old_string",
        "file_text",
        "text",
        "patch",
        "input",
        "code",
        "edits",
    ]
)
_SUMMARY_ARG_KEYS: Final = (
    "command",
    "cmd",
    "file_path",
    "path",
    "pattern",
    "query",
    "url",
    "description",
    "thought",
)
_ID_KEY_RE: Final = re.compile(r"(?i)(?:^|_)(?:id|ids|number|num|code|no)$")
_ID_VALUE_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{2,63}$")

# Identifiers are classified token by token: one anchored match per token that holds a digit,
# which is many times faster than one big alternation tried at every character.
_TOKEN_ID_RE: Final = re.compile(
    r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"|(?P<hash>(?=[0-9a-f]{0,39}[a-f])(?=[0-9a-f]{0,39}\d)[0-9a-f]{7,40})"
    r"|(?P<version>v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.]+)?|v\d+\.\d+)"
    r"|(?P<code>(?=[A-Z]{0,5}\d)(?=\d{0,5}[A-Z])[A-Z0-9]{6})"
    r"|(?P<jira>(?P<jira_p>[A-Z][A-Z0-9]{1,9})-\d{1,6})"
    r"|(?P<ticket>#\d{1,6}|[a-z][a-z0-9]+-[a-z0-9]{2,6}(?:\.\d{1,4})+)"
    r"|(?P<pr>(?:PR|pr)-?#?(?P<pr_n>\d{1,6}))"
    r"|(?P<port>(?:--?)?(?:port|Port|PORT)[:=](?P<port_n>\d{2,5}))"
    r"|(?P<hostport>(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]):(?P<hostport_n>\d{2,5})(?:/\S*)?)"
)
_PORT_AFTER_RE: Final = re.compile(r"(\d{2,5})(?::\d{2,5})?")
_NUMBER_AFTER_RE: Final = re.compile(r"#?(\d{1,6})")
_PORT_WORDS: Final = frozenset({"port", "--port", "-p", "ports", "pgport"})
_TICKET_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {"pr": "PR", "request": "PR", "issue": "issue", "ticket": "ticket"}
)
_TOKEN_STRIP: Final = "()[]{}<>,;:'\"`.!?*"
_SUBTOKEN_SPLIT_RE: Final = re.compile(r"[/=,;()\[\]{}'\"`|]+")
_NON_ASCII_RE: Final = re.compile(r"[^\x21-\x7e]+")
_DIGIT_RE: Final = re.compile(r"\d")
_EMAIL_RE: Final = re.compile(
    r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
)
_ZH_PORT_RE: Final = re.compile(r"端口\D{0,6}?(\d{2,5})")
# Kinds worth listing even when seen only once, and only in tool output.
_TELLING_KINDS: Final = frozenset({"url", "port", "email", "pr", "commit"})
_JIRA_STOP: Final = frozenset(
    {"UTF", "SHA", "ISO", "AES", "GPT", "MD", "TLS", "SSL", "HTTP", "RSA", "CP", "ASCII", "X"}
)
_URL_PORT_RE: Final = re.compile(r"^https?://[^/:]+:(\d{2,5})\b")

_NUMBERED_LINE_RE: Final = re.compile(r"^\s*\d+(?:→|\t|:\s|\s\|)")
_CODE_LINE_RE: Final = re.compile(
    r"^\s*(?:raise|except|catch|throw|import|from|class|def|rescue|assert_raise|@|#|//)\b"
    r"|\b(?:raise|except|catch|throw|rescue|assert_raise)\s+[\w.]*(?:Error|Exception)"
)
_ERROR_STRONG_RE: Final = re.compile(
    r"\bFAILED\b|\b(?:[Ee]rror|ERROR|fatal|FATAL|panic)(?:\[[\w\-]+\])?:|\bpanicked at\b|"
    r"<tool_use_error>|\bSegmentation fault\b|\bcommand not found\b|\bNo such file or directory\b"
)
_ERROR_MARK_RE: Final = re.compile(
    r"rror|ERROR|xception|FAILED|fatal|FATAL|panic|tool_use_error|Segmentation fault|"
    r"command not found|No such file"
)
_ERROR_CLASS_RE: Final = re.compile(r"\b[A-Z][\w.]*(?:Error|Exception)\b")
_ERROR_TAG_RE: Final = re.compile(r"</?tool_use_error>")
_ERROR_PREFIX_RE: Final = re.compile(r"^E\s+")
_TODO_RE: Final = re.compile(
    r"(?i)\b(?:TODO|FIXME)\b|^\s*[-*]\s*\[ \]|\bnext steps?\b|\bstill (?:need|needs|needed|to do)\b"
)
_DIGITS_RE: Final = re.compile(r"\d+")
_HEADING_RE: Final = re.compile(r"^#{1,4}\s*(.+?)\s*$")
_HEADING_ROOT_RE: Final = re.compile(r"\s*\((?:in|目录) ([^)]*)\)\s*$")
_COUNT_RE: Final = re.compile(r"([^\s,×]+)×(\d+)")
_PHASE_LINE_RE: Final = re.compile(
    rf"^(?:{re.escape(PHASE_LABEL_EN)}|{re.escape(PHASE_LABEL_ZH)})\s*[:：]\s*(.+?)\s*$"
)
_DECISION_RE: Final = re.compile(
    r"(?i)\b(?:I['’]ll (?:use|go with|switch to|keep|stick with)|I will (?:use|go with|switch to)|"
    r"we(?:['’]ll| will) (?:use|go with|switch to|keep)|we(?:['’]ve| have)? decided|decided to|"
    r"let['’]s (?:go with|use|switch to|stick with|keep)|going with|I chose|we chose|opted for|"
    r"settled on)\b|决定|就用|改用|采用|选用|我们用|我会用"
)
_CONFIRM_RE: Final = re.compile(
    r"(?i)^\s*(?:yes|yep|yeah|ok(?:ay)?|sure|agreed|sounds good|go ahead|do it|approved|lgtm|"
    r"confirmed|please do)\b|^\s*(?:好的?|可以|行|同意|没问题|就这样|就这么办|确认)"
)
_MAX_CONFIRM_UNITS: Final = 80
_RECENT_DONE_CALLS: Final = 5
_WORD_RE: Final = re.compile(r"[^\s\u3400-\u9fff]+|[\u3400-\u9fff]")


# --- small text helpers -----------------------------------------------------------------------


def _one_line(text: str) -> str:
    """Collapse whitespace, so each fact is one dense line."""
    return " ".join(text.split())


def _head(text: str, units: int) -> str:
    """The longest prefix within `units` UTF-16 units, never splitting a surrogate pair."""
    if units <= 0:
        return ""
    if text.isascii():
        return text[:units]
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            return text[:i]
    return text


def _tail(text: str, units: int) -> str:
    """The longest suffix within `units` UTF-16 units, never splitting a surrogate pair."""
    if units <= 0:
        return ""
    if text.isascii():
        return text[-units:]
    used = 0
    for i in range(len(text) - 1, -1, -1):
        used += 2 if ord(text[i]) > 0xFFFF else 1
        if used > units:
            return text[i + 1 :]
    return text


def _shorten(text: str, units: int, keep: Sequence[str] = ()) -> str:
    """Head and tail around an ellipsis, keeping `keep` sentences from the middle when they fit.

    `keep` is in order of importance; together the kept sentences take at most half the room.
    """
    if utf16_len(text) <= units:
        return text
    if units < 12:
        return _head(text, units)
    kept = [k for k in keep if k and k in text]
    while kept and sum(utf16_len(k) + 3 for k in kept) > units // 2:
        kept.pop()
    kept.sort(key=text.find)
    spare = units - sum(utf16_len(k) for k in kept) - utf16_len(_ELLIPSIS) * (len(kept) + 1)
    head_units = (spare * 2) // 3
    head = _head(text, head_units).rstrip()
    tail = _tail(text, spare - head_units).lstrip()
    middle = [k for k in kept if k not in head and k not in tail]
    return _ELLIPSIS.join([head, *middle, tail])


def _is_trivial(request: str) -> bool:
    """A short acknowledgement ("thanks, that's all", "continue") rather than a request."""
    words = len(request.split())
    if words < 6 and not _CJK_RE.search(request):
        return True
    return words < 12 and _ACK_RE.search(request) is not None and not _DIGIT_RE.search(request)


def _by_strength(sentences: Iterable[str]) -> list[str]:
    """Outright prohibitions first (never, don't, 不要), then the softer rules, each in order."""
    return sorted(sentences, key=lambda s: _STRONG_CONSTRAINT_RE.search(s) is None)


def _is_chinese(texts: Iterable[str]) -> bool:
    """Whether Chinese dominates the user's words (a CJK character is worth about a word)."""
    cjk = latin = 0
    for text in texts:
        cjk += len(_CJK_RE.findall(text))
        latin += len(_LATIN_RE.findall(text))
    return cjk > 0 and cjk * 3 >= latin


def _constraint_sentences(text: str) -> list[str]:
    """The sentences of `text` that state a rule (don't / never / must / 不要 …), verbatim."""
    found: list[str] = []
    for piece in _SENTENCE_SPLIT_RE.split(text):
        sentence = _one_line(piece.strip().lstrip("-*•>#").strip())
        if len(sentence) < 6:
            continue
        bare = _SELF_REPORT_RE.sub(" ", sentence)
        if _CONSTRAINT_EN_RE.search(bare) or _CONSTRAINT_ZH_RE.search(bare):
            found.append(sentence)
    return found


def _clean_user_text(text: str) -> str | None:
    """A user turn as the user wrote it, or None for a notice the agent harness injected."""
    text = _REMINDER_RE.sub("", text).strip()
    if not text or text.startswith(_NOTICE_PREFIXES):
        return None
    command = _COMMAND_RE.search(text)
    if command is not None and text.startswith("<command-"):
        args = _COMMAND_ARGS_RE.search(text)
        spoken = f"{command.group(1).strip()} {args.group(1).strip() if args else ''}"
        return spoken.strip() or None
    return text


def _clean_path(raw: str, *, prose: bool = False) -> str | None:
    """A path candidate kept only when it looks like a file or directory, not prose like and/or.

    In prose a relative path needs a file extension; in tool arguments three segments will do.
    """
    path = raw.rstrip(".,;:)]}'\"`").rstrip("/")
    if path.startswith(("a/", "b/")) and path.count("/") >= 2:
        path = path[2:]  # a diff's a/ and b/ sides name the same file
    if not path or "//" in path or path.startswith(("/dev/", "/proc/")):
        return None
    if _BUILD_OUTPUT_RE.search(path):
        return None
    if not any(ch.isalpha() for ch in path):
        return None
    segments = [s for s in path.split("/") if s]
    if not segments:
        return None
    has_ext = _PATH_EXT_RE.search(segments[-1]) is not None
    if "/" not in path:
        return path if has_ext else None
    anchored = path.startswith(("/", "~/", "./", "../"))
    if anchored:
        return path if len(segments) >= 2 or has_ext else None
    return path if has_ext or (len(segments) >= 3 and not prose) else None


def _paths_in(text: str, *, prose: bool = False) -> Iterator[str]:
    """Every file path mentioned in `text`, URLs aside."""
    for kind, key, _ in _terms_in(text, prose=prose):
        if kind == "path":
            yield key


def _port(number: str) -> Iterator[tuple[str, str, str]]:
    if 0 < int(number) <= 65535:
        yield "port", f"port {number}", f"port {number}"


def _token_identifiers(token: str, previous: str) -> Iterator[tuple[str, str, str]]:
    """`(kind, key, label)` for an identifier a whitespace token holds, given the word before."""
    if token.startswith(":"):
        bare = token[1:].rstrip(_TOKEN_STRIP)
        if bare.isdigit() and 4 <= len(bare) <= 5:
            yield from _port(bare)
        return
    core = token.strip(_TOKEN_STRIP)
    word = previous.lower().strip(_TOKEN_STRIP + "=#")
    if word in _PORT_WORDS and (after := _PORT_AFTER_RE.fullmatch(core)) is not None:
        yield from _port(after.group(1))
        return
    if word in _TICKET_WORDS and (number := _NUMBER_AFTER_RE.fullmatch(core)) is not None:
        yield "pr", f"#{number.group(1)}", f"{_TICKET_WORDS[word]} {number.group(1)}"
        return
    match = _TOKEN_ID_RE.fullmatch(core)
    if match is None:
        # "s/1.2.3/1.2.4/", "version=2.0.1", "(#12)": look at the pieces between separators.
        pieces = _SUBTOKEN_SPLIT_RE.split(core)
        if len(pieces) > 1:
            for piece in pieces:
                if piece and _DIGIT_RE.search(piece) is not None:
                    yield from _token_identifiers(piece, "")
        return
    kind = match.lastgroup or ""
    if kind == "port" or kind == "hostport":
        yield from _port(match.group("port_n") or match.group("hostport_n"))
    elif kind == "pr":
        yield "pr", f"#{match.group('pr_n')}", f"PR {match.group('pr_n')}"
    elif kind == "jira" and match.group("jira_p") in _JIRA_STOP:
        return
    elif kind == "hash" and previous.startswith("[") and token.endswith("]"):
        yield "commit", core, core  # git's "[branch abc1234] message" after a commit
    else:
        yield kind, core, core


def _terms_in(text: str, *, prose: bool = True) -> Iterator[tuple[str, str, str]]:
    """`(kind, key, label)` for each path ("path") and identifier (URL, port, ticket, hash …)."""
    if "://" in text:
        for match in _URL_RE.finditer(text):
            url = match.group(0).rstrip(".,;:!?")
            if utf16_len(url) <= _MAX_IDENTIFIER_UNITS:
                yield "url", url, url
            port = _URL_PORT_RE.match(url)
            if port is not None:
                yield from _port(port.group(1))
        text = _URL_RE.sub(" ", text)
    if "端口" in text:
        for match in _ZH_PORT_RE.finditer(text):
            yield from _port(match.group(1))
    previous = ""
    for raw in text.split():
        for token in (raw,) if raw.isascii() else _NON_ASCII_RE.split(raw):
            if not token:
                continue
            if token.isalpha():
                previous = token
                continue
            if "/" in token or "." in token:
                for match in _PATH_RE.finditer(token):
                    cleaned = _clean_path(match.group(0), prose=prose)
                    if cleaned is not None:
                        yield "path", cleaned, cleaned
            if "@" in token:
                email = _EMAIL_RE.search(token)
                if email is not None:
                    yield "email", email.group(0), email.group(0)
            if _DIGIT_RE.search(token) is not None:
                yield from _token_identifiers(token, previous)
            previous = token


def _parse_arguments(arguments: str) -> Any:
    """The tool call's arguments as JSON data, or the raw text when they are not JSON."""
    try:
        return json.loads(arguments) if arguments else {}
    except ValueError:
        return arguments


def _scalars(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """`(nearest key, text)` for every string or number inside JSON data."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield key, str(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _scalars(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _scalars(v, key)


def _short_arguments(data: Any) -> str:
    """The one argument that says what a call did (its command, path or query), kept short."""
    if isinstance(data, Mapping):
        for key in _SUMMARY_ARG_KEYS:
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return _shorten(_one_line(value), 60)
        for _, value in _scalars(data):
            if value.strip():
                return _shorten(_one_line(value), 60)
        return ""
    return _shorten(_one_line(str(data)), 60)


def _shell_modified(command: str) -> list[str]:
    """Paths a shell command writes: `sed -i`, redirections, tee, touch, mv/cp targets."""
    command = _HEREDOC_RE.sub(" ", command)
    bare = _QUOTED_RE.sub(" ", command)
    found: list[str] = []
    for match in _SED_INPLACE_RE.finditer(bare):
        found.extend(_paths_in(match.group(0)))
    for pattern in (_REDIRECT_RE, _TEE_TOUCH_RE, _MOVE_RE):
        for match in pattern.finditer(bare):
            found.extend(_paths_in(match.group(1)))
    return [p for p in found if p != "/dev/null"]


def _error_key(line: str) -> str:
    """Equal for errors that differ only in numbers, so repeats are counted, not listed."""
    return _one_line(_DIGITS_RE.sub("#", line.lower()))[:120]


def _marked_lines(text: str, mark: re.Pattern[str]) -> Iterator[str]:
    """Each line of `text` holding `mark`, once, without splitting the whole text into lines.

    A line that is only a label ("ERROR:") comes with the line after it, which says what failed.
    """
    after = -1
    for match in mark.finditer(text):
        if match.start() < after:
            continue
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        after = len(text) if end < 0 else end
        if after - start <= 12 and after < len(text):
            following = text.find("\n", after + 1)
            after = len(text) if following < 0 else following
        yield text[start:after]


def _error_lines(text: str) -> list[str]:
    """Error signatures in a tool output: the first two distinct and the last one."""
    seen: dict[str, str] = {}
    for line in _marked_lines(text, _ERROR_MARK_RE):
        stripped = line.strip()
        if len(stripped) < 4 or _NUMBERED_LINE_RE.match(line) or _CODE_LINE_RE.search(stripped):
            continue
        hit = _ERROR_STRONG_RE.search(stripped) is not None
        if not hit:
            cls = _ERROR_CLASS_RE.search(stripped)
            hit = cls is not None and (
                cls.start() <= 4 or stripped[cls.end() : cls.end() + 1] in {":", ")"}
            )
        if hit:
            signature = _one_line(_ERROR_PREFIX_RE.sub("", _ERROR_TAG_RE.sub("", stripped)))
            seen.setdefault(_error_key(signature), signature)
    lines = list(seen.values())
    chosen = lines if len(lines) <= 3 else [*lines[:2], lines[-1]]
    # pytest prints "E KeyError: x" and then "FAILED test - KeyError: x": keep the fuller one.
    return [a for a in chosen if not any(a != b and a in b for b in chosen)]


def _fix_text(text: str) -> str:
    """What the agent said right after an error, cut to its first sentences."""
    line = _one_line(text)
    if utf16_len(line) <= 200:
        return line
    first = " ".join(_SENTENCE_SPLIT_RE.split(line)[:2])
    return _shorten(first, 160)


def _parse_brief(text: str) -> dict[str, list[str]]:
    """The sections of a brief this summarizer wrote earlier; empty for any other text."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        phase = _PHASE_LINE_RE.match(line.strip())
        if phase is not None:
            sections.setdefault(PHASE, []).append(phase.group(1))
            continue
        heading = _HEADING_RE.match(line)
        if heading is not None:
            title = heading.group(1)
            root = _HEADING_ROOT_RE.search(title)
            if root is not None:
                title = title[: root.start()]
            known = _HEADING_TO_SECTION.get(title.strip().lower())
            if known is not None:  # any other "## …" line is content, e.g. a task's title
                current = known
                if root is not None:
                    sections.setdefault("root", []).append(root.group(1))
                continue
        stripped = line.strip()
        if current is None or not stripped:
            continue
        if stripped.startswith("- "):
            stripped = stripped[2:]
        if _LAYOUTS.get(current) == "inline":
            sections.setdefault(current, []).extend(s for s in stripped.split(", ") if s)
        else:
            sections.setdefault(current, []).append(stripped)
    return sections


# --- collecting the facts ---------------------------------------------------------------------


@dataclass(slots=True)
class _Term:
    label: str
    weight: int
    count: int
    first: int
    kind: str


@dataclass(slots=True)
class _Tally:
    """Distinct terms with where they were seen: user words outrank tool output, then counts."""

    terms: dict[str, _Term] = field(default_factory=dict)

    def add(self, key: str, label: str, weight: int, kind: str = "path") -> None:
        term = self.terms.get(key)
        if term is None:
            self.terms[key] = _Term(label, weight, 1, len(self.terms), kind)
            return
        term.count += 1
        term.weight = max(term.weight, weight)
        if "=" in label and "=" not in term.label:
            term.label = label
        if kind in _TELLING_KINDS:
            term.kind = kind

    def ranked(self) -> list[_Term]:
        """Best first; a term seen once and only in tool output is left out unless it is telling."""
        kept = (
            t
            for t in self.terms.values()
            if t.weight > _W_OUTPUT or t.count > 1 or t.kind in _TELLING_KINDS
        )
        return sorted(
            kept,
            key=lambda t: (-t.weight, t.kind not in _TELLING_KINDS, -min(t.count, 5), t.first),
        )


@dataclass(slots=True)
class _Error:
    signature: str
    count: int
    first: int
    last: int
    fix: str = ""
    carried: bool = False


# Where a term was seen, as a weight.
_W_CARRIED, _W_USER, _W_ARGS, _W_SPOKEN, _W_OUTPUT = 5, 4, 3, 2, 1


@dataclass(slots=True)
class _Facts:
    """Everything the rules found in one pass over the span."""

    task: str = ""
    task_keep: tuple[str, ...] = ()
    task_from_summary: bool = False
    requests: list[tuple[int, str, tuple[str, ...]]] = field(default_factory=list)
    carried_requests: list[str] = field(default_factory=list)
    constraints: dict[str, str] = field(default_factory=dict)
    system_constraints: dict[str, str] = field(default_factory=dict)
    modified: _Tally = field(default_factory=_Tally)
    read: _Tally = field(default_factory=_Tally)
    identifiers: _Tally = field(default_factory=_Tally)
    errors: dict[str, _Error] = field(default_factory=dict)
    tool_counts: dict[str, int] = field(default_factory=dict)
    recent_calls: deque[str] = field(default_factory=lambda: deque(maxlen=_RECENT_CALLS))
    pending_calls: dict[str, str] = field(default_factory=dict)
    todo_lines: deque[str] = field(default_factory=lambda: deque(maxlen=_RECENT_TODOS))
    todo_tool_items: list[str] = field(default_factory=list)
    carried_open: list[str] = field(default_factory=list)
    carried_hints: list[str] = field(default_factory=list)
    last_request: str = ""
    last_request_answered: bool = True
    last_assistant_text: str = ""
    user_texts: list[str] = field(default_factory=list)
    # For the brief and the notes: what got done, decided, and carried from an earlier one.
    answered: list[tuple[str, str]] = field(default_factory=list)
    completed_calls: deque[str] = field(default_factory=lambda: deque(maxlen=_RECENT_DONE_CALLS))
    decisions: dict[str, str] = field(default_factory=dict)
    confirmations: list[tuple[str, str]] = field(default_factory=list)
    carried_done: list[str] = field(default_factory=list)
    carried_findings: list[str] = field(default_factory=list)
    carried_decisions: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)


class _Collector:
    """One linear pass over the span, filling `_Facts`."""

    def __init__(self, task: str | None = None) -> None:
        self.facts = _Facts()
        self._reads_only: dict[str, bool] = {}
        self._awaiting_fix: list[_Error] = []
        self._open_file: str | None = None
        self._index = 0
        self._given_task = _one_line(task) if task and task.strip() else ""
        self._previous_role = ""
        if task and task.strip():
            self._set_task(task.strip())

    def _set_task(self, task: str) -> None:
        """The caller's task stands first and its rules are red lines, whatever the span holds."""
        facts = self.facts
        found = _constraint_sentences(task)
        for sentence in found:
            facts.constraints.setdefault(sentence.lower(), sentence)
        facts.task, facts.task_keep = task, tuple(_by_strength(found))
        facts.user_texts.append(task)
        self._scan_text(task, _W_USER, _W_USER)

    def fold(self, summary: str) -> None:
        """Carry the summary being replaced, before the span's own messages."""
        self._fold_summary(summary)

    def feed(self, messages: Sequence[Message]) -> _Facts:
        for index, message in enumerate(messages):
            self._index = index
            earlier = earlier_summary_text(message)
            if earlier is not None:
                self._fold_summary(earlier)
            elif message.role == "system":
                self._on_system(message.content)
            elif message.role == "user":
                self._on_user(message.content)
            elif message.role == "assistant":
                self._on_assistant(message)
            else:
                self._on_tool(message)
            self._previous_role = message.role
        return self.facts

    # -- per role --

    def _on_system(self, text: str) -> None:
        for sentence in _constraint_sentences(text):
            if len(self.facts.system_constraints) >= _MAX_SYSTEM_CONSTRAINTS:
                break
            self.facts.system_constraints.setdefault(sentence.lower(), sentence)

    def _on_user(self, content: str) -> None:
        text = _clean_user_text(content)
        if text is None:
            return
        facts = self.facts
        facts.user_texts.append(text)
        found = _constraint_sentences(text)
        for sentence in found:
            facts.constraints.setdefault(sentence.lower(), sentence)
        keep = _by_strength(found)
        self._note_decisions(text, confirming=self._previous_role == "assistant")
        if not facts.task:
            facts.task, facts.task_keep = text, tuple(keep)
        elif not (self._given_task and _one_line(text) == self._given_task):
            facts.requests.append((self._index, text, tuple(keep)))
        facts.last_request, facts.last_request_answered = text, False
        facts.todo_lines.clear()  # to-dos are read against the request now being worked on
        self._todo_lines(text)
        self._scan_text(text, _W_USER, _W_USER)
        self._track_open_file(text)

    def _on_assistant(self, message: Message) -> None:
        facts = self.facts
        text = message.content.strip()
        if text:
            facts.last_assistant_text = text
            fix = _fix_text(text)
            for error in self._awaiting_fix:
                if not error.fix:
                    error.fix = fix
            self._awaiting_fix.clear()
            if not message.tool_calls:
                last = facts.last_request
                if (
                    last
                    and not facts.last_request_answered
                    and not _is_trivial(last)
                    and not text.endswith(("?", "？"))
                ):
                    facts.answered.append((last, fix))
                facts.last_request_answered = True
            self._note_decisions(text, confirming=False)
            self._todo_lines(text)
            self._scan_text(text, _W_SPOKEN, _W_SPOKEN)
        for call in message.tool_calls:
            self._on_call(call.id, call.name, call.arguments)

    def _on_call(self, call_id: str, name: str, arguments: str) -> None:
        facts = self.facts
        facts.tool_counts[name] = facts.tool_counts.get(name, 0) + 1
        data = _parse_arguments(arguments)
        short = f"{name}({_short_arguments(data)})"
        facts.recent_calls.append(short)
        if not _FINAL_TOOL_RE.search(name):
            facts.pending_calls[call_id] = short
        lname = name.lower()
        fields: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        command = fields.get("command")
        # str_replace_editor and its kind name the operation in "command": view, create, …
        editor_command = (
            command if isinstance(command, str) and command in _EDITOR_COMMANDS else None
        )
        shell_text = data if isinstance(data, str) and lname in _SHELL_TOOLS else ""
        if editor_command is None:
            for key in ("command", "cmd", "script"):
                value = fields.get(key)
                if isinstance(value, str):
                    shell_text = value
                    break
        writes = self._written_paths(lname, data, arguments, editor_command, shell_text)
        reads_only = lname in _READ_TOOLS or editor_command == "view"
        self._note_call_terms(data, writes, track_open=reads_only)
        self._note_todos(lname, fields)
        if shell_text and _READ_SHELL_RE.match(shell_text) is not None:
            reads_only = True
        self._reads_only[call_id] = reads_only

    def _written_paths(
        self, lname: str, data: Any, arguments: str, editor_command: str | None, shell_text: str
    ) -> list[str]:
        """The files a call writes: an editor's target, a patch's files, a shell's outputs."""
        named = [
            cleaned
            for key, value in _scalars(data)
            if key.lower() in _PATH_KEYS and (cleaned := _clean_path(value.strip())) is not None
        ]
        writes: list[str] = []
        if editor_command is not None:
            writes = named if editor_command != "view" else []
        elif _WRITE_TOOL_RE.search(lname):
            writes = named or [
                p for m in _PATCH_FILE_RE.finditer(arguments) for p in m.groups() if p
            ]
            if not writes and self._open_file and lname in {"edit", "insert", "append"}:
                writes = [self._open_file]  # SWE-agent edits the file it has open
        if shell_text:
            writes += _shell_modified(shell_text)
        for path in writes:
            self.facts.modified.add(path, path, _W_ARGS)
        return writes

    def _note_call_terms(self, data: Any, writes: list[str], *, track_open: bool) -> None:
        """Paths read and identifiers named in a call's arguments; file bodies count as output."""
        facts = self.facts
        for key, value in _scalars(data):
            lkey = key.lower()
            if _ID_KEY_RE.search(lkey) and _ID_VALUE_RE.match(value) and "/" not in value:
                facts.identifiers.add(value, f"{key}={value}", _W_ARGS, "arg")
            if lkey in _PATH_KEYS:
                path = _clean_path(value.strip())
                if path is not None and path not in writes:
                    facts.read.add(path, path, _W_ARGS)
                    if track_open:
                        self._open_file = path
                continue
            body = lkey in _BODY_KEYS
            for kind, term, label in _terms_in(value, prose=body):
                if kind != "path":
                    facts.identifiers.add(term, label, _W_OUTPUT if body else _W_ARGS, kind)
                elif term not in writes:
                    facts.read.add(term, label, _W_OUTPUT if body else _W_SPOKEN)

    def _note_todos(self, lname: str, fields: Mapping[str, Any]) -> None:
        """A to-do tool's latest list replaces the previous one: its unfinished items are open."""
        todos = fields.get("todos")
        if "todo" in lname and isinstance(todos, list):
            self.facts.todo_tool_items = [
                f"[{t.get('status', '?')}] {_one_line(str(t.get('content', '')))}"
                for t in todos
                if isinstance(t, Mapping) and t.get("status") not in {"completed", "done"}
            ]

    def _on_tool(self, message: Message) -> None:
        facts = self.facts
        call_id = message.tool_call_id or ""
        short = facts.pending_calls.pop(call_id, None)
        reads_only = self._reads_only.get(call_id, False)
        failed = bool(message.metadata.get("is_error"))
        text = "\n".join(message.text_parts) if message.text_parts else message.content
        if not text:
            if short is not None and not failed:
                facts.completed_calls.append(short)
            return
        self._track_open_file(text)
        for line in _marked_lines(text, _WROTE_MARK_RE):
            # "The file X has been updated. All occurrences of '…' …": X is the first path.
            path = next(_paths_in(line, prose=True), None)
            if path is not None:
                facts.modified.add(path, path, _W_ARGS)
        self._scan_text(text, _W_OUTPUT, _W_OUTPUT)
        if reads_only and not failed:
            if short is not None:
                facts.completed_calls.append(short)
            return
        signatures = _error_lines(text)
        if short is not None and not failed and not signatures:
            facts.completed_calls.append(short)
        for signature in signatures:
            key = _error_key(signature)
            error = facts.errors.get(key)
            if error is None:
                error = _Error(signature, 0, self._index, self._index)
                facts.errors[key] = error
            error.count += 1
            error.last = self._index
            self._awaiting_fix.append(error)

    # -- shared scanning --

    def _scan_text(self, text: str, path_weight: int, id_weight: int) -> None:
        for kind, key, label in _terms_in(text):
            if kind == "path":
                self.facts.read.add(key, label, path_weight)
            else:
                self.facts.identifiers.add(key, label, id_weight, kind)

    def _todo_lines(self, text: str) -> None:
        for line in text.splitlines():
            if _TODO_RE.search(line):
                item = _shorten(_one_line(line.strip().lstrip("-*• ")), 200)
                if item and item not in self.facts.todo_lines:
                    self.facts.todo_lines.append(item)

    def _note_decisions(self, text: str, *, confirming: bool) -> None:
        """Choices stated outright ("let's go with …", 决定 …) and a user's yes to a proposal."""
        facts = self.facts
        for piece in _SENTENCE_SPLIT_RE.split(text):
            sentence = _one_line(piece.strip().lstrip("-*•>#").strip())
            if len(sentence) >= 6 and _DECISION_RE.search(sentence):
                facts.decisions.setdefault(sentence.lower(), _shorten(sentence, 240))
        short = _one_line(text)
        proposal = facts.last_assistant_text
        short_enough = utf16_len(short) <= _MAX_CONFIRM_UNITS
        if confirming and proposal and short_enough and _CONFIRM_RE.search(short):
            sentences = [p.strip() for p in _SENTENCE_SPLIT_RE.split(proposal) if p.strip()]
            asked = [p for p in sentences if p.endswith(("?", "？"))]
            offered = (asked or sentences or [proposal])[-1]
            facts.confirmations.append((_shorten(_one_line(offered), 160), short))

    def _track_open_file(self, text: str) -> None:
        match = _OPEN_FILE_RE.search(text)
        if match is not None:
            self._open_file = _clean_path(match.group(1))

    def _fold_summary(self, text: str) -> None:
        """Carry an earlier summary forward: its sections first, or its facts when unstructured."""
        facts = self.facts
        sections = _parse_brief(text)
        facts.phases.extend(p for p in sections.get(PHASE, []) if p not in facts.phases)
        structured = any(key in sections for key in _SECTION_KEYS)
        if not structured:
            if not facts.task:
                facts.task, facts.task_from_summary = _one_line(text), True
                facts.task_keep = tuple(_by_strength(_constraint_sentences(text)))
            else:
                facts.carried_requests.append(_one_line(text))
            for sentence in _constraint_sentences(text):
                facts.constraints.setdefault(sentence.lower(), sentence)
            self._scan_text(text, _W_CARRIED, _W_CARRIED)
            return
        roots = sections.get("root", [])
        root = roots[0] if roots else ""
        if sections.get(TASK) and not facts.task:
            facts.task = " ".join(sections[TASK])
            facts.task_keep = tuple(_by_strength(_constraint_sentences(facts.task)))
        for sentence in sections.get(CONSTRAINTS, []):
            facts.constraints.setdefault(sentence.lower(), sentence)
        facts.carried_requests.extend(sections.get(REQUESTS, []))
        for key, tally in ((MODIFIED, facts.modified), (READ, facts.read)):
            for path in sections.get(key, []):
                full = path if not root or path.startswith(("/", "~", ".")) else root + path
                tally.add(full, full, _W_CARRIED)
        for label in sections.get(IDENTIFIERS, []):
            facts.identifiers.add(label.split("=", 1)[-1], label, _W_CARRIED, "carried")
        for line in sections.get(ERRORS, []):
            facts.errors.setdefault(_error_key(line), _Error(line, 1, -1, -1, carried=True))
        for line in sections.get(TOOLS, []):
            for name, count in _COUNT_RE.findall(line):
                facts.tool_counts[name] = facts.tool_counts.get(name, 0) + int(count)
        # Pending calls and unanswered requests are re-derived from the new span, not carried.
        stale = tuple(
            f"{labels[k]}: " for labels in _LABELS.values() for k in ("awaiting", "unanswered")
        )
        facts.carried_open.extend(t for t in sections.get(OPEN, []) if not t.startswith(stale))
        facts.carried_hints.extend(sections.get(HINTS, []))
        facts.user_texts.extend(sections.get(TASK, []))
        self._fold_style_sections(sections, root)

    def _fold_style_sections(self, sections: Mapping[str, list[str]], root: str) -> None:
        """Carry a brief's or notes' own sections; grouped files and identifiers are re-ranked."""
        facts = self.facts
        facts.carried_done.extend(sections.get(DONE, []))
        facts.carried_decisions.extend(sections.get(DECISIONS, []))
        for path in sections.get(FILES, []):
            full = path if not root or path.startswith(("/", "~", ".")) else root + path
            facts.read.add(full, full, _W_CARRIED)
        for line in sections.get(FINDINGS, []):
            label, colon, rest = line.partition(": ")
            kind = next(
                (
                    k
                    for k in ("files", "identifiers")
                    for t in _STYLE_EXTRA.values()
                    if t[k] == label
                ),
                None,
            )
            if not colon or kind is None:
                facts.carried_findings.append(line)
            elif kind == "files":
                for path in rest.split(", "):
                    facts.read.add(path, path, _W_CARRIED)
            else:
                for ident in rest.split(", "):
                    facts.identifiers.add(ident.split("=", 1)[-1], ident, _W_CARRIED, "carried")


# --- fitting the brief to the budget ----------------------------------------------------------


@dataclass(slots=True)
class _Item:
    text: str
    order: int
    keep: tuple[str, ...] = ()
    shrink: bool = True
    shown: str | None = None
    # Shorter whole forms to fall back on, longest first, instead of cutting the text.
    variants: tuple[str, ...] = ()
    # Filled only once every section had its share (the system prompt's rules).
    late: bool = False


@dataclass(slots=True)
class _Section:
    key: str
    layout: str
    items: list[_Item]
    header: str = ""
    shown_count: int = 0
    used: int = 0
    opened: bool = False


def _project_root(paths: Iterable[str]) -> str:
    """The directory most absolute paths live under (a project checkout), or "" when none."""
    absolute = [p for p in paths if p.startswith("/")]
    if len(absolute) < 2:
        return ""
    counts: dict[str, int] = {}
    for path in absolute:
        prefix = ""
        for part in path.split("/")[1:-1]:
            if part in _SOURCE_DIRS:
                break
            prefix += "/" + part
            counts[prefix] = counts.get(prefix, 0) + 1
    best = ""
    for prefix, count in counts.items():
        if count * 2 < len(absolute) or (prefix.count("/") == 1 and prefix[1:] in _SYSTEM_DIRS):
            continue
        if prefix.count("/") > best.count("/"):
            best = prefix
    return best + "/" if best else ""


class _Brief:
    """Fills sections by priority within the budget, then renders them in reading order."""

    def __init__(
        self,
        budget: int,
        labels: Mapping[str, str],
        root: str,
        order: Sequence[str] = DISPLAY_ORDER,
    ) -> None:
        self.budget = budget
        self.labels = labels
        self.root = root
        self.order = tuple(order)
        self.root_shown = False
        self.sections: dict[str, _Section] = {}
        self.used = 0
        self.min_item = max(8, min(_MIN_ITEM_UNITS, budget // 5))
        self.boosted: frozenset[str] = frozenset()

    def add_section(self, key: str, items: list[_Item]) -> None:
        if items:
            self.sections[key] = _Section(key, _LAYOUTS.get(key, "bullets"), items)

    def _header(self, section: _Section) -> str:
        if section.layout == "bare":
            return ""
        header = f"## {self.labels[section.key]}"
        if self.root and not self.root_shown and section.key in {MODIFIED, READ, FILES}:
            header += f" ({self.labels['in']} {self.root})"
        return header

    def _item_cost(self, section: _Section, text: str) -> int:
        header = "" if section.opened else self._header(section)
        opening = utf16_len(header) + 1 if header else 0
        if section.layout in {"plain", "bare"}:
            return opening + utf16_len(text) + 1
        if section.layout == "bullets":
            return opening + utf16_len(text) + 3
        return opening + utf16_len(text) + (1 if section.shown_count == 0 else 2)

    def _show(self, section: _Section, item: _Item, text: str, cost: int) -> None:
        if not section.opened:
            section.opened = True
            section.header = self._header(section)
            if section.key in {MODIFIED, READ, FILES} and self.root:
                self.root_shown = True
        item.shown = text
        section.shown_count += 1
        section.used += cost
        self.used += cost

    def _try_item(self, section: _Section, item: _Item, room: int) -> None:
        cost = self._item_cost(section, item.text)
        if cost <= room:
            self._show(section, item, item.text, cost)
            return
        overhead = cost - utf16_len(item.text)
        available = room - overhead
        for variant in item.variants:
            if utf16_len(variant) <= available:
                self._show(section, item, variant, overhead + utf16_len(variant))
                return
        if not item.shrink or section.layout == "inline":
            return
        if available >= self.min_item:
            text = _shorten(item.text, available, item.keep)
            self._show(section, item, text, overhead + utf16_len(text))

    def _widen(self, section: _Section, item: _Item, limit: int) -> None:
        """Give a shortened item back some of its text once every section had its turn."""
        assert item.shown is not None
        if item.shown == item.text or not item.shrink:
            return
        now = utf16_len(item.shown)
        wider = _shorten(item.text, now + limit - self.used, item.keep)
        extra = utf16_len(wider) - now
        if extra > 0 and self.used + extra <= limit:
            item.shown = wider
            section.used += extra
            self.used += extra

    def fill(self, priority: Sequence[str], limit: int) -> None:
        """Each section up to its share, then the rest by priority, then the late items."""
        for first_pass, late in ((True, False), (False, False), (False, True)):
            for key in priority:
                section = self.sections.get(key)
                if section is None:
                    continue
                share = max(_SHARES[key] * self.budget, _FLOORS.get(key, 0))
                if key in self.boosted:
                    share = max(share, 0.3 * self.budget)
                cap = int(share) if first_pass else limit
                for item in section.items:
                    if item.shown is not None:
                        if not first_pass:
                            self._widen(section, item, limit)
                        continue
                    room = min(limit - self.used, cap - section.used)
                    if room <= 0:
                        break
                    if item.late == late:
                        self._try_item(section, item, room)

    def shown_text(self) -> str:
        return "\n".join(
            item.shown for s in self.sections.values() for item in s.items if item.shown
        )

    def render(self) -> str:
        lines: list[str] = []
        for key in self.order:
            section = self.sections.get(key)
            if section is None or not section.opened:
                continue
            if section.header:
                lines.append(section.header)
            shown = sorted((i for i in section.items if i.shown is not None), key=lambda i: i.order)
            texts = [i.shown for i in shown if i.shown is not None]
            if section.layout in {"plain", "bare"}:
                lines.extend(texts)
            elif section.layout == "bullets":
                lines.extend(f"- {t}" for t in texts)
            else:
                lines.append(", ".join(texts))
        return "\n".join(lines)


def _display_path(path: str, root: str) -> str:
    return path[len(root) :] if root and path.startswith(root) and len(path) > len(root) else path


def _path_items(
    terms: list[_Term], root: str, names: set[str], listed: Iterable[str] = ()
) -> list[_Item]:
    """Ranked path items shown relative to the project root, each path once.

    A bare file name is left out when one of `names` (basenames of full paths) already covers it.
    """
    items: list[_Item] = []
    seen = set(listed)
    for term in terms:
        shown = _display_path(term.label, root)
        if shown in seen or ("/" not in term.label and term.label in names):
            continue
        seen.add(shown)
        items.append(_Item(shown, term.first, shrink=False, late=term.weight <= _W_OUTPUT))
    return items


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _wanted_sections(instructions: str | None) -> list[str]:
    """The sections a caller's own prompt names, in the default fill order."""
    if not instructions:
        return []
    named = {
        k for pattern, keys in _INSTRUCTION_SECTIONS if pattern.search(instructions) for k in keys
    }
    return [k for k in FILL_ORDER if k in named]


def _item_caps(budget: int) -> dict[str, int]:
    """The most one item of each text section may take, so no single fact crowds out the rest."""
    return {
        TASK: max(60, int(budget * 0.3)),
        CONSTRAINTS: 300,
        REQUESTS: max(80, min(500, budget // 10)),
        ERRORS: 300,
        STATE: max(100, min(1200, int(budget * 0.12))),
        TOOLS: 400,
        OPEN: 240,
    }


def _text_item(text: str, order: int, cap: int, keep: tuple[str, ...] = ()) -> _Item:
    return _Item(_shorten(_one_line(text), cap, keep), order, keep)


def _constraint_items(facts: _Facts, cap: int) -> list[_Item]:
    """The user's prohibitions first, then the user's other rules, then the system prompt's."""
    user_rules = list(facts.constraints.values())
    system_rules = [v for k, v in facts.system_constraints.items() if k not in facts.constraints]
    items = [_text_item(rule, i, cap) for i, rule in enumerate(user_rules + system_rules)]
    for item in items[len(user_rules) :]:
        item.late = True  # the system prompt stays in context anyway
    return sorted(
        items,
        key=lambda i: (i.late, _STRONG_CONSTRAINT_RE.search(i.text) is None),
    )


def _request_items(facts: _Facts, cap: int) -> list[_Item]:
    """The newest substantive requests first; all shown in the order they were made."""
    fresh: dict[str, _Item] = {}
    carried = len(facts.carried_requests)
    for index, text, keep in reversed(facts.requests):
        item = _text_item(text, carried + index, cap, keep)
        fresh.setdefault(item.text, item)
    ranked = sorted(fresh.values(), key=lambda i: _is_trivial(i.text))
    earlier = [_text_item(t, i, cap) for i, t in enumerate(facts.carried_requests)]
    return [*ranked, *reversed(earlier)]


def _error_items(errors: list[_Error], cap: int) -> list[_Item]:
    """The latest errors first, each with how often it recurred and what was tried next."""
    items = []
    for error in errors:
        text = error.signature if error.carried else _shorten(error.signature, 200)
        if error.count > 1 and not error.carried:
            text += f" (×{error.count})"
        if error.fix:
            text += f" → {_shorten(error.fix, 160)}"
        items.append(_text_item(text, error.first, cap))
    return items


def _tool_items(facts: _Facts) -> list[_Item]:
    """Call counts (losing the rarest tools first when short of room), then the newest calls."""
    if not facts.tool_counts:
        return []
    counts = sorted(facts.tool_counts.items(), key=lambda kv: -kv[1])
    tallies = [f"{n}×{c}" for n, c in counts]
    shorter = tuple(", ".join(tallies[:n]) for n in (8, 5, 3, 1) if n < len(tallies))
    items = [_Item(", ".join(tallies), 0, shrink=False, variants=shorter)]
    calls = list(enumerate(facts.recent_calls, start=1))
    items += [_Item(f"→ {call}", i, shrink=False) for i, call in reversed(calls)]
    return items


def _open_items(facts: _Facts, labels: Mapping[str, str], cap: int) -> list[_Item]:
    """What is still pending: an unanswered request, calls without results, to-dos."""
    texts: list[str] = []
    last = facts.last_request
    if last and not facts.last_request_answered and facts.requests and not _is_trivial(last):
        texts.append(f"{labels['unanswered']}: {_shorten(_one_line(last), 100)}")
    texts += [f"{labels['awaiting']}: {call}" for call in facts.pending_calls.values()]
    texts += facts.todo_tool_items
    texts += reversed(facts.todo_lines)
    texts += facts.carried_open
    return [_text_item(t, i, cap) for i, t in enumerate(dict.fromkeys(texts))]


def _hint_items(
    facts: _Facts, errors: list[_Error], modified: list[_Term], read: list[_Term], shown: str
) -> list[_Item]:
    """Search terms for what did not make it into the brief: error names, files, identifiers."""
    candidates: list[str] = []
    for error in errors:
        candidates += _ERROR_CLASS_RE.findall(error.signature)
    candidates += [_basename(t.label) for t in modified]
    candidates += [t.label.split("=", 1)[-1] for t in facts.identifiers.ranked()]
    candidates += [_basename(t.label) for t in read if t.weight > _W_OUTPUT]
    candidates += facts.carried_hints
    fresh = [t for t in dict.fromkeys(candidates) if t and utf16_len(t) <= 60][:_MAX_HINTS]
    return [_Item(term, i, shrink=False) for i, term in enumerate(fresh) if term not in shown]


@dataclass(slots=True)
class _Ranked:
    """The span's files and errors, ranked once and shared by every style."""

    modified: list[_Term]
    read: list[_Term]
    root: str
    modified_items: list[_Item]
    read_items: list[_Item]
    errors: list[_Error]


def _rank(facts: _Facts, *, use_root: bool = True) -> _Ranked:
    modified = facts.modified.ranked()
    read = facts.read.ranked()
    root = ""
    if use_root:
        root = _project_root([t.label for t in modified]) or _project_root(
            [t.label for t in modified] + [t.label for t in read[:200]]
        )
    modified_names = {_basename(t.label) for t in modified if "/" in t.label}
    read_names = {_basename(t.label) for t in read if "/" in t.label}
    modified_items = _path_items(modified, root, modified_names)
    listed = {i.text for i in modified_items}
    read_items = _path_items(read, root, modified_names | read_names, listed)
    errors = sorted(facts.errors.values(), key=lambda e: (e.carried, -e.last, e.first))
    return _Ranked(modified, read, root, modified_items, read_items, errors)


def _task_items(facts: _Facts, labels: Mapping[str, str], cap: int) -> list[_Item]:
    if not facts.task:
        return []
    task = f"({labels['earlier']}) {facts.task}" if facts.task_from_summary else facts.task
    return [_text_item(task, 0, cap, facts.task_keep)]


def _phase_items(facts: _Facts, language: str) -> list[_Item]:
    """One line per finished phase, never shortened, so the name survives verbatim."""
    phases = dict.fromkeys(p.strip() for p in facts.phases if p.strip())
    return [_Item(phase_line(p, language), i, shrink=False) for i, p in enumerate(phases)]


def _listing(label: str, names: Sequence[str]) -> list[_Item]:
    """A labelled comma list as one item that loses its tail before it is dropped."""
    if not names:
        return []
    shorter = tuple(f"{label}: {', '.join(names[:n])}" for n in (20, 10, 5, 2, 1) if n < len(names))
    return [_Item(f"{label}: {', '.join(names)}", 0, shrink=False, variants=shorter)]


def _newest_first(texts: Iterable[str], cap: int) -> list[_Item]:
    """Items shown in the order they happened but filled newest first when room is short."""
    items = [_text_item(t, i, cap) for i, t in enumerate(dict.fromkeys(texts))]
    return list(reversed(items))


def _done_items(facts: _Facts) -> list[_Item]:
    """Answered requests with the gist of the answer, then the tool calls that came back clean."""
    texts = list(facts.carried_done)
    texts += [
        f"{_shorten(_one_line(request), 140)} → {_shorten(_one_line(reply), 140)}"
        for request, reply in facts.answered
    ]
    texts += list(facts.completed_calls)
    return _newest_first(texts, 300)


def _finding_items(
    facts: _Facts,
    labels: Mapping[str, str],
    mode: str,
    ranked: _Ranked,
    *,
    with_files: bool,
) -> list[_Item]:
    """Errors with their fixes, carried findings, identifiers (and files, for the notes)."""
    items = _error_items(ranked.errors, 300)
    carried = [*facts.carried_findings]
    carried += [f"({labels['earlier']}) {t}" for t in facts.carried_requests]
    items += _newest_first(carried, 300)
    identifiers = [t.label for t in facts.identifiers.ranked()]
    items += _listing(labels["identifiers"], identifiers)
    if with_files:
        paths = [t.label for t in (*ranked.modified, *ranked.read)]
        items += _listing(labels["files"], list(dict.fromkeys(paths)))
    if mode == "all" and facts.last_assistant_text:
        state = _text_item(f"{labels['latest']}: {facts.last_assistant_text}", 0, 400)
        items.insert(0, state)
    for order, item in enumerate(items):
        item.order = order
    return items


def _decision_items(facts: _Facts, labels: Mapping[str, str]) -> list[_Item]:
    """Choices stated outright and proposals the user said yes to, in the order they were made."""
    texts = [*facts.carried_decisions, *facts.decisions.values()]
    texts += [
        f"{proposal} ({labels['confirmed']}: {answer})" for proposal, answer in facts.confirmations
    ]
    return _newest_first(texts, 300)


def _sections(
    style: str,
    facts: _Facts,
    labels: Mapping[str, str],
    language: str,
    mode: str,
    budget: int,
    ranked: _Ranked,
) -> dict[str, list[_Item]]:
    """Every section's candidate items for one style, before any budget is applied."""
    caps = _item_caps(budget)
    out: dict[str, list[_Item]] = {
        TASK: _task_items(facts, labels, caps[TASK]),
        PHASE: _phase_items(facts, language),
        CONSTRAINTS: _constraint_items(facts, caps[CONSTRAINTS]),
    }
    if style == "letta":
        out[REQUESTS] = _request_items(facts, caps[REQUESTS])
        out[MODIFIED] = ranked.modified_items
        out[READ] = ranked.read_items
        out[IDENTIFIERS] = [
            _Item(t.label, t.first, shrink=False, late=t.weight <= _W_OUTPUT)
            for t in facts.identifiers.ranked()
        ]
        out[ERRORS] = _error_items(ranked.errors, caps[ERRORS])
        if mode == "all" and facts.last_assistant_text:
            out[STATE] = [_text_item(facts.last_assistant_text, 0, caps[STATE])]
        out[TOOLS] = _tool_items(facts)
        out[OPEN] = _open_items(facts, labels, caps[OPEN])
        return out
    out[DONE] = _done_items(facts)
    out[OPEN] = _open_items(facts, labels, caps[OPEN])
    out[FINDINGS] = _finding_items(facts, labels, mode, ranked, with_files=style == "notes")
    if style == "brief":
        out[FILES] = [*ranked.modified_items, *ranked.read_items]
    else:
        out[DECISIONS] = _decision_items(facts, labels)
    return out


def _labels_for(style: str, language: str) -> Mapping[str, str]:
    if style == "letta":
        return MappingProxyType({**_LABELS[language], **_STYLE_EXTRA[language]})
    return _STYLE_LABELS[style][language]


def _compose(
    facts: _Facts,
    *,
    style: str,
    language: str,
    mode: str,
    budget: int,
    instructions: str | None,
) -> str:
    """One rendering of the facts in `style` within `budget` UTF-16 units."""
    labels = _labels_for(style, language)
    ranked = _rank(facts)
    brief = _Brief(budget, labels, ranked.root, _STYLE_ORDER[style])
    for key, items in _sections(style, facts, labels, language, mode, budget, ranked).items():
        brief.add_section(key, items)
    wanted = _wanted_sections(instructions)
    brief.boosted = frozenset(wanted)
    limit = budget + 1  # every line is charged a newline; the last one is never written
    fill = _STYLE_FILL[style]
    if style == "letta":
        priority = [k for k in (*wanted, *fill) if k != HINTS]
        reserve = int(budget * (0.25 if HINTS in wanted else _SHARES[HINTS]))
        brief.fill(list(dict.fromkeys(priority)), limit - reserve)
        # Lookup hints come last: they name what did not make it in.
        hints = _hint_items(facts, ranked.errors, ranked.modified, ranked.read, brief.shown_text())
        brief.add_section(HINTS, hints)
        brief.fill([HINTS], limit)
    else:
        priority = [*fill[:3], *(k for k in wanted if k in fill), *fill]
        brief.fill(list(dict.fromkeys(priority)), limit)
    text = brief.render()
    if not text:  # a budget too small for any heading
        text = _shorten(_one_line(facts.task or facts.last_assistant_text or "…"), budget)
    return text if utf16_len(text) <= budget else _head(text, budget)


def _word_count(text: str) -> int:
    """Words as a reader counts them: Latin words, and each Chinese character as one."""
    return sum(1 for word in _WORD_RE.findall(text) if any(ch.isalnum() for ch in word))


def _within_words(render: Callable[[int], str], style: str, budget: int) -> str:
    """Render, then shrink the budget until a brief keeps to S3's word limit."""
    text = render(budget)
    for _ in range(8):
        words = _word_count(text)
        if style != "brief" or words <= BRIEF_WORD_LIMIT or budget <= 100:
            break
        budget = max(100, int(budget * max(0.5, min(0.92, BRIEF_WORD_LIMIT / words))))
        text = render(budget)
    return text


def span_language(
    messages: Sequence[Message], task: str | None = None, previous: str | None = None
) -> str:
    """ "zh" when Chinese dominates the user's words (the task included), else "en"."""
    texts = [
        text
        for m in messages
        if m.role == "user"
        and earlier_summary_text(m) is None
        and (text := _clean_user_text(m.content)) is not None
    ]
    if task:
        texts.append(task)
    if not texts and previous:
        texts.append(previous)
    return "zh" if _is_chinese(texts) else "en"


# --- anchored merging -------------------------------------------------------------------------


@dataclass(slots=True)
class _Line:
    prefix: str
    body: str
    rank: tuple[int, int, int]
    shrink: bool = False
    variants: tuple[str, ...] = ()
    order: int = 0
    shown: str | None = None


@dataclass(slots=True)
class _Block:
    heading: str
    key: str | None
    lines: list[_Line] = field(default_factory=list)
    root: str = ""
    bullets: bool = True


def _norm(text: str) -> str:
    return _one_line(text.strip().lstrip("-*•").strip()).lower()


def _tier(key: str | None) -> int:
    """Fill priority of a section: the task, the phase, the red lines, then the rest."""
    return {TASK: 0, PHASE: 1, CONSTRAINTS: 2}.get(key or "", 3)


def _previous_blocks(text: str) -> list[_Block]:
    """The earlier summary cut at the headings we know; every line is kept exactly."""
    blocks = [_Block("", None)]
    seq = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        heading = _HEADING_RE.match(line)
        if heading is not None:
            title = heading.group(1)
            root = _HEADING_ROOT_RE.search(title)
            key = _HEADING_TO_SECTION.get(
                (title[: root.start()] if root else title).strip().lower()
            )
            if key is not None:
                blocks.append(_Block(line.rstrip(), key, root=root.group(1) if root else ""))
                continue
        if _PHASE_LINE_RE.match(line.strip()) is not None:
            blocks.append(_Block("", PHASE))
        block = blocks[-1]
        block.lines.append(_Line("", line.rstrip(), (_tier(block.key), 0, seq), order=seq))
        seq += 1
    for block in blocks:
        block.bullets = any(line.body.lstrip().startswith("- ") for line in block.lines) or not (
            block.lines
        )
    return [b for b in blocks if b.lines]


def _merge_into(
    blocks: list[_Block],
    new: Mapping[str, list[_Item]],
    style: str,
    labels: Mapping[str, str],
    previous: str,
) -> None:
    """Append the span's items to the matching earlier sections, or as new ones; no repeats."""
    seen = {_norm(line.body) for b in blocks for line in b.lines}
    seen |= {_norm(p) for b in blocks for line in b.lines for p in line.body.split(", ")}
    whole = _norm(previous)
    fill = _STYLE_FILL[style]
    extra: list[_Block] = []
    for key in _STYLE_ORDER[style]:
        items = [
            i for i in new.get(key, []) if (n := _norm(i.text)) and n not in seen and n not in whole
        ]
        if not items:
            continue
        for item in items:
            seen.add(_norm(item.text))
        block = next((b for b in blocks if b.key == key), None)
        if block is None:
            block = _Block("" if key == PHASE else f"## {labels[key]}", key)
            block.bullets = _LAYOUTS.get(key, "bullets") == "bullets"
            extra.append(block)
        rank_base = (_tier(key), 1 + fill.index(key) if key in fill else 99)
        if _LAYOUTS.get(key) == "inline" and not block.bullets:
            names = [_display_path(i.text, block.root) if block.root else i.text for i in items]
            variants = tuple(", ".join(names[:n]) for n in (10, 5, 2, 1) if n < len(names))
            line = _Line("", ", ".join(names), (*rank_base, 0), variants=variants, order=10**6)
            block.lines.append(line)
            continue
        prefix = "- " if block.bullets and key not in {TASK, PHASE} else ""
        for position, item in enumerate(items):
            block.lines.append(
                _Line(
                    prefix,
                    item.text,
                    (*rank_base, position),
                    shrink=item.shrink,
                    variants=item.variants,
                    order=10**6 + item.order,
                )
            )
    head = [b for b in extra if b.key in {TASK, PHASE}]
    rest = [b for b in extra if b.key not in {TASK, PHASE}]
    at = next((i + 1 for i, b in enumerate(blocks) if b.key == TASK), 0)
    for block in reversed(head):
        blocks.insert(0 if block.key == TASK else at, block)
        if block.key == TASK:
            at += 1
    blocks.extend(rest)


def _fit_blocks(blocks: list[_Block], budget: int, min_item: int) -> str:
    """Show lines by rank while they fit; earlier lines whole or not at all."""
    for block in blocks:
        for line in block.lines:
            line.shown = None
    limit = budget + 1
    used = 0
    opened: set[int] = set()
    ordered = sorted(
        ((line.rank, bi, line) for bi, b in enumerate(blocks) for line in b.lines),
        key=lambda entry: (entry[0], entry[1]),
    )
    for _, bi, line in ordered:
        heading = blocks[bi].heading
        opening = utf16_len(heading) + 1 if heading and bi not in opened else 0
        room = limit - used - opening - utf16_len(line.prefix) - 1
        choice = next((t for t in (line.body, *line.variants) if utf16_len(t) <= room), None)
        if choice is None and line.shrink and room >= min_item:
            choice = _shorten(line.body, room)
        if choice is None:
            continue
        line.shown = line.prefix + choice
        used += opening + utf16_len(line.shown) + 1
        opened.add(bi)
    out: list[str] = []
    for bi, block in enumerate(blocks):
        if bi not in opened:
            continue
        if block.heading:
            out.append(block.heading)
        shown = sorted((ln for ln in block.lines if ln.shown is not None), key=lambda ln: ln.order)
        out.extend(ln.shown for ln in shown if ln.shown is not None)
    text = "\n".join(out)
    return text if utf16_len(text) <= budget else _head(text, budget)


def _anchored(
    previous: str,
    facts: _Facts,
    *,
    style: str,
    language: str,
    mode: str,
    budget: int,
) -> str:
    """The earlier summary kept line for line, with the span's new items merged in."""
    labels = _labels_for(style, language)
    blocks = _previous_blocks(previous)
    ranked = _rank(facts, use_root=False)
    new = _sections(style, facts, labels, language, mode, MAX_BRIEF_CHARS, ranked)
    _merge_into(blocks, new, style, labels, previous)
    return _fit_blocks(blocks, budget, max(8, min(_MIN_ITEM_UNITS, budget // 5)))


def build_brief(
    messages: Sequence[Message],
    *,
    mode: str = "sliding_window",
    budget: int = DEFAULT_BRIEF_CHARS,
    instructions: str | None = None,
    style: str = "letta",
    merge: str = "regenerate",
    task: str | None = None,
    previous: str | None = None,
    phase: str | None = None,
) -> str:
    """The brief for `messages` within `budget` UTF-16 units; same input, same text.

    `previous` is the summary being replaced: rebuilt together with the span (`regenerate`) or
    kept line for line with the span's items added (`anchored`). `task` leads verbatim.
    """
    if not messages and previous is None and not task and not phase:
        return _head(NO_MESSAGES_SUMMARY, budget)
    budget = max(1, budget)
    anchored = merge == "anchored" and previous is not None
    lead = task
    if anchored and previous is not None and not (task and task.strip()):
        # The span's first request is not the task: the earlier summary already names that.
        lead = " ".join(_parse_brief(previous).get(TASK, [])) or None
    collector = _Collector(lead)
    if previous is not None and not anchored:
        collector.fold(previous)
    facts = collector.feed(messages)
    if phase and phase.strip():
        facts.phases.append(phase.strip())
    texts = facts.user_texts
    if anchored and previous is not None and not texts:
        texts = [previous]
    language = "zh" if _is_chinese(texts) else "en"
    if anchored and previous is not None:
        prior = previous

        def render(room: int) -> str:
            return _anchored(
                prior,
                facts,
                style=style,
                language=language,
                mode=mode,
                budget=room,
            )

    else:

        def render(room: int) -> str:
            return _compose(
                facts,
                style=style,
                language=language,
                mode=mode,
                budget=room,
                instructions=instructions,
            )

    return _within_words(render, style, budget)


class ExtractiveSummarizer(LocalSummarizer):
    """Summarizes by rule, with no model: the embedded default, deterministic and fast."""

    def __init__(
        self, *, default_chars: int = DEFAULT_BRIEF_CHARS, max_chars: int = MAX_BRIEF_CHARS
    ) -> None:
        self.default_chars = default_chars
        self.max_chars = max_chars

    @property
    def name(self) -> str:
        return "extractive"

    def budget_for(self, request: SummaryRequest) -> int:
        """The size to plan for: the clip when given (never above the cap), else the default."""
        if request.clip_chars is None:
            return self.default_chars
        return max(1, min(request.clip_chars, self.max_chars))

    def summarize(self, request: SummaryRequest) -> str:
        """A brief of the span that fits the clip by itself; instructions only set priorities."""
        plain = (
            request.style == "letta"
            and request.merge == "regenerate"
            and request.task is None
            and request.previous_summary is None
            and request.phase is None
        )
        if plain:
            return build_brief(
                request.messages,
                mode=request.mode,
                budget=self.budget_for(request),
                instructions=request.instructions,
            )
        previous, fresh = split_previous(request)
        return build_brief(
            fresh,
            mode=request.mode,
            budget=self.budget_for(request),
            instructions=request.instructions,
            style=request.style,
            merge=request.merge,
            task=request.task,
            previous=previous,
            phase=request.phase,
        )
