"""From collected facts to each section's candidate items, before any budget applies."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from precis.core.jscompat import utf16_len
from precis.facts import (
    W_OUTPUT,
    ErrorEntry,
    Facts,
    TermEntry,
    basename,
    compact,
    fold,
    forbids,
    is_trivial,
    one_line,
    project_root,
    shorten,
)
from precis.facts.extract import REQUEST_UNITS
from precis.facts.gist import note_text, request_gist, task_gist
from precis.facts.patterns import CODE_BLOCK_RE, ERROR_CLASS_RE, STRONG_CONSTRAINT_RE
from precis.summarize.brief.items import Item, display_path
from precis.summarize.brief.labels import (
    CODE,
    CONSTRAINTS,
    DECISIONS,
    DONE,
    ERRORS,
    FILES,
    FILL_ORDER,
    FINDINGS,
    IDENTIFIERS,
    INSTRUCTION_SECTIONS,
    MAX_HINTS,
    MODIFIED,
    NOTES,
    OPEN,
    PHASE,
    READ,
    RECORDS,
    REQUESTS,
    SMALL_BRIEF_CHARS,
    STATE,
    TASK,
    TOOLS,
    WORK,
)
from precis.summarize.brief.state import state_lines
from precis.summarize.prompts import phase_line

__all__ = ["Item", "Ranked", "display_path", "hint_items", "rank", "sections", "wanted_sections"]


def _path_items(
    terms: list[TermEntry], root: str, names: set[str], listed: Iterable[str] = ()
) -> list[Item]:
    """Ranked path items shown relative to the project root, each path once, in rank order.

    A bare file name is left out when one of `names` (basenames of full paths) already covers it.
    """
    items: list[Item] = []
    seen = set(listed)
    for rank, term in enumerate(terms):
        shown = display_path(term.label, root)
        if shown in seen or ("/" not in term.label and term.label in names):
            continue
        seen.add(shown)
        # Read in rank order, the newest and most used first: a cut tail drops the stalest.
        items.append(Item(shown, rank, shrink=False, late=term.weight <= W_OUTPUT))
    return items


def wanted_sections(instructions: str | None) -> list[str]:
    """The sections a caller's own prompt names, in the default fill order."""
    if not instructions:
        return []
    named = {
        k for pattern, keys in INSTRUCTION_SECTIONS if pattern.search(instructions) for k in keys
    }
    return [k for k in FILL_ORDER if k in named]


# The share of the budget the task's gist may take when the task is pinned beside the summary.
PINNED_TASK_SHARE = 0.12


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


def _text_item(text: str, order: int, cap: int, keep: tuple[str, ...] = ()) -> Item:
    return Item(shorten(one_line(text), cap, keep), order, keep)


