"""Where the work stands: done, in progress, next, blocked — from the agent's own commands.

The rules read what an agent's tools say about its work: an issue tracker's commands
(`bd close X`, `gh issue close 12`, `… --status in_progress`), `git commit` and `git push` and
what they printed, test runs and their tally line, a to-do tool's list, and the actions a
service agent took (a `cancel_reservation` that came back clean). The newest state of each item
wins. Per message the reading is pure and remembered with the message's scan
(`precis.facts.scan`); `Progress` replays it in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from precis.facts.patterns import HEREDOC_RE, QUOTED_RE, TOKEN_ID_RE
from precis.facts.text import one_line, shorten

# Issue trackers driven from a shell, and what their verbs do to an item.
TRACKER_CLIS: Final = frozenset({"bd", "beads", "br", "gh", "glab", "jira", "linear"})
_DONE_VERBS: Final = frozenset({"close", "done", "resolve", "complete", "finish", "merge"})
_START_VERBS: Final = frozenset({"start", "claim"})
_OPEN_VERBS: Final = frozenset({"reopen", "create", "new", "add"})
_SHOW_VERBS: Final = frozenset({"show", "view", "get", "info"})
_LIST_VERBS: Final = frozenset({"list", "ready", "search", "blocked", "ls", "status"})
_REDIRECT_RE: Final = re.compile(r"(?<!\s)\s+\d*>>?&?\s*\S+")
_STATUS_WORDS: Final[Mapping[str, str]] = {
    "in_progress": "in_progress",
    "in-progress": "in_progress",
    "inprogress": "in_progress",
    "doing": "in_progress",
    "started": "in_progress",
    "active": "in_progress",
    "wip": "in_progress",
    "done": "done",
    "closed": "done",
    "close": "done",
    "complete": "done",
    "completed": "done",
    "resolved": "done",
    "finished": "done",
    "blocked": "blocked",
    "open": "open",
    "todo": "open",
    "ready": "open",
    "pending": "open",
    "backlog": "open",
    "not_started": "open",
}
_STATUS_FLAG_RE: Final = re.compile(r"(?:^|\s)(?:--status|--state|-s)(?:=|\s+)([A-Za-z_-]+)")
_REASON_RE: Final = re.compile(r"--(?:reason|comment|message)[= ]\s*(['\"])(.*?)\1", re.DOTALL)
_ITEM_RE: Final = re.compile(r"^#?[A-Za-z0-9][A-Za-z0-9_.#-]*$")
_SEGMENT_SPLIT_RE: Final = re.compile(r"&&|\|\||[;|\n]")
_SUBSHELL_RE: Final = re.compile(r"\$\((?:[^()]|\([^()]*\))*\)")
_TEST_CMD_RE: Final = re.compile(
    r"(?i)(?:^|\s|/)(?:pytest|py\.test|tox|nox|jest|vitest|rspec|phpunit|ctest|karma|mocha)\b"
    r"|\b(?:mix|go|cargo|npm|yarn|pnpm|bun|deno|dotnet|gradle|mvn|swift|zig|make|just)"
    r"(?:\s+run)?\s+(?:test|tests|check)\b"
    r"|\bpython3?\s+-m\s+(?:pytest|unittest)\b|\bmanage\.py\s+test\b"
)
# A package manager installing into the environment: "pip install -e .[dev]", "npm i x", …
_INSTALL_RE: Final = re.compile(
    r"(?i)(?:^|\s|/)(?:pip3?|uv pip|npm|pnpm|yarn|bun|apt(?:-get)?|brew|gem|cargo|poetry|"
    r"conda|mamba|go)\s+(?:install|add|get|i)\b|\bpython3?\s+-m\s+pip\s+install\b"
)
# A tally line of a test run: "5 passed, 1 failed", "14 doctests, 76 tests, 0 failures", …
_TEST_TALLY_RE: Final = re.compile(
    r"(?i)\b\d+\s+(?:passed|failed|failures?|errors?|tests?|doctests?|examples?|specs?|"
    r"skipped|pending)\b|\btest result:|^(?:OK|FAILED)\b(?: \(|$)"
)
_TEST_FAIL_RE: Final = re.compile(
    r"(?i)\b[1-9]\d*\s+(?:failed|failures?|errors?)\b|^FAILED\b|\btest result: FAILED\b"
)
# git's "[branch abc1234] subject" (and "[main (root-commit) abc1234] …") after a commit.
_COMMIT_LINE_RE: Final = re.compile(
    r"(?m)^\[([^\s\]]+)(?: \([^)]*\))? ([0-9a-f]{7,40})\] (.+?)\s*$"
)
_PUSH_OK_RE: Final = re.compile(
    r"(?m)^[^\S\n]*(?:[+*=-]|[0-9a-f]{7,}\.\.)\S*\s.*->\s*\S+|up-to-date"
)
_PUSH_FAIL_RE: Final = re.compile(r"(?i)\brejected\b|^fatal:|^error:", re.M)
_EXIT_CODE_RE: Final = re.compile(r"^Exit code [1-9]\d*\b")
# Calls that only look something up; any other named tool call is an action taken.
_LOOKUP_RE: Final = re.compile(
    r"(?i)^(?:get|search|list|find|read|view|show|fetch|lookup|look_up|check|calculate|compute|"
    r"think|query|describe|inspect|open|goto|scroll|browse|grep|glob|ls|cat|head|tail|count|"
    r"validate|preview|explain|ask|wait|sleep|task_?output|bash_?output)"
)
# "title" text after an item's id in a tracker's output: "X · title", "X: title", "X - title".
_TITLE_SEP_RE: Final = re.compile(r"^\s*(?:·|:|—|–|-|\|)\s+(\S.*)$")
_TITLE_NOISE_RE: Final = re.compile(
    r"\s*\[[^\]]*\]\s*|\s*●\s*P\d\b.*$|\s*\((?:blocked|epic)[^)]*\)"
)
_MAX_TITLE: Final = 72
_MAX_SUBJECT: Final = 90
_MAX_REASON: Final = 120
_MAX_ACTIONS: Final = 40
# Statuses and how an item line says them, most pressing first.
STATUSES: Final = ("in_progress", "blocked", "open", "done", "committed")


@dataclass(frozen=True, slots=True)
class ShellWork:
    """What one shell command does to the work: tracker updates, a commit, a push, a test run."""

    tracker: tuple[tuple[str, str], ...] = ()
    shown: tuple[str, ...] = ()  # items a tracker was asked to show
    lists: bool = False  # a tracker listing: its lines give known items their titles
    reason: str = ""
    commit: bool = False
    push: bool = False
    git: bool = False
    test: str = ""
    install: str = ""  # a package install: what the environment now has


def shell_work(command: str) -> ShellWork | None:
    """The work a shell command states, or None when it states none."""
    if not command or not any(w in command for w in _CHEAP_MARKS):
        return None
    reason_match = _REASON_RE.search(command)
    reason = shorten(one_line(reason_match.group(2)), _MAX_REASON) if reason_match else ""
    bare = HEREDOC_RE.sub(" ", command)
    bare = _SUBSHELL_RE.sub(" ", bare)
    bare = QUOTED_RE.sub(" ", bare)
    tracker: list[tuple[str, str]] = []
    shown: list[str] = []
    commit = push = git = lists = False
    test = install = ""
    for segment in _SEGMENT_SPLIT_RE.split(bare):
        words = segment.split()
        if not words:
            continue
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # FOO=1 cmd …
        if not words:
            continue
        tool = words[0].rsplit("/", 1)[-1]
        if tool == "git":
            git = True
            sub = next((w for w in words[1:] if not w.startswith("-")), "")
            commit = commit or sub == "commit"
            push = push or sub == "push"
        elif tool in TRACKER_CLIS:
            changed, looked, listed = _tracker(tool, words[1:], segment)
            tracker += changed
            shown += looked
            lists = lists or listed
        if not test and _TEST_CMD_RE.search(segment):
            test = shorten(one_line(_REDIRECT_RE.sub("", segment)), 60)
        if not install and _INSTALL_RE.search(segment):
            install = shorten(one_line(_REDIRECT_RE.sub("", segment)), 60)
    if not (tracker or shown or lists or commit or push or git or test or install):
        return None
    return ShellWork(tuple(tracker), tuple(shown), lists, reason, commit, push, git, test, install)


_CHEAP_MARKS: Final = (
    "install",
    " add ",
    "git",
    "bd ",
    "br ",
    "beads",
    "gh ",
    "glab",
    "jira",
    "linear",
    "test",
    "check",
    "spec",
    "jest",
    "tox",
    "nox",
    "karma",
    "mocha",
)


def _tracker(
    tool: str, words: Sequence[str], segment: str
) -> tuple[list[tuple[str, str]], list[str], bool]:
    """(item, status) pairs a tracker command sets, the items it only shows, and whether it
    lists items."""
    args = [w for w in words if w]
    if tool in {"gh", "glab", "jira", "linear"} and args and not args[0].startswith("-"):
        args = args[1:]  # gh issue close 12: the noun comes first
    if not args:
        return [], [], False
    verb = args[0].lower()
    status = ""
    if verb in _DONE_VERBS:
        status = "done"
    elif verb in _START_VERBS:
        status = "in_progress"
    elif verb in _OPEN_VERBS:
        status = "open"
    flag = _STATUS_FLAG_RE.search(segment)
    if flag is not None:
        status = _STATUS_WORDS.get(flag.group(1).lower(), status)
    items = list(_items(args[1:], numbered=tool in {"gh", "glab"}))
    if status:
        return [(item, status) for item in items], [], False
    if verb in _SHOW_VERBS:
        return [], items, False
    return [], [], verb in _LIST_VERBS


def _items(words: Sequence[str], *, numbered: bool) -> Iterator[str]:
    """The item ids among a command's words: flags and their values aside."""
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = "=" not in word and word not in {"--force", "-f", "--json", "-y", "--yes"}
            continue
        if numbered and word.isdigit():
            yield f"#{word}"
        elif (
            _ITEM_RE.match(word) is not None
            and not word.isdigit()
            and (any(ch.isdigit() for ch in word) or "-" in word)
        ):
            yield word


