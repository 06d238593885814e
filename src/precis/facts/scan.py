"""One message's share of the facts: every rule that reads only that message, run once.

A compaction reads the same messages several times (the brief, the guard's ledger, the fallback
plans, `precis eval`), so the scan of a message is remembered by its id. The entry is checked
against what the scan reads (role, kind, text, calls, the error flag, a summary's text): a view
that shows a message shortened or masked keeps its id but gets a scan of its own text. The memo
is the session's (`precis.core.memo`): a scan made for one conversation is never another's.
What depends on the messages before (the task, the open file, pending calls) is left to the
collector's replay.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from precis.core.jscompat import utf16_len
from precis.core.memo import Memo, Table
from precis.core.messages import Message, ToolCall
from precis.facts.args import ArgTerm, arg_terms, code_symbols
from precis.facts.decisions import about_files, decisions, reasons
from precis.facts.gist import note_text, output_gist, value_count, value_tokens
from precis.facts.language import earlier_summary_text
from precis.facts.patterns import (
    CODE_BLOCK_RE,
    CONFIRM_RE,
    EDITOR_COMMANDS,
    FINAL_TOOL_RE,
    LOG_FILE_RE,
    MAX_CONFIRM_UNITS,
    OPEN_FILE_RE,
    PATCH_FILE_RE,
    PATH_KEYS,
    READ_SHELL_RE,
    READ_TOOLS,
    SENTENCE_SPLIT_RE,
    SHELL_TOOLS,
    TODO_RE,
    WRITE_TOOL_RE,
    WROTE_MARK_RE,
)
from precis.facts.progress import (
    ShellWork,
    action_text,
    commit_lines,
    is_action,
    push_ok,
    push_target,
    shell_work,
    test_tally,
    todo_entries,
)
from precis.facts.rules import constraint_sentences
from precis.facts.terms import (
    Term,
    clean_path,
    error_key,
    error_lines,
    error_names,
    marked_lines,
    parse_arguments,
    paths_in,
    scalars,
    shell_modified,
    short_arguments,
    symbols_in,
    terms_in,
    unnumbered,
)
from precis.facts.text import (
    by_strength,
    clean_user_text,
    fix_text,
    injected_rules,
    listed_rules,
    one_line,
    shorten,
)

# Messages whose scans are remembered; a compaction's span beyond this is scanned again.
MEMO_SIZE: Final = 4096
_SWE_EDITS: Final = frozenset({"edit", "insert", "append"})
_LISTS_WORK_RE: Final = re.compile(r"todo|task|plan|checklist")


@dataclass(frozen=True, slots=True)
class CallScan:
    """A tool call: its tally line, what it writes and reads, and its to-do list if any."""

    id: str
    name: str
    short: str
    final: bool
    writes: tuple[str, ...]
    # SWE-agent's edit names no file: it writes the one the agent has open.
    edits_open_file: bool
    shell_writes: tuple[str, ...]
    arg_terms: tuple[ArgTerm, ...]
    track_open: bool
    reads_only: bool
    todo_items: tuple[str, ...] | None
    # A read of a log or a saved command output (not source code): its errors were seen.
    reads_log: bool = False
    # A "think" tool's thought: the agent talking to itself, a progress note of its own.
    thought: str = ""
    # Code names in the code the call writes: for the brief to rank, not the guard.
    symbols: tuple[ArgTerm, ...] = ()
    # What the call does to the work (`precis.facts.progress`): a shell command's tracker
    # updates, commit, push or test run; a named action taken; a to-do tool's whole list.
    work: ShellWork | None = None
    action: str = ""
    todo: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True, slots=True)
class SummaryScan:
    """An earlier summary in the span: folded in by the collector, not scanned as a turn."""

    text: str


@dataclass(frozen=True, slots=True)
class SystemScan:
    constraints: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UserScan:
    """A user turn; `text` is None for a notice the agent harness wrote."""

    text: str | None
    short: str = ""
    constraints: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    decisions: tuple[tuple[str, str], ...] = ()
    confirms: bool = False
    todos: tuple[str, ...] = ()
    terms: tuple[Term, ...] = ()
    opens: bool = False
    open_path: str | None = None
    # Items listed under a rules heading that no rule sentence holds ("## Important Rules").
    listed: tuple[str, ...] = ()
    # Code names the text writes (`spans`, snake_case …): for the brief to rank, not the guard.
    symbols: tuple[Term, ...] = ()


@dataclass(frozen=True, slots=True)
class AssistantScan:
    text: str
    fix: str
    asks: bool
    decisions: tuple[tuple[str, str], ...]
    todos: tuple[str, ...]
    terms: tuple[Term, ...]
    calls: tuple[CallScan, ...]
    # The turn's prose, code blocks aside, cut to its first sentences: a progress note.
    note: str = ""
    symbols: tuple[Term, ...] = ()
    # The values it says or calls with (`gist.value_tokens`): what earlier results gave it.
    tokens: frozenset[str] = frozenset()
    # How many values its note states (`gist.value_count`): what the turn found.
    note_values: int = 0


class ToolScan:
    """A tool result; its error lines are found only when the collector asks (not for reads)."""

    __slots__ = (
        "_commits",
        "_derived",
        "_log_signatures",
        "_names",
        "_outcome",
        "_signatures",
        "_tally",
        "failed",
        "open_path",
        "opens",
        "terms",
        "text",
        "wrote",
    )

    def __init__(self, text: str, failed: bool) -> None:
        self.text = text
        # A harness's error wrapper says the call failed, flag or not.
        self.failed = failed or text.startswith("<tool_use_error>")
        self.opens = False
        self.open_path: str | None = None
        self.wrote: tuple[str, ...] = ()
        self.terms: tuple[Term, ...] = ()
        self._signatures: tuple[tuple[str, str], ...] | None = None
        self._commits: tuple[tuple[str, str, str], ...] | None = None
        self._outcome: str | None = None
        self._derived: dict[str, Any] | None = None
        self._names: tuple[str, ...] | None = None
        self._log_signatures: tuple[tuple[str, str], ...] | None = None
        self._tally: tuple[tuple[str, bool] | None] | None = None
        if not text:
            return
        self.opens, self.open_path = _open_file(text)
        wrote: list[str] = []
        for line in marked_lines(text, WROTE_MARK_RE):
            # "The file X has been updated. All occurrences of '…' …": X is the first path.
            path = next(paths_in(line, prose=True), None)
            if path is not None:
                wrote.append(path)
        self.wrote = tuple(wrote)
        self.terms = tuple(terms_in(text))

    def signatures(self) -> tuple[tuple[str, str], ...]:
        """`(error key, signature)` for each error line of the output."""
        if self._signatures is None:
            self._signatures = tuple((error_key(s), s) for s in error_lines(self.text))
        return self._signatures

    def derived(self, name: str, make: Callable[[str], Any]) -> Any:
        """`make(text)`, made once per output: what the collector reads of a tracker's output."""
        memo = self._derived
        if memo is None:
            memo = self._derived = {}
        if name not in memo:
            memo[name] = make(self.text)
        return memo[name]

    def log_signatures(self) -> tuple[tuple[str, str], ...]:
        """`signatures()` of a log or saved output the agent read, line numbers aside."""
        if self._log_signatures is None:
            text = unnumbered(self.text)
            self._log_signatures = tuple((error_key(s), s) for s in error_lines(text))
        return self._log_signatures

    def error_names(self) -> tuple[str, ...]:
        """The error class names the output mentions, code and logs alike."""
        if self._names is None:
            self._names = error_names(self.text)
        return self._names

    def commits(self) -> tuple[tuple[str, str, str], ...]:
        """(branch, hash, subject) of each commit git reported (asked after a `git commit`)."""
        if self._commits is None:
            self._commits = commit_lines(self.text)
        return self._commits

    def tally(self) -> tuple[str, bool] | None:
        """A test run's last tally line and whether it failed (asked after a test command)."""
        if self._tally is None:
            self._tally = (test_tally(self.text),)
        return self._tally[0]

    def pushed(self) -> bool:
        return push_ok(self.text)

    def push_target(self) -> str:
        return str(self.derived("push_target", push_target))

    def outcome(self) -> str:
        """What came back, in a line: the first error, else the first line that says something."""
        if self._outcome is None:
            signatures = self.signatures()
            self._outcome = signatures[0][1] if signatures else output_gist(self.text)
        return self._outcome