def _constraint_items(
    facts: Facts, cap: int, *, small: bool = False, pinned: bool = False
) -> list[Item]:
    """The user's prohibitions first, then the user's other rules, then the system prompt's.

    A finished tracker item's specs say what was built: in a larger brief they come after the
    rules that still bind, within the section's share; a small brief leaves them for last. So
    do its prohibitions that bind only that item ("No UI changes in this task.").
    With the task `pinned` beside the summary (letta's brief, which shows the task by its gist),
    the rules it states are read there, verbatim: the brief does not list them again."""
    held = fold(facts.task) if pinned and facts.task else ""
    user_rules = [v for v in facts.constraints.values() if not (held and fold(v) in held)]
    spec_rules = [
        v
        for k, v in facts.spec_constraints.items()
        if k not in facts.constraints and not (held and fold(v) in held)
    ]
    system_rules = [
        v
        for k, v in facts.system_constraints.items()
        if k not in facts.constraints and k not in facts.spec_constraints
    ]
    ruled = user_rules + spec_rules
    everything = ruled + system_rules
    # A rule another one holds whole (a sentence of a listed item) is shown once, in the fuller;
    # a small brief has no room for what a listed item says after the rule it opens with
    # ("DO NOT run … binary output! Instead try …"): it shows the rule's sentence alone, as the
    # guard demands it (a rule that leans on the sentence before it is shown in its item).
    lowered = [r.lower() for r in everything]

    def shown(i: int) -> bool:
        if small and any(j != i and lowered[i].startswith(lowered[j]) for j in range(len(ruled))):
            return False
        return not any(
            j != i and lowered[i] in other and not (small and other.startswith(lowered[i]))
            for j, other in enumerate(lowered)
        )

    items = [_text_item(rule, i, cap) for i, rule in enumerate(everything) if shown(i)]
    # The system prompt stays in context anyway; a finished tracker item's specs say what was
    # built, after the rules that still bind (its prohibitions still stand).
    finished = {k for k, e in facts.progress.items.items() if e.status in {"done", "committed"}}
    # While one item is worked on, the specs of those not started yet wait as a finished one's.
    items_ = facts.progress.items.values()
    if any(e.status == "in_progress" for e in items_):
        finished |= {e.key for e in items_ if e.status == "open"}
    done: set[int] = set()
    for item in items:
        rule = everything[item.order]
        done_with = facts.spec_sources.get(rule.lower()) in finished and (
            not forbids(rule) or _THIS_TASK_RE.search(rule) is not None
        )
        if done_with:
            done.add(item.order)
            item.modest = not small  # the section's share, not everyone's room
        item.late = item.order >= len(ruled) or (done_with and small)
    return sorted(
        items,
        key=lambda i: (
            i.late,
            i.order in done,
            i.order >= len(user_rules),
            STRONG_CONSTRAINT_RE.search(i.text) is None,
        ),
    )


# A rule that binds only the item it was written for ("No UI changes in this task.").
_THIS_TASK_RE: Final = re.compile(
    r"(?i)\b(?:in|for|during|by) this (?:task|ticket|issue|item|subtask|change)\b"
)


def _request_items(facts: Facts, cap: int) -> list[Item]:
    """The newest substantive requests first; all shown in the order they were made."""
    fresh: dict[str, Item] = {}
    carried = len(facts.carried_requests)
    for index, text, keep in reversed(facts.requests):
        gist = request_gist(text)
        item = _text_item(gist, carried + index, cap, keep)
        # Short of room, the request's opening (the line the guard looks for) before a cut.
        item.variants = (compact(gist, REQUEST_UNITS),)
        fresh.setdefault(item.text, item)
    ranked = sorted(fresh.values(), key=lambda i: is_trivial(i.text))
    earlier = [_text_item(t, i, cap) for i, t in enumerate(facts.carried_requests)]
    return [*ranked, *reversed(earlier)]


def _error_items(errors: list[ErrorEntry], cap: int) -> list[Item]:
    """The latest errors first, each with how often it recurred and what was tried next."""
    items: list[Item] = []
    fixed: dict[tuple[int, str], int] = {}  # (where seen, fix) → its item
    for error in errors:
        text = error.signature if error.carried else shorten(error.signature, 200)
        if error.count > 1 and not error.carried:
            text += f" (×{error.count})"
        # Errors one output printed, with one fix, are one line: the fix is said once.
        k = fixed.get((error.first, error.fix)) if error.fix else None
        if k is not None:
            signatures, _, fix = items[k].text.partition(" → ")
            joined = f"{signatures}; {text} → {fix}"
            items[k] = _text_item(joined, items[k].order, cap + utf16_len(text) + 2)
            continue
        if error.fix:
            fixed[(error.first, error.fix)] = len(items)
            text += f" → {shorten(error.fix, 240)}"
        items.append(_text_item(text, error.first, cap))
    return items