def commit_lines(text: str) -> tuple[tuple[str, str, str], ...]:
    """(branch, hash, subject) for each commit git reported."""
    if "] " not in text:
        return ()
    return tuple(
        (m.group(1), m.group(2)[:7], shorten(m.group(3), _MAX_SUBJECT))
        for m in _COMMIT_LINE_RE.finditer(text)
    )


def test_tally(text: str) -> tuple[str, bool] | None:
    """The last tally line of a test run's output, and whether it says something failed."""
    found = None
    for line in reversed(text.splitlines()):
        stripped = line.strip().strip("=- ")
        if stripped and _TEST_TALLY_RE.search(stripped):
            found = stripped
            break
    if found is None:
        return None
    return shorten(one_line(found), 100), _TEST_FAIL_RE.search(found) is not None


def push_ok(text: str) -> bool:
    """Whether git's output says the push went through."""
    return _PUSH_OK_RE.search(text) is not None and _PUSH_FAIL_RE.search(text) is None


_TRACK_RE: Final = re.compile(
    r"set up to track (?:remote branch )?'?([\w./-]+?)'?(?:\s|\.?$)", re.M
)
_PUSH_TO_RE: Final = re.compile(r"(?m)^To (\S+)")
_PUSH_REF_RE: Final = re.compile(r"(?m)^[^\S\n]*\S+\s+\S+\s+->\s+(\S+)")


