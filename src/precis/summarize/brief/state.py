"""The state of the work as brief items: what is done (and committed), in progress, next, blocked.

Read from `Facts.progress` (`precis.facts.progress`). Each line names its subject first
("spotter-gqc.5 — title: done, committed bb53fb4"), so a later brief can tell which carried line
a newer state replaces. Items come most pressing first (in progress, blocked, uncommitted, the
last test run, next), the done ones after, newest first; they are shown in the order they happened.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from precis.facts import Facts, shorten
from precis.facts.progress import Progress, WorkItem
from precis.summarize.brief.items import Item, display_path

_MAX_PATHS = 8
_DONE_BASE = 0
_NOW_BASE = 1_000_000
_NEXT_BASE = 2_000_000


@dataclass(frozen=True, slots=True)
class StateLines:
    """The work state split the way the brief and the notes show it."""

    done: list[Item]
    current: list[Item]

    @property
    def all(self) -> list[Item]:
        """Most pressing first: the current state, then what got done."""
        return [*self.current, *self.done]


def subject_of(line: str) -> str:
    """What a state line is about: the text before its first ": " (the id and title)."""
    head, sep, _ = line.partition(": ")
    return head.split(" — ", 1)[0].strip().lstrip("-* ").lower() if sep else ""


def _status(entry: WorkItem, progress: Progress, labels: Mapping[str, str]) -> str:
    """How one item's line states it: status, commit, push, what is not saved yet."""
    status = entry.status
    parts = [labels[f"s_{status}"]]
    if entry.commit:
        committed = f"{labels['s_committed'] if status != 'committed' else ''} {entry.commit}"
        if status == "committed":
            parts = [committed.strip()]
        elif status == "done":
            parts.append(committed.strip())
        else:
            parts.append(f"{labels['last_commit']} {entry.commit}")
        if entry.pushed:
            parts.append(labels["pushed"])
    elif progress.git and (status == "done" or (status == "in_progress" and progress.changed)):
        parts.append(labels["not_committed"])
    return ", ".join(parts)


def _item_line(entry: WorkItem, progress: Progress, labels: Mapping[str, str]) -> Item:
    name = f"{entry.key} — {entry.title}" if entry.title else entry.key
    state = _status(entry, progress, labels)
    subject = f' "{entry.subject}"' if entry.subject and not entry.title else ""
    reason = f" ({entry.reason})" if entry.reason else ""
    if entry.reason and entry.status == "in_progress" and "/" in entry.reason:
        reason = f" ({entry.reason} {labels['sub_done']})"
    full = f"{name}: {state}{subject}{reason}"
    variants = tuple(
        dict.fromkeys(
            t
            for t in (f"{name}: {state}{subject}", f"{name}: {state}", f"{entry.key}: {state}")
            if t != full
        )
    )
    return Item(full, entry.last, shrink=False, variants=variants)


def _with_children(progress: Progress) -> dict[str, WorkItem]:
    """Items as shown: an open item whose sub-items (`X.1`, `X-2`) are under way is itself in
    progress, with how many of them are done."""
    items = dict(progress.items)
    for key, entry in progress.items.items():
        if entry.status != "open":
            continue
        kids = [e for k, e in items.items() if k != key and k.startswith((f"{key}.", f"{key}-"))]
        started = [e for e in kids if e.status != "open"]
        if started:
            finished = sum(1 for e in kids if e.status in {"done", "committed"})
            items[key] = replace(
                entry,
                status="in_progress",
                last=max(e.last for e in started),
                reason=f"{finished}/{len(kids)}",
            )
    return items