def _seen_error_names(
    facts: Facts, errors: Sequence[ErrorEntry], labels: Mapping[str, str]
) -> list[Item]:
    """Error names seen in a run's output or a log that no listed error names, most often seen
    first, as one line that loses its tail before it is dropped (those only a source file
    mentions are lookup hints)."""
    said = " ".join(e.signature for e in errors)
    terms = sorted(facts.error_names.terms.values(), key=lambda t: (-t.count, -t.last))
    names = [t.label for t in terms if t.kind == "error" and t.label not in said]
    items = _listing(labels["also_seen"], names)
    for item in items:
        item.order = 10**6
    return items


def _identifier_items(facts: Facts) -> list[Item]:
    """Ranked identifiers; values of one argument are shown together, its name once
    ("reservation_id=NM1VX1, KC18K6")."""
    items: list[Item] = []
    group: dict[str, int] = {}
    before, listed = "\n", 0  # the names listed so far, a line each
    for rank, term in enumerate(facts.identifiers.ranked()):
        # A name an identifier listed before it holds whole ("with_span" after
        # "Tracer.with_span", not "Session" after "SessionLive") is read there already.
        if term.label in before and _holds(before, term.label):
            continue
        if listed < _HELD_WITHIN:
            before, listed = f"{before}{term.label}\n", listed + 1
        name, sep, value = term.label.partition("=")
        order = rank * 1000  # read in rank order: the newest and most used first
        text = term.label
        if sep and value:
            if name in group:
                text, order = value, group[name] + 1 + rank
            else:
                group[name] = order
        items.append(Item(text, order, shrink=False, late=term.weight <= W_OUTPUT))
    return items


# How many of the first identifiers a later one is compared with (a list shows no more).
_HELD_WITHIN = 400
_NAME_CHAR_RE: Final = re.compile(r"[A-Za-z0-9_]")


def _holds(longer: str, name: str) -> bool:
    """Whether `name` stands in `longer` as a whole part: no letter, digit or _ next to it."""
    at = longer.find(name)
    while at >= 0:
        end = at + len(name)
        left = longer[at - 1] if at else ""
        right = longer[end] if end < len(longer) else ""
        if not _NAME_CHAR_RE.match(left) and not _NAME_CHAR_RE.match(right):
            return True
        at = longer.find(name, at + 1)
    return False


def _tool_items(facts: Facts) -> list[Item]:
    """Call counts (losing the rarest tools first when short of room), then the newest calls."""
    if not facts.tool_counts:
        return []
    counts = sorted(facts.tool_counts.items(), key=lambda kv: -kv[1])
    tallies = [f"{n}×{c}" for n, c in counts]
    shorter = tuple(", ".join(tallies[:n]) for n in (8, 5, 3, 1) if n < len(tallies))
    items = [Item(", ".join(tallies), 0, shrink=False, variants=shorter)]
    calls = list(enumerate(facts.recent_calls, start=1))
    items += [Item(f"→ {call}", i, shrink=False, late=True) for i, call in reversed(calls)]
    return items


def _open_items(
    facts: Facts, labels: Mapping[str, str], cap: int, *, requests_listed: bool = False
) -> list[Item]:
    """What is still pending: an unanswered request (unless the requests are listed apart),
    calls without results, to-dos."""
    texts: list[str] = []
    last = facts.last_request
    unanswered = last and not facts.last_request_answered and facts.requests
    if unanswered and not requests_listed and not is_trivial(last):
        texts.append(f"{labels['unanswered']}: {shorten(one_line(last), 100)}")
    texts += [f"{labels['awaiting']}: {call}" for call in facts.pending_calls.values()]
    texts += facts.todo_tool_items
    texts += reversed(facts.todo_lines)
    texts += facts.carried_open
    return [_text_item(t, i, cap) for i, t in enumerate(dict.fromkeys(texts))]