def push_target(text: str) -> str:
    """Where git's output says a push went: the branch it now tracks (`origin/feature-x`),
    else the remote and the branch it updated."""
    track = _TRACK_RE.search(text)
    if track is not None:
        return track.group(1).rstrip(".")
    remote, ref = _PUSH_TO_RE.search(text), _PUSH_REF_RE.search(text)
    return " ".join(m.group(1) for m in (remote, ref) if m is not None)


def exit_failed(text: str) -> bool:
    """A harness's "Exit code N" (N > 0) before a command's output."""
    return text.startswith("Exit code") and _EXIT_CODE_RE.match(text) is not None


def children(text: str, parent: str) -> list[str]:
    """Ids in a tracker's output of one item that extend its id (`X.1`, `X-2`): its sub-items."""
    out: list[str] = []
    at = text.find(parent)
    while at >= 0:
        end = at + len(parent)
        if end + 1 < len(text) and text[end] in ".-" and text[end + 1].isalnum():
            stop = end + 1
            while stop < len(text) and (text[stop].isalnum() or text[stop] in "._-"):
                stop += 1
            child = text[at:stop].rstrip("._-")
            if child not in out and _ITEM_RE.match(child):
                out.append(child)
        at = text.find(parent, end)
    return out


def titles(text: str) -> dict[str, str]:
    """The title a tracker's output gives each item id it lists: the text after the id on its
    line ("X · title", "X: title", "X - title"), the first one found for each."""
    out: dict[str, str] = {}
    for match in _TITLED_RE.finditer(text):
        key = match.group(1).rstrip(".-")
        if key in out:
            continue
        title = _TITLE_NOISE_RE.sub(" ", match.group(2)).strip(" ·:")
        if len(title) >= 4:
            out[key] = shorten(one_line(title), _MAX_TITLE)
    return out