MessageScan = SummaryScan | SystemScan | UserScan | AssistantScan | ToolScan


def scan(message: Message, memo: Memo | None = None) -> MessageScan:
    """The scan of one message, from the memo when this message was scanned before."""
    if not message.id or memo is None:
        return _scan(message)
    fingerprint = _fingerprint(message)
    scans = memo[_SCANS]
    hit = scans.get(message.id)
    if hit is not None and hit[0] == fingerprint:
        return hit[1]
    found = _scan(message)
    scans.put(message.id, (fingerprint, found))
    return found


# Each message's scan by its id, with what the scan read of it (`_fingerprint`).
_SCANS: Final = Table[str, tuple[tuple[Any, ...], MessageScan]]("scans", MEMO_SIZE)


def _fingerprint(message: Message) -> tuple[Any, ...]:
    """Everything `_scan` reads of a message, compared (not hashed) on a memo hit."""
    metadata = message.metadata
    return (
        message.role,
        message.kind,
        message.content,
        message.tool_calls,
        metadata.get("is_error"),
        metadata.get("summary"),
        metadata.get("compaction"),
        message.openai_extra.get("content"),
    )


def _scan(message: Message) -> MessageScan:
    earlier = earlier_summary_text(message)
    if earlier is not None:
        return SummaryScan(earlier)
    if message.role == "system":
        return SystemScan(tuple(constraint_sentences(message.content)))
    if message.role == "user":
        return _user(message.content)
    if message.role == "assistant":
        return _assistant(message)
    text = "\n".join(message.text_parts) if message.text_parts else message.content
    return ToolScan(text, bool(message.metadata.get("is_error")))