def hint_items(
    facts: Facts,
    errors: list[ErrorEntry],
    modified: list[TermEntry],
    read: list[TermEntry],
    shown: str,
) -> list[Item]:
    """Search terms for what did not make it into the brief: error names, files, identifiers."""
    candidates: list[str] = []
    for error in errors:
        candidates += ERROR_CLASS_RE.findall(error.signature)
    candidates += [t.label for t in facts.error_names.terms.values()]
    candidates += [basename(t.label) for t in modified]
    candidates += [t.label.split("=", 1)[-1] for t in facts.identifiers.ranked()]
    candidates += [basename(t.label) for t in read if t.weight > W_OUTPUT]
    candidates += facts.carried_hints
    # Last, what the code read calls most (room permitting): what it is built on.
    called = sorted(facts.calls_read.items(), key=lambda kv: -kv[1])
    candidates += [name for name, n in called if n >= _CALLED_TIMES]
    # The first that the brief does not show already.
    fresh = [t for t in dict.fromkeys(candidates) if t and utf16_len(t) <= 60 and t not in shown]
    return [Item(term, i, shrink=False) for i, term in enumerate(fresh[:MAX_HINTS])]


_CALLED_TIMES = 2


@dataclass(slots=True)
class Ranked:
    """The span's files and errors, ranked once and shared by every style."""

    modified: list[TermEntry]
    read: list[TermEntry]
    root: str
    modified_items: list[Item]
    read_items: list[Item]
    errors: list[ErrorEntry]


def rank(facts: Facts, *, use_root: bool = True) -> Ranked:
    modified = facts.modified.ranked()
    read = facts.read.ranked()
    root = ""
    if use_root:
        root = project_root([t.label for t in modified]) or project_root(
            [t.label for t in modified] + [t.label for t in read[:200]]
        )
    modified_names = {basename(t.label) for t in modified if "/" in t.label}
    read_names = {basename(t.label) for t in read if "/" in t.label}
    modified_items = _path_items(modified, root, modified_names)
    listed = {i.text for i in modified_items}
    read_items = _path_items(read, root, modified_names | read_names, listed)
    errors = sorted(facts.errors.values(), key=lambda e: (e.carried, -e.last, e.first))
    return Ranked(modified, read, root, modified_items, read_items, errors)


def _task_items(
    facts: Facts, labels: Mapping[str, str], cap: int, *, keep_rules: bool = True
) -> list[Item]:
    """The task, head and tail when long; its rules kept inside it unless a section lists them."""
    if not facts.task:
        return []
    task = f"({labels['earlier']}) {facts.task}" if facts.task_from_summary else facts.task
    if keep_rules:
        return [_text_item(task, 0, cap, facts.task_keep)]
    # Its rules are listed with the others: a long task is shown by its gist.
    return [Item(task_gist(task, cap, frozenset(facts.constraints)), 0)]


def _phase_items(facts: Facts, language: str) -> list[Item]:
    """One line per finished phase, never shortened, so the name survives verbatim."""
    phases = dict.fromkeys(p.strip() for p in facts.phases if p.strip())
    return [Item(phase_line(p, language), i, shrink=False) for i, p in enumerate(phases)]


def _listing(label: str, names: Sequence[str]) -> list[Item]:
    """A labelled comma list as one item that loses its tail before it is dropped."""
    if not names:
        return []
    shorter = tuple(f"{label}: {', '.join(names[:n])}" for n in (20, 10, 5, 2, 1) if n < len(names))
    return [Item(f"{label}: {', '.join(names)}", 0, shrink=False, variants=shorter)]


def _newest_first(texts: Iterable[str], cap: int) -> list[Item]:
    """Items shown in the order they happened but filled newest first when room is short."""
    items = [_text_item(t, i, cap) for i, t in enumerate(dict.fromkeys(texts))]
    return list(reversed(items))


def _done_items(facts: Facts) -> list[Item]:
    """Answered requests with the gist of the answer, then the tool calls that came back clean."""
    texts = list(facts.carried_done)
    texts += [
        f"{shorten(one_line(request), 140)} → {shorten(one_line(reply), 140)}"
        for request, reply in facts.answered
    ]
    texts += list(facts.completed_calls)
    return _newest_first(texts, 300)


