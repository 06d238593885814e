"""The collector: one pass over a span, replaying each message's scan into the span's facts.

The scans (`precis.facts.scan`) hold every rule that reads one message; the replay here adds what
depends on the order: the task, requests and their answers, the open file, pending calls, errors
and the fix that followed, the newest to-dos. An earlier summary met in the span is folded in by
a `SummaryReader` when one is given (the brief reads its own sections), else as plain text.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from precis.core.jscompat import utf16_len
from precis.core.memo import Memo
from precis.core.messages import Message
from precis.facts.demos import request_part
from precis.facts.fixes import FIX_CHANGE_MESSAGES, fixed_by, refusal
from precis.facts.gist import Note, calls_made, code_outline, file_held, value_count, value_tokens
from precis.facts.patterns import (
    MAX_SYSTEM_CONSTRAINTS,
    PATH_EXT_RE,
    RECENT_CALLS,
    RECENT_DONE_CALLS,
    RECENT_TODOS,
    SPEC_RULE_RE,
    USER_ANSWER_PREFIXES,
)
from precis.facts.progress import Progress, children, exit_failed, titles
from precis.facts.records import Record, file_record, read_record
from precis.facts.rules import constraint_sentences
from precis.facts.scan import (
    AssistantScan,
    CallScan,
    SummaryScan,
    SystemScan,
    ToolScan,
    UserScan,
    offered,
    scan,
    task_scan,
)
from precis.facts.tally import W_ARGS, W_CARRIED, W_OUTPUT, W_SPOKEN, W_USER, Tally
from precis.facts.terms import Term, terms_in, unnumbered
from precis.facts.text import (
    by_strength,
    forbids,
    heading_rules,
    is_trivial,
    one_line,
    shorten,
)


@dataclass(slots=True)
class ErrorEntry:
    signature: str
    count: int
    first: int
    last: int
    fix: str = ""
    carried: bool = False


@dataclass(slots=True)
class Facts:
    """Everything the rules found in one pass over the span."""

    task: str = ""
    task_keep: tuple[str, ...] = ()
    task_from_summary: bool = False
    # The caller gave the task (it is pinned, kept whole beside the summary).
    task_given: bool = False
    requests: list[tuple[int, str, tuple[str, ...]]] = field(default_factory=list)
    carried_requests: list[str] = field(default_factory=list)
    constraints: dict[str, str] = field(default_factory=dict)
    system_constraints: dict[str, str] = field(default_factory=dict)
    modified: Tally = field(default_factory=Tally)
    read: Tally = field(default_factory=Tally)
    identifiers: Tally = field(default_factory=Tally)
    errors: dict[str, ErrorEntry] = field(default_factory=dict)
    tool_counts: dict[str, int] = field(default_factory=dict)
    recent_calls: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_CALLS))
    pending_calls: dict[str, str] = field(default_factory=dict)
    todo_lines: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_TODOS))
    todo_tool_items: list[str] = field(default_factory=list)
    carried_open: list[str] = field(default_factory=list)
    carried_hints: list[str] = field(default_factory=list)
    last_request: str = ""
    last_request_answered: bool = True
    last_assistant_text: str = ""
    user_texts: list[str] = field(default_factory=list)
    # For the brief and the notes: what got done, decided, and carried from an earlier one.
    answered: list[tuple[str, str]] = field(default_factory=list)
    completed_calls: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_DONE_CALLS))
    decisions: dict[str, str] = field(default_factory=dict)
    confirmations: list[tuple[str, str]] = field(default_factory=list)
    carried_done: list[str] = field(default_factory=list)
    carried_findings: list[str] = field(default_factory=list)
    carried_decisions: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    # Where the work stands: tracker items, commits, pushes, test runs, a to-do list, actions.
    progress: Progress = field(default_factory=Progress)
    # The agent's own words, one line per turn that said something.
    notes: list[Note] = field(default_factory=list)
    # Error class names any output mentioned (file reads and logs included), for lookup.
    error_names: Tally = field(default_factory=Tally)
    # Rules the task's own documents state (a tracker's issue the agent was sent to read).
    spec_constraints: dict[str, str] = field(default_factory=dict)
    # The tracker item each of those rules came from, when one did (by the rule, lowercased).
    spec_sources: dict[str, str] = field(default_factory=dict)
    # What each source file the agent read defines (`gist.code_outline`), newest read last.
    outlines: dict[str, str] = field(default_factory=dict)
    # The functions the source files read call without defining them, with how often.
    calls_read: dict[str, int] = field(default_factory=dict)
    # The records the agent's lookups returned (`precis.facts.records`), by id, newest last.
    records: dict[str, Record] = field(default_factory=dict)


MAX_SPEC_CONSTRAINTS = 128
MAX_ITEM_RULES = 16
MAX_SPEC_UNITS = 300
MAX_ANSWER_UNITS = 300


def spec_rules(text: str) -> tuple[tuple[int, str], ...]:
    """The rules an issue states, each with where it stands in the text: its prohibitions
    first, then what must hold and the items under its rules headings (of three words or more:
    not a bare name), in the order given."""
    stated = [s for s in constraint_sentences(text) if SPEC_RULE_RE.search(s)]
    listed = [r for r in heading_rules(text) if len(r.split()) >= 3]
    rules = [r for r in dict.fromkeys((*stated, *listed)) if utf16_len(r) <= MAX_SPEC_UNITS]
    placed = [(max(0, text.find(r[:24])), r) for r in rules]
    return tuple(sorted(placed, key=lambda p: (not forbids(p[1]), p[0])))


def _section_start(text: str, key: str) -> int:
    """Where a tracker's output shows `key`'s own section: the line that opens with it (after a
    status mark), not an earlier item's list of what it blocks; else its first mention."""
    heading = re.search(rf"(?m)^[^\w\n]{{0,4}}{re.escape(key)}(?![\w-]|\.\w)", text)
    return heading.start() if heading else max(0, text.find(key))


