"""The rules' vocabulary: what marks a constraint, a path, an identifier, an error, a decision.

Every table and pattern the fact collector reads, in one place; nothing here runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

# How many of a kind one span keeps while collecting.
MAX_SYSTEM_CONSTRAINTS: Final = 8
MAX_IDENTIFIER_UNITS: Final = 160
RECENT_CALLS: Final = 5
RECENT_TODOS: Final = 6
RECENT_DONE_CALLS: Final = 5
MAX_CONFIRM_UNITS: Final = 80

STRONG_CONSTRAINT_RE: Final = re.compile(
    r"(?i)\b(?:don['’]?t|do not|never|must not|mustn['’]t|avoid|instead of)\b"
    r"|不要|禁止|不能|别|务必|不许|不准|不得|严禁|切勿"
)
# What a task's document states as a requirement: a prohibition, or what must always hold.
SPEC_RULE_RE: Final = re.compile(
    STRONG_CONSTRAINT_RE.pattern + r"|(?i:\b(?:must|always|required|requires)\b)|必须|只能"
)
# A clause that forbids by opening with "No …": "No UI changes in this task."
NO_CLAUSE_RE: Final = re.compile(r"(?i)(?:^|[;:,(]\s*)no\s+[\w-]")
# "I don't have / know / remember …" describes the speaker; it sets no rule.
SELF_REPORT_RE: Final = re.compile(
    r"(?i)\b(?:I|we)(?:['’]m| am| are)? (?:do not|don['’]?t|not) (?:have|know|remember|recall|see|"
    r"think|understand|mind|care|sure)\b|\b(?:I|we|it|this|that) (?:cannot|can['’]t|couldn['’]t)\b"
    r"|\bif (?:you|u) (?:do not|don['’]?t)\b"
    # What a text reports rather than asks: "remember that X is …", "it's always appreciated",
    # "this could help to avoid …", "it works when you don't …".
    r"|\bremember(?=,? that\b)|\b(?:is|are|it['’]s|was) always\b|\bhelps? (?:to )?avoid\b"
    r"|\bwhen (?:you|u) (?:do not|don['’]?t)\b"
)
# A heading over a list of rules: "## Architecture Constraints", "Important Rules:", "NOTES:".
RULE_HEADING_RE: Final = re.compile(
    r"(?i)^\s*(?:#{1,6}\s*)?[\w ./&-]{0,40}?\b(?:constraints?|requirements?|rules?|guardrails?|"
    r"red lines?|restrictions?|non-goals?|limitations?|do(?:n['’]t| not)s?|must(?:s| not)?|"
    r"important|instructions|tips|notes?|workflow|guidelines?|guidance|conventions?|polic(?:y|ies)|"
    r"specs?|specifications?|acceptance|criteria|no-gos?)\b"
    r"[\w ./&()-]{0,30}:?\s*$"
)
RULE_ITEM_RE: Final = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+(\S.*)$")
CODE_BLOCK_RE: Final = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# Lines a harness wraps every output in, which say nothing of the result.
HARNESS_LINE_RE: Final = re.compile(
    r"^\s*(?:\(.*\)|bash-\$.*|Exit code 0|\[File: .*\]|<[a-z_-]+>|</[a-z_-]+>)\s*$"
)
# A harness's record of the user's answer to the agent's question, in a tool result.
USER_ANSWER_PREFIXES: Final = ("User has answered your question",)
ACK_RE: Final = re.compile(
    r"(?i)^(?:thanks?|thank you|ok(?:ay)?|great|perfect|yes|no|sure|continue|go on|proceed)\b"
)
# Where one sentence ends: after . ! ? and a space (not after e.g. / i.e. / vs. / etc.), after
# 。！？ (a ；or ，joins clauses of one sentence), or at a line break.
SENTENCE_SPLIT_RE: Final = re.compile(
    r"(?<=[.!?])(?<!\b[Ee]\.g\.)(?<!\b[Ii]\.e\.)(?<!\b[Vv]s\.)(?<!\b[Ee]tc\.)(?<!\b[Cc]f\.)\s+"
    r"|(?<=[。！？])|\n+"
)
CJK_RE: Final = re.compile(r"[\u3400-\u9fff]")
LATIN_RE: Final = re.compile(r"[A-Za-z]")
REMINDER_RE: Final = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
COMMAND_RE: Final = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
COMMAND_ARGS_RE: Final = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# User-role turns an agent harness writes itself; they are not requests.
NOTICE_PREFIXES: Final = (
    "<task-notification>",
    "<local-command-",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "[Request interrupted",
    "Base directory for this skill",
    "Caveat: The messages below",
)

URL_RE: Final = re.compile(r"https?://[^\s<>\"'`()\[\]{}|$]+")
PATH_RE: Final = re.compile(
    r"(?<![A-Za-z0-9_@+.\-/~:\\*])"
    r"(?:(?P<slash>(?:~/|\.\.?/|/)?(?:[A-Za-z0-9_@+.\-]+/)+[A-Za-z0-9_@+.\-]*)"
    r"|(?P<bare>[A-Za-z0-9_\-][A-Za-z0-9_@+.\-]*\.(?:py|pyi|ipynb|js|jsx|mjs|cjs|ts|tsx|json|"
    r"jsonl|ya?ml|toml|ini|cfg|conf|md|rst|txt|csv|tsv|html?|css|scss|sh|bash|zsh|ex|exs|"
    r"heex|eex|erl|go|rs|rb|java|kt|kts|c|h|cc|cpp|hpp|cs|swift|php|sql|lock|xml|pony|lua|vue|"
    r"svelte|gradle|proto|dockerfile|mk|cmake|patch|diff)))"
    r"(?![A-Za-z0-9_\-])"
)
# Build products and caches: never what the work was about.
BUILD_OUTPUT_RE: Final = re.compile(
    r"(?:^|/)(?:_build|node_modules|__pycache__|\.git|\.mypy_cache|\.pytest_cache)(?:/|$)"
    r"|\.(?:beam|pyc|o|so|class|plt)$"
)
PATH_EXT_RE: Final = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
SYSTEM_DIRS: Final = frozenset({"home", "tmp", "usr", "etc", "var", "dev", "proc", "opt", "Users"})
SOURCE_DIRS: Final = frozenset(
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
OPEN_FILE_RE: Final = re.compile(r"\(Open file: ([^)\s]+)\)")
PATCH_FILE_RE: Final = re.compile(
    r"(?m)^(?:\*\*\* (?:Add|Update|Delete) File: (\S+)|\+\+\+ b/(\S+))"
)
WROTE_MARK_RE: Final = re.compile(
    r"(?i)\b(?:created file|file created|has been (?:updated|edited|modified|created|written|"
    r"overwritten)|successfully (?:created|wrote|written|updated|modified)|"
    r"wrote \d+ (?:lines|bytes)|file updated)\b"
)
HEREDOC_RE: Final = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n.*?\n\s*\1\b", re.DOTALL)
QUOTED_RE: Final = re.compile(r"'[^']*'|\"[^\"]*\"")
SED_INPLACE_RE: Final = re.compile(
    r"\bsed\s+(?:[^|;&\n]*?\s)?(?:-[A-Za-z]*i[A-Za-z]*|--in-place)\b[^|;&\n]*"
)
REDIRECT_RE: Final = re.compile(r"(?<![<>&0-9])>>?\s*([^\s;&|<>()'\"]+)")
TEE_TOUCH_RE: Final = re.compile(r"\b(?:tee(?:\s+-a)?|touch)\s+([^;&|<>\n]+)")
MOVE_RE: Final = re.compile(r"\b(?:mv|cp)\s+(?:-\w+\s+)*\S+\s+([^\s;&|<>]+)")
FINAL_TOOL_RE: Final = re.compile(r"(?i)finish|submit|complete|final_answer")
READ_SHELL_RE: Final = re.compile(r"^\s*(?:cat|head|tail|nl|less|more|bat)\b")

WRITE_TOOL_RE: Final = re.compile(
    r"(?i)write|edit|create|str_replace|apply_patch|patch|insert|append|replace|save|undo"
)
READ_TOOLS: Final = frozenset(
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
SHELL_TOOLS: Final = frozenset(
    {"bash", "shell", "execute_bash", "terminal", "run", "exec", "sh", "run_command", "cmd"}
)
EDITOR_COMMANDS: Final = frozenset(
    {"view", "create", "str_replace", "insert", "undo_edit", "write", "edit", "append", "delete"}
)
PATH_KEYS: Final = frozenset(
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
BODY_KEYS: Final = frozenset(
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
# A call's arguments that are the agent's words to another reader: a sub-agent's prompt.
PROSE_KEYS: Final = frozenset(["prompt", "question"])
SUMMARY_ARG_KEYS: Final = (
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
ID_KEY_RE: Final = re.compile(r"(?i)(?:^|_)(?:id|ids|number|num|code|no)$")
ID_VALUE_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{2,63}$")

# Identifiers are classified token by token: one anchored match per token that holds a digit,
# which is many times faster than one big alternation tried at every character.
TOKEN_ID_RE: Final = re.compile(
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
PORT_AFTER_RE: Final = re.compile(r"(\d{2,5})(?::\d{2,5})?")
NUMBER_AFTER_RE: Final = re.compile(r"#?(\d{1,6})")
PORT_WORDS: Final = frozenset({"port", "--port", "-p", "ports", "pgport"})
TICKET_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {"pr": "PR", "request": "PR", "issue": "issue", "ticket": "ticket"}
)
TOKEN_STRIP: Final = "()[]{}<>,;:'\"`.!?*"
SUBTOKEN_SPLIT_RE: Final = re.compile(r"[/=,;()\[\]{}'\"`|]+")
NON_ASCII_RE: Final = re.compile(r"[^\x21-\x7e]+")
DIGIT_RE: Final = re.compile(r"\d")
# A word of an address's characters, with the rest of an email address when it is one's local
# part (group 1): a scan takes each word once, so it stays linear on a long run without "@".
EMAIL_RE: Final = re.compile(
    r"[A-Za-z0-9._%+\-]+(@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,})?"
)
ZH_PORT_RE: Final = re.compile(r"端口\D{0,6}?(\d{2,5})")
# Code names a person or the agent writes in prose: `spans`, snake_case, CamelCase, Dotted.Names.
BACKTICK_RE: Final = re.compile(r"`([^`\n]{2,60})`")
SYMBOL_RE: Final = re.compile(
    r"(?<![\w./:@#$-])(?:"
    r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"
    r"|_[a-z][a-z0-9]*(?:_[a-z0-9]+)*"
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"
    r"|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*"
    r"|[A-Z]\w*(?:\.[A-Z]\w*)*\.[a-z_]\w*[?!]?"
    r"|[A-Z]\w*(?:\.[A-Z]\w*)+"
    r")(?:/\d)?(?![\w-]|\.\w)"
)
# In code the agent wrote, also: "x-header-names", "/routes/:with/params" and
# "span.or.event.names" in quotes.
CODE_STRING_RE: Final = re.compile(
    r"[\"']((?:[a-z][a-z0-9]*(?:-[a-z0-9]+){2,})|(?:/[\w:{}.-]+){2,}/?"
    # A dotted name of three parts or more: a span, metric, event or setting's name.
    r"|[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*){2,})[\"']"
)
HOST_RE: Final = re.compile(
    r"(?<![\w.@/-])[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)+\.(?:io|com|org|net|dev|app|ai|co|edu|gov|"
    r"local|internal|cloud)(?![\w.-])"
)
MAX_SYMBOL_UNITS: Final = 60
# Kinds worth listing even when only a tool's output named them.
TELLING_KINDS: Final = frozenset({"url", "email", "pr", "commit"})
JIRA_STOP: Final = frozenset(
    {"UTF", "SHA", "ISO", "AES", "GPT", "MD", "TLS", "SSL", "HTTP", "RSA", "CP", "ASCII", "X"}
)
URL_PORT_RE: Final = re.compile(r"^https?://[^/:]+:(\d{2,5})\b")

NUMBERED_LINE_RE: Final = re.compile(r"^\s*\d+(?:→|\t|:\s|\s\|)")
# The whitespace opening a line, with the line number a viewer put there ("  12→", "12\t") when
# it did: a run of blank lines is taken in one match, so no line start rescans it.
NUMBER_PREFIX_RE: Final = re.compile(r"(?m)^\s*(\d+(?:→|\t))?")
# What a log or a command's saved output is called: its errors are errors seen.
LOG_FILE_RE: Final = re.compile(
    r"(?i)(?:\.(?:log|logs|out|output|err|stderr|stdout|trace|txt)|/[^./]+)$"
)
CODE_LINE_RE: Final = re.compile(
    r"^\s*(?:raise|except|catch|throw|import|from|class|def|rescue|assert_raise|@|#|//)\b"
    r"|\b(?:raise|except|catch|throw|rescue|assert_raise)\s+[\w.]*(?:Error|Exception)"
)
ERROR_STRONG_RE: Final = re.compile(
    r"\bFAILED\b|\b(?:[Ee]rror|ERROR|fatal|FATAL|panic)(?:\[[\w\-]+\])?:|\bpanicked at\b|"
    r"<tool_use_error>|\bSegmentation fault\b|\bcommand not found\b|\bNo such file or directory\b"
    r"|\b(?:TIMED OUT|[Tt]imed out)\b"
    # A test's failed check: "Assertion with =~ failed", "assertion failed: x == y".
    r"|\b[Aa]ssertion\b[^\n]{0,16}?\bfailed\b"
    # A tool refusing its arguments: "Invalid `path` parameter: …", "Invalid value for …".
    r"|^Invalid\b[^\n]{0,60}?\b(?:parameter|argument|option|value|path|input|request)\b"
)
ERROR_MARK_RE: Final = re.compile(
    r"rror|ERROR|xception|FAILED|fatal|FATAL|panic|tool_use_error|Segmentation fault|"
    r"command not found|No such file|TIMED OUT|[Tt]imed out|^Invalid\b|ssertion\b",
    re.M,
)
# A warning names a problem it did not stop for: "Warning: …", "DeprecationWarning: …".
WARNING_LINE_RE: Final = re.compile(r"^\s*(?:[A-Za-z]*Warning\b|WARN(?:ING)?\b|warning:)")
ERROR_CLASS_RE: Final = re.compile(r"\b[A-Z][\w.]*(?:Error|Exception)\b")
ERROR_TAG_RE: Final = re.compile(r"</?tool_use_error>")
ERROR_PREFIX_RE: Final = re.compile(r"^E\s+")
TODO_RE: Final = re.compile(
    r"(?i)\b(?:TODO|FIXME)\b|^\s*[-*]\s*\[ \]|\bnext steps?\b|\bstill (?:need|needs|needed|to do)\b"
)
DIGITS_RE: Final = re.compile(r"\d+")
DECISION_RE: Final = re.compile(
    r"(?i)\b(?:I['’]ll (?:use|go with|switch to|keep|stick with)|I will (?:use|go with|switch to)|"
    r"we(?:['’]ll| will) (?:use|go with|switch to|keep)|we(?:['’]ve| have)? decided|decided to|"
    r"let['’]s (?:go with|use|switch to|stick with|keep)|going with|I chose|we chose|opted for|"
    r"settled on)\b|决定|就用|改用|采用|选用|我们用|我会用"
)
# A sentence of the agent's that says why: a cause it found, a limit it hit, a choice against
# another. With the plan that follows it, it is what a successor would otherwise work out again.
REASON_RE: Final = re.compile(
    r"(?i)\b(?:because|due to|caused by|root cause|the (?:issue|problem|bug|reason|cause|"
    r"culprit|fix) (?:is|was|here is)|this means|which means|turns out|instead of|rather than|"
    r"that['’]s why|this is why|(?:doesn['’]t|does not|won['’]t|will not|cannot|can['’]t) "
    r"(?:support|handle|accept|allow|bypass)|not supported|(?:will|would) fail|no need to|"
    r"(?:don['’]t|do not) need (?:a|an|to|the)|auto-?generates?|is never|always returns?|"
    r"returns? (?:a|an) [^.]{1,40} \(not|false positive)\b|因为|由于|而不是|导致"
)
# What the agent will do next, in the sentence after a reason: the plan the reason led to.
PLAN_AFTER_RE: Final = re.compile(
    r"(?i)^(?:so,? )?(?:i|we) (?:need|have|must|should|will|['’]ll)\b|^(?:so,? )?let(?:['’]s| me)\b"
)
CONFIRM_RE: Final = re.compile(
    r"(?i)^\s*(?:yes|yep|yeah|ok(?:ay)?|sure|agreed|sounds good|go ahead|do it|approved|lgtm|"
    r"confirmed|please do)\b|^\s*(?:好的?|可以|行|同意|没问题|就这样|就这么办|确认)"
)