_TITLED_RE: Final = re.compile(
    r"(?m)(?<![\w.#-])(#\d+|[A-Za-z][A-Za-z0-9_]*(?:[.-][A-Za-z0-9_]+)+)"
    r"[ \t]*(?:·|:|—|–|-|\|)[ \t]+(\S[^\n]*)"
)


def is_action(name: str) -> bool:
    """A named domain call that changes something, `verb_object` or `verbObject`
    (`cancel_reservation`, `sendEmail`): not a lookup, and not a one-word harness tool (Task)."""
    worded = "_" in name.strip("_") or "-" in name.strip("-") or _CAMEL_RE.match(name) is not None
    return worded and _LOOKUP_RE.match(name) is None


_CAMEL_RE: Final = re.compile(r"^[a-z]+[A-Z]")


def action_text(name: str, data: Any) -> str:
    """`name(key=value, …)` with the scalar arguments, for an action taken."""
    if isinstance(data, Mapping):
        parts = [
            f"{k}={shorten(one_line(str(v)), 40)}"
            for k, v in data.items()
            if isinstance(v, str | int | float) and not isinstance(v, bool)
        ]
        return shorten(f"{name}({', '.join(parts)})", 140)
    return shorten(f"{name}({one_line(str(data))})", 140)


def todo_entries(fields: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """(status, text) of each entry of a to-do / plan tool's list, or None when there is none."""
    for key in ("todos", "tasks", "plan", "task_list", "items", "steps"):
        entries = fields.get(key)
        if isinstance(entries, list) and entries and all(isinstance(e, Mapping) for e in entries):
            out: list[tuple[str, str]] = []
            for entry in entries:
                text = next(
                    (
                        entry[k]
                        for k in ("content", "title", "step", "task", "description", "text")
                        if isinstance(entry.get(k), str) and entry[k].strip()
                    ),
                    "",
                )
                raw = str(entry.get("status", entry.get("state", "?"))).lower()
                if text:
                    out.append((_STATUS_WORDS.get(raw, "open"), shorten(one_line(text), 160)))
            return tuple(out) if out else None
    return None


def subject_items(subject: str, known: Sequence[str]) -> list[str]:
    """Items a commit subject names: known items, and ticket-like ids."""
    found = [k for k in known if _names(subject, k)]
    for token in subject.replace("(", " ").replace(")", " ").replace(",", " ").split():
        core = token.strip(".:;[]")
        match = TOKEN_ID_RE.fullmatch(core)
        if match is not None and match.lastgroup in {"ticket", "jira"} and core not in found:
            found.append(core)
    return found


def _names(text: str, key: str) -> bool:
    at = text.find(key)
    while at >= 0:
        end = at + len(key)
        before = text[at - 1] if at else " "
        after = text[end] if end < len(text) else " "
        dotted = after == "." and end + 1 < len(text) and text[end + 1].isalnum()
        clear = not (before.isalnum() or before in "-.") and not (after.isalnum() or after in "-")
        if clear and not dotted:
            return True
        at = text.find(key, at + 1)
    return False


# -- the replay ---------------------------------------------------------------------------------


@dataclass(slots=True)
class WorkItem:
    key: str
    status: str
    first: int
    last: int
    title: str = ""
    commit: str = ""
    subject: str = ""
    reason: str = ""
    pushed: bool = False


@dataclass(slots=True)
class Commit:
    hash: str
    subject: str
    branch: str
    at: int
    pushed: bool = False


@dataclass(slots=True)
class TestRun:
    command: str
    tally: str
    failed: bool
    at: int


@dataclass(slots=True)
class Progress:
    """The state of the work as the span's commands left it; the newest event wins."""

    items: dict[str, WorkItem] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    failed_commits: int = 0
    commit_failure: str = ""
    changed: dict[str, int] = field(default_factory=dict)
    git: bool = False
    last_test: TestRun | None = None
    todo: tuple[tuple[str, str], ...] = ()
    actions: list[tuple[str, bool, int]] = field(default_factory=list)
    carried: list[str] = field(default_factory=list)
    # Where the last push went (`origin/feature-x`, a remote's address), when git said.
    push_target: str = ""

    def item(self, key: str, at: int) -> WorkItem:
        entry = self.items.get(key)
        if entry is None:
            entry = self.items[key] = WorkItem(key, "open", at, at)
        return entry

    def set_status(self, key: str, status: str, at: int, reason: str = "") -> None:
        entry = self.item(key, at)
        entry.status, entry.last = status, at
        if reason:
            entry.reason = reason
        if status != "done":
            return
        last = self.commits[-1] if self.commits else None
        # Closed right after a commit that changed nothing since: the work is in that commit.
        if not entry.commit and last is not None and not self.changed and last.at >= entry.first:
            entry.commit, entry.subject, entry.pushed = last.hash, last.subject, last.pushed

    def shown(self, key: str, at: int) -> None:
        self.item(key, at)

    def commit(self, branch: str, hash_: str, subject: str, at: int) -> None:
        self.commits.append(Commit(hash_, subject, branch, at))
        named = subject_items(subject, list(self.items))
        for key in named:
            entry = self.item(key, at)
            if entry.status == "open":
                entry.status = "committed"
            entry.commit, entry.subject, entry.pushed, entry.last = hash_, subject, False, at
        for entry in self.items.values():
            if entry.status == "done" and not entry.commit:
                entry.commit, entry.subject = hash_, subject
        self.changed.clear()
        self.failed_commits, self.commit_failure = 0, ""

    def commit_failed(self, why: str) -> None:
        self.failed_commits += 1
        self.commit_failure = why

    def pushed(self, target: str = "") -> None:
        # A push to the branch already tracked keeps the tracked name ("origin/x").
        branch = target.rsplit(" ", 1)[-1]
        if target and not self.push_target.endswith(f"/{branch}"):
            self.push_target = target
        for commit in self.commits:
            commit.pushed = True
        for entry in self.items.values():
            if entry.commit:
                entry.pushed = True

    def touch(self, path: str, at: int) -> None:
        self.changed.pop(path, None)
        self.changed[path] = at

    def tested(self, command: str, tally: str, failed: bool, at: int) -> None:
        run = TestRun(command, tally, failed, at)
        self.last_test = run

    def acted(self, call: str, ok: bool, at: int) -> None:
        self.actions.append((call, ok, at))
        if len(self.actions) > _MAX_ACTIONS:
            del self.actions[0]

    def titled(self, found: Mapping[str, str]) -> None:
        for key, title in found.items():
            entry = self.items.get(key)
            if entry is not None and not entry.title:
                entry.title = title