def _finding_items(
    facts: Facts,
    labels: Mapping[str, str],
    mode: str,
    ranked: Ranked,
    *,
    with_files: bool,
) -> list[Item]:
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


def _note_items(facts: Facts, mode: str, units: int) -> list[Item]:
    """The agent's own words turn by turn, with what its calls came back with: filled newest
    first, shown in order. In all-mode the last turn's words are the current state instead."""
    texts: list[str] = []
    worths: list[int] = []
    changes: dict[int, tuple[str, ...]] = {}
    last_change = next((n for n in reversed(facts.notes) if n.wrote), None)
    latest = one_line(facts.last_assistant_text)[:40] if mode == "all" else ""
    for note in facts.notes:
        said = note.text
        if (
            latest
            and said.startswith(latest[: len(said)])
            and said[:40] == latest[: len(said[:40])]
        ):
            said = ""  # all-mode shows the latest words whole, as the current state
        calls = "; ".join(note.calls[:_NOTE_CALLS])
        if len(note.calls) > _NOTE_CALLS:
            calls += f"; +{len(note.calls) - _NOTE_CALLS}"
        line = f"{said} ⇒ {calls}" if said and calls else said or (f"⇒ {calls}" if calls else "")
        if line:
            if note.wrote and said and calls:
                # Short of room, its words are cut before the change it made.
                cut = (shorten(said, n) for n in _CUT_WORDS if n < utf16_len(said))
                changes[len(texts)] = (*(f"{w} ⇒ {calls}" for w in cut), f"⇒ {calls}")
            texts.append(line)
            # What it found: the values it states, and those of its results the work used.
            stated = note.values if said else 0
            reasons = _REASONED_WEIGHT if said and REASONED_RE.search(said) else 0
            wrote = _WROTE_WEIGHT if note is last_change else 0
            worths.append(
                min(stated, _MAX_SAID) + _USED_WEIGHT * min(note.used, 4) + reasons + wrote
            )
    items = _by_worth(texts, worths, units)
    for item in items:
        if item.order in changes:
            item.variants = changes[item.order]
    return items


def _by_worth(texts: Sequence[str], worths: Sequence[int], cap: int) -> list[Item]:
    """Notes shown in the order they happened, filled by worth: the newest few first (where
    the work stands), then those worth the most, newer first among equals."""
    items = [_text_item(t, i, cap) for i, t in enumerate(texts)]
    newest = len(items) - _NEWEST_NOTES
    return sorted(items, key=lambda i: (i.order < newest, -worths[i.order], -i.order))


_NEWEST_NOTES = 3
# A turn that says why (a cause, a finding, a fix, a choice) is what a successor would
# otherwise have to work out again: worth as much as a few values.
_REASONED_WEIGHT = 3
REASONED_RE: Final = re.compile(
    r"(?i)\b(?:because|since the|due to|caused by|(?:root )?cause|the (?:issue|problem|bug|"
    r"reason) (?:is|was)|this means|which means|means that|turns out|instead of|rather than|"
    r"so that|that's why|this is why|the fix|to fix|fixed by|we need to|must be|"
    r"(?:confirms?|shows?|indicates?|suggests?) that)\b"
)
_MAX_SAID = 8
_USED_WEIGHT = 2
# The newest change the work made (the last turn whose call changed a file) is where the code
# stands: it outweighs a turn that states a few values.
_WROTE_WEIGHT = 5
# How far a note that changed a file may cut its words, widest first, to keep the change whole.
_CUT_WORDS = (160, 100, 60)


_NOTE_CALLS = 2
# One note's most: a turn's words and what its calls came back with; a larger brief shows more
# of each (a value the work turned on is often past the first few).
_NOTE_UNITS = 260
_WIDE_NOTE_UNITS = 400


def _code_items(facts: Facts, root: str) -> list[Item]:
    """What each source file read defines, the newest read first."""
    outlines = list(facts.outlines.items())
    return [
        Item(f"{display_path(path, root)}: {outline}", i)
        for i, (path, outline) in reversed(list(enumerate(outlines)))
    ]