# Folds an earlier summary's text into the collector; False leaves it to the plain-text fold.
SummaryReader = Callable[["Collector", str], bool]


class Collector:
    """One linear pass over the span, filling `Facts`; `memo`, the session's, keeps each
    message's scan (without one, every message fed is scanned)."""

    def __init__(
        self,
        task: str | None = None,
        *,
        reader: SummaryReader | None = None,
        full: bool = True,
        memo: Memo | None = None,
    ) -> None:
        self.facts = Facts()
        self.memo = memo
        self._reader = reader
        # The brief reads everything; the guard's facts need no code names, notes or error names.
        self._full = full
        self._calls: dict[str, CallScan] = {}
        self._noted: dict[str, Note | None] = {}
        # Values the noted calls' results gave, by the note they are on, until a turn uses them.
        self._produced: dict[str, Note] = {}
        self._item_rules: dict[str, int] = {}  # rules filed per tracker item
        self._clock = 0  # messages fed so far: the order of progress events
        self._awaiting_fix: list[ErrorEntry] = []
        # Errors whose fix so far is words, with when they were said, until a change is made.
        self._awaiting_change: list[tuple[ErrorEntry, int]] = []
        self._open_file: str | None = None
        self._index = 0
        self._given_task = one_line(request_part(task) or task) if task and task.strip() else ""
        self._previous_role = ""
        if task and task.strip():
            self._set_task(task.strip())

    def _set_task(self, task: str) -> None:
        """The caller's task stands first and its rules are red lines, whatever the span holds."""
        facts = self.facts
        task = request_part(task) or task  # a pinned demonstration's request, not its example
        found, keep, terms, listed = task_scan(task, self.memo)
        for sentence in found:
            facts.constraints.setdefault(sentence.lower(), sentence)
        self._spec_rules(listed)
        facts.task, facts.task_keep, facts.task_given = task, keep, True
        facts.user_texts.append(task)
        self.add_terms(terms, W_USER, W_USER)

    def fold(self, summary: str) -> None:
        """Carry the summary being replaced, before the span's own messages."""
        self._fold_summary(summary)

    def feed(self, messages: Sequence[Message]) -> Facts:
        for index, message in enumerate(messages):
            self.feed_one(message, index)
        return self.facts

    def feed_one(self, message: Message, index: int) -> None:
        """One message, at position `index` of the span (errors remember where they were seen)."""
        self._index = index
        self._clock += 1
        found = scan(message, self.memo)
        if isinstance(found, SummaryScan):
            self._fold_summary(found.text)
        elif isinstance(found, SystemScan):
            self._on_system(found)
        elif isinstance(found, UserScan):
            self._on_user(found)
        elif isinstance(found, AssistantScan):
            self._on_assistant(found)
        else:
            self._on_tool(message, found)
        self._previous_role = message.role

    # -- per role --

    def _on_system(self, found: SystemScan) -> None:
        for sentence in found.constraints:
            if len(self.facts.system_constraints) >= MAX_SYSTEM_CONSTRAINTS:
                break
            self.facts.system_constraints.setdefault(sentence.lower(), sentence)

    def _on_user(self, found: UserScan) -> None:
        text = found.text
        facts = self.facts
        for rule in found.listed:
            if len(facts.spec_constraints) < MAX_SPEC_CONSTRAINTS:
                facts.spec_constraints.setdefault(rule.lower(), rule)
        if text is None:
            return
        facts.user_texts.append(text)
        for sentence in found.constraints:
            facts.constraints.setdefault(sentence.lower(), sentence)
        self._note_decisions(found.decisions)
        proposal = facts.last_assistant_text
        if self._previous_role == "assistant" and proposal and found.confirms:
            facts.confirmations.append((offered(proposal), found.short))
        if not facts.task:
            facts.task, facts.task_keep = text, found.keep
        elif not (self._given_task and found.short == self._given_task):
            facts.requests.append((self._index, text, found.keep))
        facts.last_request, facts.last_request_answered = text, False
        facts.todo_lines.clear()  # to-dos are read against the request now being worked on
        self._todo_lines(found.todos)
        self.add_terms(found.terms, W_USER, W_USER)
        if self._full:
            self.add_terms(found.symbols, W_USER, W_USER)
        if found.opens:
            self._open_file = found.open_path

    def _on_assistant(self, found: AssistantScan) -> None:
        facts = self.facts
        text = found.text
        note: Note | None = None
        said = found.note or next((c.thought for c in found.calls if c.thought), "")
        if self._full and (said or found.calls):
            previous = facts.notes[-1] if facts.notes else None
            if previous is not None and said and previous.text == said:
                note = previous
            else:
                values = found.note_values if said == found.note else value_count(said)
                note = Note(said, values=values)
                facts.notes.append(note)
        if self._full and self._produced:
            for token in found.tokens:  # values earlier results gave, used now
                source = self._produced.pop(token, None)
                if source is not None:
                    source.used += 1
        if note is not None:
            for call in found.calls:
                self._noted[call.id] = note
        changes = any(c.writes or c.edits_open_file or c.shell_writes for c in found.calls)
        if changes and self._awaiting_change:
            self._changed(found)
        if text:
            facts.last_assistant_text = text
            for error in self._awaiting_fix:
                if not error.fix:
                    error.fix = found.fix
                    if not changes:  # words before the change: the change is the fix too
                        self._awaiting_change.append((error, self._clock))
            self._awaiting_fix.clear()
            if not found.calls:
                last = facts.last_request
                unanswered = last and not facts.last_request_answered
                if unanswered and not is_trivial(last) and not found.asks:
                    facts.answered.append((last, found.fix))
                facts.last_request_answered = True
            self._note_decisions(found.decisions)
            self._todo_lines(found.todos)
            self.add_terms(found.terms, W_SPOKEN, W_SPOKEN)
            if self._full:
                self.add_terms(found.symbols, W_SPOKEN, W_SPOKEN)
        for call in found.calls:
            self._on_call(call)

    def _changed(self, found: AssistantScan) -> None:
        """The first change made a few turns after the words that followed an error says what
        fixed it: what the change's own words say follows the first sentence of the first
        ones (often only a plan to look again); a change that says nothing is added after them."""
        edit = next(c.short for c in found.calls if c.writes or c.edits_open_file or c.shell_writes)
        for error, said_at in self._awaiting_change:
            if self._clock - said_at <= FIX_CHANGE_MESSAGES:
                error.fix = fixed_by(error.fix, found.fix, edit)
        self._awaiting_change.clear()

    def _on_call(self, call: CallScan) -> None:
        facts = self.facts
        facts.tool_counts[call.name] = facts.tool_counts.get(call.name, 0) + 1
        facts.recent_calls.append(call.short)
        if not call.final:
            facts.pending_calls[call.id] = call.short
        writes = list(call.writes)
        if call.edits_open_file and self._open_file:
            writes = [self._open_file]  # SWE-agent edits the file it has open
        writes += call.shell_writes
        for path in writes:
            facts.modified.add(path, path, W_ARGS, at=self._clock)
            facts.progress.touch(path, self._clock)
        for term in (*call.arg_terms, *call.symbols) if self._full else call.arg_terms:
            if term.gate == "id" or term.gate == "term-id":
                facts.identifiers.add(term.key, term.label, term.weight, term.kind, self._clock)
            elif term.key not in writes:
                facts.read.add(term.key, term.label, term.weight, at=self._clock)
                if term.gate == "path" and call.track_open:
                    self._open_file = term.key
        if call.todo_items is not None:
            # A to-do tool's latest list replaces the previous one: its unfinished items are open.
            facts.todo_tool_items = list(call.todo_items)
        if call.todo is not None:
            facts.progress.todo = call.todo
        self._calls[call.id] = call

    def _on_tool(self, message: Message, found: ToolScan) -> None:
        facts = self.facts
        call_id = message.tool_call_id or ""
        short = facts.pending_calls.pop(call_id, None)
        call = self._calls.pop(call_id, None)
        failed = found.failed
        reads_only = reads_log = False
        record: Record | None = None
        if call is not None:
            reads_only, reads_log = call.reads_only, call.reads_log
            if self._full:
                self._note_outcome(call, found, reads_only)
                record = None if failed else self._record(call, found)
            if call.work is not None or call.action:
                self._on_work(call, found, record)
        if not found.text:
            if short is not None and not failed:
                facts.completed_calls.append(short)
            return
        if found.opens:
            self._open_file = found.open_path
        if found.text.startswith(USER_ANSWER_PREFIXES):
            # The user answered the agent's question through a tool: their choice, verbatim.
            answer = shorten(one_line(found.text), MAX_ANSWER_UNITS)
            facts.decisions.setdefault(answer.lower(), answer)
        for path in found.wrote:
            facts.modified.add(path, path, W_ARGS, at=self._clock)
            facts.progress.touch(path, self._clock)
        self.add_terms(found.terms, W_OUTPUT, W_OUTPUT)
        # Error names in a source file read or an edit shows back are search terms, not errors.
        edited = call is not None and bool(call.writes or call.edits_open_file)
        seen_in = "read" if (reads_only or edited) and not reads_log and not failed else "error"
        for name in found.error_names() if self._full else ():
            facts.error_names.add(name, name, W_OUTPUT, seen_in, self._clock)
        # A read that came back with a line or two of refusal read nothing: it failed (the
        # harness's wrapper lines aside: "<returncode>1</returncode>", "<output>").
        failed = failed or (reads_only and refusal(found.text) and bool(found.signatures()))
        if reads_only and not failed and not reads_log:
            if short is not None:
                facts.completed_calls.append(short)
            if self._full and call is not None:
                self._outline(call, found)
            return
        signatures = found.log_signatures() if reads_log else found.signatures()
        if short is not None and not failed and not signatures:
            facts.completed_calls.append(short)
        if signatures:
            self._awaiting_change.clear()  # a change made now answers the newer error
        for key, signature in signatures:
            error = facts.errors.get(key)
            if error is None:
                error = ErrorEntry(signature, 0, self._index, self._index)
                facts.errors[key] = error
            error.count += 1
            error.last = self._index
            self._awaiting_fix.append(error)

    def _record(self, call: CallScan, found: ToolScan) -> Record | None:
        """A record the call returned, filed by its id (or the id the call asked for); a newer
        version of a record replaces the older one and moves last."""
        if not found.text.lstrip().startswith("{"):
            return None
        asked = next((t.label for t in call.arg_terms if t.gate in {"id", "term-id"}), "")
        fallback = asked.partition("=")[2] or asked
        record: Record | None = found.derived(
            f"record:{fallback}", partial(read_record, fallback=fallback)
        )
        return None if record is None else file_record(self.facts.records, record)

    def _outline(self, call: CallScan, found: ToolScan) -> None:
        """What a source file the agent read defines, filed under its path."""
        path = next((t.key for t in call.arg_terms if t.gate in {"path", "term-path"}), "")
        if not path or PATH_EXT_RE.search(path) is None:
            return
        calls = self.facts.calls_read
        for name, n in found.derived("calls", calls_made).items():
            calls[name] = calls.get(name, 0) + n
        outline = found.derived("outline", lambda text: code_outline(unnumbered(text)))
        if outline:
            outlines = self.facts.outlines
            outlines.pop(path, None)
            outlines[path] = outline

    def _note_outcome(self, call: CallScan, found: ToolScan, reads_only: bool) -> None:
        """What an acting call came back with, on the note of the turn that made it."""
        note = self._noted.pop(call.id, None)
        held = found.derived("held", file_held) if reads_only and note is not None else ""
        # A tracker asked to show items: the work state gives them with their titles.
        work = call.work
        shows = work is not None and bool(work.shown) and not (work.tracker or work.commit)
        quiet = (reads_only and not held) or bool(call.thought) or shows
        if note is not None and (found.failed or not quiet):
            # What an edit wrote is in its call; its output only shows the file back.
            wrote = call.writes or call.edits_open_file or call.shell_writes or found.wrote
            note.wrote = note.wrote or (bool(wrote) and not found.failed)
            outcome = found.outcome() if found.text and (found.failed or not wrote) else ""
            outcome = held or outcome
            note.calls.append(f"{call.short} → {outcome}" if outcome else call.short)
            if outcome:
                for token in found.derived("values", value_tokens):
                    self._produced[token] = note

    def _on_work(self, call: CallScan, found: ToolScan, record: Record | None = None) -> None:
        """What a result says about the work its call did: states set, commits, pushes, tests."""
        progress, at, text = self.facts.progress, self._clock, found.text
        failed = found.failed or exit_failed(text)
        if call.action:
            ok = not failed and not found.signatures()
            # What it came back with, done or not: an amount, an id, a state it set (a record
            # it returned by its codes: the records looked up show it whole).
            why = found.outcome() if text else ""
            if record is not None:
                why = f"{record.key}: {record.lean}"
            progress.acted(f"{call.action} → {why}" if why else call.action, ok, at)
        work = call.work
        if work is None:
            return
        progress.git = progress.git or work.git
        if not failed:
            for key, status in work.tracker:
                progress.set_status(key, status, at, work.reason)
            if work.shown and text:
                # Each rule is filed with the item whose part of the output states it.
                starts = sorted((_section_start(text, key), key) for key in work.shown)
                for at_, rule in found.derived("rules", spec_rules):
                    source = next((k for s, k in reversed(starts) if s <= at_), work.shown[0])
                    self._spec_rule(rule, source)
            for key in work.shown:
                progress.shown(key, at)
                kids = found.derived(f"children:{key}", partial(children, parent=key))
                for child in kids if text else ():
                    progress.shown(child, at)
        if text and (work.shown or work.lists):
            progress.titled(found.derived("titles", titles))
        if work.commit:
            commits = found.commits()
            for branch, hash_, subject in commits:
                progress.commit(branch, hash_, subject, at)
            if not commits:
                why = next((s for _, s in found.signatures()), "")
                progress.commit_failed(why or one_line(text)[:160])
        if work.push and not failed and found.pushed():
            progress.pushed(found.push_target())
        if work.install:
            progress.acted(work.install, not failed, at)
        if work.test:
            tally = found.tally()
            if tally is not None:
                progress.tested(work.test, tally[0], tally[1] or failed, at)
            elif failed:
                why = next((s for _, s in found.signatures()), "") or one_line(text)[:120]
                progress.tested(work.test, why, True, at)

    def _spec_rules(self, rules: Sequence[str]) -> None:
        """Rules the task's own text lists, up to a span's share of them."""
        for rule in rules:
            self._spec_rule(rule, "")

    def _spec_rule(self, rule: str, source: str) -> None:
        """A rule a task's document states, filed with the tracker item that states it (when
        one does), up to a span's share of rules and an item's."""
        facts = self.facts
        spec, sources = facts.spec_constraints, facts.spec_sources
        key = rule.lower()
        if key in spec or len(spec) >= MAX_SPEC_CONSTRAINTS:
            return
        if source and self._item_rules.get(source, 0) >= MAX_ITEM_RULES:
            return
        spec[key] = rule
        if source:
            sources[key] = source
            self._item_rules[source] = self._item_rules.get(source, 0) + 1

    # -- shared --

    def add_terms(self, terms: Sequence[Term], path_weight: int, id_weight: int) -> None:
        """File each term: paths as read, the rest as identifiers."""
        facts = self.facts
        for kind, key, label in terms:
            if kind == "path":
                facts.read.add(key, label, path_weight, at=self._clock)
            else:
                facts.identifiers.add(key, label, id_weight, kind, self._clock)

    def _todo_lines(self, items: Sequence[str]) -> None:
        todo_lines = self.facts.todo_lines
        for item in items:
            if item not in todo_lines:
                todo_lines.append(item)

    def _note_decisions(self, decisions: Sequence[tuple[str, str]]) -> None:
        for key, shown in decisions:
            self.facts.decisions.setdefault(key, shown)

    def _fold_summary(self, text: str) -> None:
        """Carry an earlier summary forward: by the reader when it knows the text, else whole."""
        if self._reader is not None and self._reader(self, text):
            return
        facts = self.facts
        if not facts.task:
            facts.task, facts.task_from_summary = one_line(text), True
            facts.task_keep = tuple(by_strength(constraint_sentences(text)))
        else:
            facts.carried_requests.append(one_line(text))
        for sentence in constraint_sentences(text):
            facts.constraints.setdefault(sentence.lower(), sentence)
        self.add_terms(list(terms_in(text)), W_CARRIED, W_CARRIED)


def read_ahead(earlier: Sequence[Message], messages: Sequence[Message], memo: Memo) -> None:
    """Replay `messages` after the calls `earlier` made, into facts thrown away: what a result
    says about its call's work (a tracker's rules, titles, sub-items, a commit, a test tally) is
    read now and kept on the result's scan in `memo`, so the compaction that evicts it only
    replays it."""
    if all(m.role != "tool" for m in messages):
        return  # no result: the replay would keep nothing
    collector = Collector(full=False, memo=memo)
    for message in earlier:
        if message.tool_calls:
            collector.feed_one(message, 0)
    for message in messages:
        collector.feed_one(message, 0)