# What a stated task gives: its rules, its rules strongest first, its terms, and the items
# listed under its rules headings that no rule sentence holds.
TaskScan = tuple[tuple[str, ...], tuple[str, ...], tuple[Term, ...], tuple[str, ...]]


def task_scan(task: str, memo: Memo | None = None) -> TaskScan:
    """A stated task's `TaskScan`, the same every time: every compaction's collector is given
    the task again, so `memo` keeps it."""
    table = memo[_TASKS] if memo is not None else None
    found = table.get(task) if table is not None else None
    if found is None:
        rules = constraint_sentences(task)
        listed = tuple(listed_rules(task, rules))
        found = tuple(rules), tuple(by_strength(rules)), tuple(terms_in(task)), listed
        if table is not None:
            table.put(task, found)
    return found


_TASKS: Final = Table[str, TaskScan]("task scans", 64)


def prepare(message: Message, memo: Memo) -> None:
    """Scan a message into `memo` now, error lines included (which a tool result's scan
    otherwise finds only when the collector asks), so a later compaction only replays it."""
    found = scan(message, memo)
    if isinstance(found, ToolScan):
        found.signatures()


def _user(content: str) -> UserScan:
    text = clean_user_text(content)
    if text is None:  # the harness's words; a command's output it injected may list rules
        return UserScan(None, listed=injected_rules(content))
    found = constraint_sentences(text)
    short = one_line(text)
    confirms = utf16_len(short) <= MAX_CONFIRM_UNITS and CONFIRM_RE.search(short) is not None
    opens, open_path = _open_file(text)
    return UserScan(
        text,
        short,
        tuple(found),
        tuple(by_strength(found)),
        decisions(text),
        confirms,
        _todos(text),
        tuple(terms_in(text)),
        opens,
        open_path,
        tuple(listed_rules(text, found)),
        tuple(symbols_in(text)),
    )


def _assistant(message: Message) -> AssistantScan:
    text = message.content.strip()
    calls = tuple(_call(c) for c in message.tool_calls)
    tokens = value_tokens(" ".join([text, *(c.arguments for c in message.tool_calls)]))
    if not text:
        return AssistantScan("", "", False, (), (), (), calls, tokens=tokens)
    fix = fix_text(text)
    prose = text if "```" not in text else CODE_BLOCK_RE.sub(" ", text)
    note = note_text(prose)
    return AssistantScan(
        text,
        fix,
        text.endswith(("?", "？")),
        about_files((*decisions(text), *reasons(prose)), [p for c in calls for p in c.writes]),
        _todos(text),
        tuple(terms_in(text)),
        calls,
        note,
        tuple(symbols_in(text)),
        tokens,
        value_count(note),
    )