def _record_items(facts: Facts, budget: int) -> list[Item]:
    """The records looked up, shown in the order they were last seen, filled by the last time
    the work named their id (the one it acts on first); a small brief (or one short of room)
    shows each by its codes and amounts alone."""
    items: list[Item] = []
    named: dict[int, int] = {}
    for i, r in enumerate(facts.records.values()):
        lean = f"{r.key}: {r.lean}" if r.lean else ""
        if budget <= SMALL_BRIEF_CHARS and lean:
            items.append(Item(lean, i))
        else:
            items.append(Item(f"{r.key}: {r.text}", i, variants=(lean,) if lean else ()))
        term = facts.identifiers.terms.get(r.key)
        named[i] = term.last if term is not None else -1
    return sorted(items, key=lambda item: (-named[item.order], -item.order))


def _decision_items(facts: Facts, labels: Mapping[str, str]) -> list[Item]:
    """Choices stated outright and proposals the user said yes to, in the order they were made."""
    texts = [*facts.carried_decisions, *facts.decisions.values()]
    texts += [
        f"{proposal} ({labels['confirmed']}: {answer})" for proposal, answer in facts.confirmations
    ]
    items = _newest_first(texts, 300)
    for item in items:
        item.modest = True
    return items


def sections(
    style: str,
    facts: Facts,
    labels: Mapping[str, str],
    language: str,
    mode: str,
    budget: int,
    ranked: Ranked,
) -> dict[str, list[Item]]:
    """Every section's candidate items for one style, before any budget is applied."""
    caps = _item_caps(budget)
    if facts.task_given:  # pinned beside the summary: a reminder is enough
        caps[TASK] = max(120, int(budget * PINNED_TASK_SHARE))
    work = state_lines(facts, labels, ranked.root)
    out: dict[str, list[Item]] = {
        TASK: _task_items(facts, labels, caps[TASK], keep_rules=style != "letta"),
        PHASE: _phase_items(facts, language),
        CONSTRAINTS: _constraint_items(
            facts,
            caps[CONSTRAINTS],
            small=budget <= SMALL_BRIEF_CHARS,
            pinned=facts.task_given and style == "letta",
        ),
    }
    if style == "letta":
        out[REQUESTS] = _request_items(facts, caps[REQUESTS])
        out[MODIFIED] = ranked.modified_items
        out[READ] = ranked.read_items
        out[IDENTIFIERS] = _identifier_items(facts)
        out[ERRORS] = [
            *_error_items(ranked.errors, caps[ERRORS]),
            *_seen_error_names(facts, ranked.errors, labels),
        ]
        if mode == "all" and facts.last_assistant_text:
            prose = CODE_BLOCK_RE.sub(" ", facts.last_assistant_text)
            out[STATE] = [Item(note_text(prose, caps[STATE]), 0)]
        # A small brief has no room for call tallies: its notes say what the calls did.
        out[TOOLS] = _tool_items(facts) if budget > SMALL_BRIEF_CHARS else []
        out[OPEN] = _open_items(facts, labels, caps[OPEN], requests_listed=True)
        out[WORK] = work.all
        out[RECORDS] = _record_items(facts, budget)
        out[DECISIONS] = _decision_items(facts, labels)
        wide = budget > SMALL_BRIEF_CHARS
        out[NOTES] = _note_items(facts, mode, _WIDE_NOTE_UNITS if wide else _NOTE_UNITS)
        out[CODE] = _code_items(facts, ranked.root)
        return out
    out[DONE] = [*work.done, *_done_items(facts)]
    out[OPEN] = [*work.current, *_open_items(facts, labels, caps[OPEN])]
    out[FINDINGS] = _finding_items(facts, labels, mode, ranked, with_files=style == "notes")
    if style == "brief":
        out[FILES] = [*ranked.modified_items, *ranked.read_items]
    else:
        out[DECISIONS] = _decision_items(facts, labels)
    return out