def state_lines(facts: Facts, labels: Mapping[str, str], root: str) -> StateLines:
    """The span's work state as items, with the lines an earlier brief carried."""
    progress = facts.progress
    done: list[Item] = []
    current: list[Item] = []
    later: list[Item] = []
    subjects: set[str] = set()
    for entry in sorted(_with_children(progress).values(), key=lambda e: -e.last):
        item = _item_line(entry, progress, labels)
        subjects.add(entry.key.lower())
        if entry.status in {"done", "committed"}:
            item.order = _DONE_BASE + entry.last
            done.append(item)
        elif entry.status == "open":
            item.order = _NEXT_BASE + entry.first
            later.append(item)
        else:
            item.order = _NOW_BASE + entry.last
            current.append(item)
    linked = {e.commit for e in progress.items.values() if e.commit}
    for commit in reversed(progress.commits):
        if commit.hash in linked:
            continue
        pushed = f", {labels['pushed']}" if commit.pushed else ""
        text = f'{labels["s_committed"]} {commit.hash} "{commit.subject}"{pushed}'
        done.append(Item(text, _DONE_BASE + commit.at, shrink=False))
    if progress.failed_commits:
        times = f" (×{progress.failed_commits})" if progress.failed_commits > 1 else ""
        why = shorten(progress.commit_failure, 200)
        current.append(
            Item(f"{labels['commit_failed']}{times}: {why}", _NOW_BASE + 10**5, shrink=True)
        )
    if progress.git and progress.changed:
        current.append(_uncommitted(progress, labels, root))
    if progress.push_target and any(c.pushed for c in progress.commits):
        text = f"{labels['last_push']}: {progress.push_target}"
        current.append(Item(text, _NOW_BASE + 2 * 10**5 + 1, shrink=False))
    test = progress.last_test
    if test is not None:
        text = f"{labels['tests']}: {test.command} → {test.tally}"
        current.append(Item(text, _NOW_BASE + 3 * 10**5, shrink=True))
    current += _todo_items(progress.todo, labels)
    left = _not_acted_on(facts)
    if left:
        text = f"{labels['not_acted']}: {', '.join(left)}"
        current.append(Item(text, _NOW_BASE + 5 * 10**5, shrink=False))
    for call, ok, at in reversed(progress.actions):
        text = f"{labels['s_done'] if ok else labels['failed']}: {call}"
        done.append(Item(text, _DONE_BASE + at, shrink=True))
    carried = [
        Item(line, i - 10**5, shrink=False)
        for i, line in enumerate(dict.fromkeys(progress.carried))
        if subject_of(line) not in subjects
    ]
    return StateLines([*done, *reversed(carried)], [*current, *later])


def _uncommitted(progress: Progress, labels: Mapping[str, str], root: str) -> Item:
    paths = [display_path(p, root) for p in reversed(progress.changed)]
    shown = ", ".join(paths[:_MAX_PATHS]) + (", …" if len(paths) > _MAX_PATHS else "")
    last = progress.commits[-1].hash if progress.commits else ""
    since = f" ({labels['since']} {last})" if last else ""
    text = f"{labels['not_committed_files']}{since}: {shown}"
    short = f"{labels['not_committed_files']}{since}: {', '.join(paths[:2])}"
    return Item(text, _NOW_BASE + 2 * 10**5, shrink=False, variants=(short,))


def _todo_items(entries: Sequence[tuple[str, str]], labels: Mapping[str, str]) -> list[Item]:
    """A to-do list's entries: the one in progress, then what is next, then the finished ones."""
    rank = {"in_progress": 0, "blocked": 1, "open": 2, "done": 3}
    ordered = sorted(enumerate(entries), key=lambda e: (rank.get(e[1][0], 2), e[0]))
    return [
        Item(f"[{labels[f's_{status}']}] {text}", _NOW_BASE + 4 * 10**5 + i, shrink=True)
        for i, (status, text) in ordered
    ]


def _not_acted_on(facts: Facts) -> list[str]:
    """The records looked up that no action named, when actions named others looked up by
    the same argument (`reservation_id`): those the work has not got to, or passed over."""
    actions = [call for call, _, _ in facts.progress.actions]
    if not actions or not facts.records:
        return []
    terms = facts.identifiers.terms

    def argument(key: str) -> str:
        term = terms.get(key)
        name, sep, value = term.label.partition("=") if term is not None else ("", "", "")
        return name if sep and value == key else ""

    acted = {k for k in facts.records if any(_names(call, k) for call in actions)}
    kinds = {argument(k) for k in acted} - {""}
    return [k for k in facts.records if k not in acted and argument(k) in kinds]


def _names(text: str, key: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text) is not None