def _call(call: ToolCall) -> CallScan:
    name, arguments = call.name, call.arguments
    data = parse_arguments(arguments)
    lname = name.lower()
    fields: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
    command = fields.get("command")
    # str_replace_editor and its kind name the operation in "command": view, create, …
    editor_command = command if isinstance(command, str) and command in EDITOR_COMMANDS else None
    shell_text = data if isinstance(data, str) and lname in SHELL_TOOLS else ""
    if editor_command is None:
        for key in ("command", "cmd", "script"):
            value = fields.get(key)
            if isinstance(value, str):
                shell_text = value
                break
    named = [
        cleaned
        for key, value in scalars(data)
        if key.lower() in PATH_KEYS and (cleaned := clean_path(value.strip())) is not None
    ]
    writes: list[str] = []
    edits_open_file = False
    if editor_command is not None:
        writes = named if editor_command != "view" else []
    elif WRITE_TOOL_RE.search(lname):
        writes = named or [p for m in PATCH_FILE_RE.finditer(arguments) for p in m.groups() if p]
        edits_open_file = not writes and lname in _SWE_EDITS
    track_open = lname in READ_TOOLS or editor_command == "view"
    reads_only = track_open or (bool(shell_text) and READ_SHELL_RE.match(shell_text) is not None)
    final = FINAL_TOOL_RE.search(name) is not None
    read_paths = named or (list(paths_in(shell_text)) if reads_only and shell_text else [])
    reads_log = reads_only and any(LOG_FILE_RE.search(p) for p in read_paths)
    todo = todo_entries(fields) if fields and _LISTS_WORK_RE.search(lname) else None
    quiet = bool(shell_text) or editor_command is not None or track_open or final
    acts = not (quiet or writes or todo is not None or WRITE_TOOL_RE.search(lname))
    return CallScan(
        id=call.id,
        name=name,
        short=f"{name}({short_arguments(data)})",
        final=final,
        writes=tuple(writes),
        edits_open_file=edits_open_file,
        shell_writes=tuple(shell_modified(shell_text)) if shell_text else (),
        arg_terms=arg_terms(data),
        track_open=track_open,
        reads_only=reads_only,
        todo_items=_todo_items(lname, fields),
        reads_log=reads_log,
        thought=_thought(lname, fields),
        symbols=code_symbols(data, shell_text),
        work=shell_work(shell_text) if shell_text else None,
        action=action_text(name, data) if acts and is_action(name) else "",
        todo=todo,
    )


def _thought(lname: str, fields: Mapping[str, Any]) -> str:
    """The note a think tool's call is: its thought, cut to its first sentences."""
    if "think" not in lname:
        return ""
    thought = fields.get("thought") or fields.get("content") or fields.get("text")
    return note_text(thought) if isinstance(thought, str) and thought.strip() else ""


def _todo_items(lname: str, fields: Mapping[str, Any]) -> tuple[str, ...] | None:
    """A to-do tool's list: its unfinished items, or None when this is no to-do call."""
    todos = fields.get("todos")
    if "todo" not in lname or not isinstance(todos, list):
        return None
    return tuple(
        f"[{t.get('status', '?')}] {one_line(str(t.get('content', '')))}"
        for t in todos
        if isinstance(t, Mapping) and t.get("status") not in {"completed", "done"}
    )


def _todos(text: str) -> tuple[str, ...]:
    """Lines that say what is left to do, shortened, in order (repeats are the collector's)."""
    items: list[str] = []
    for line in text.splitlines():
        if TODO_RE.search(line):
            item = shorten(one_line(line.strip().lstrip("-*• ")), 200)
            if item:
                items.append(item)
    return tuple(items)


def offered(proposal: str) -> str:
    """What a user's yes agreed to: the proposal's last question, else its last sentence."""
    sentences = [p.strip() for p in SENTENCE_SPLIT_RE.split(proposal) if p.strip()]
    asked = [p for p in sentences if p.endswith(("?", "？"))]
    return shorten(one_line((asked or sentences or [proposal])[-1]), 160)


def _open_file(text: str) -> tuple[bool, str | None]:
    """Whether the text names the file a viewer has open (SWE-agent), and that file."""
    match = OPEN_FILE_RE.search(text)
    if match is None:
        return False, None
    return True, clean_path(match.group(1))
