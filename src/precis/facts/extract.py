"""The facts a summary must keep: red lines, the task, pins, files, identifiers, errors, requests.

Found by the collector in the evicted span, compacted to one verbatim line each, in priority
order, after the ledgers that earlier summaries in the span carry. Pure: the same span gives the
same facts; the heavy reading of each message is remembered in the session's memo
(`precis.facts.scan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from itertools import islice
from operator import is_
from typing import Any, Final

from precis.core.jscompat import utf16_len
from precis.core.memo import Memo, Table
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, KIND_TASK, Message
from precis.core.types import FactKind
from precis.facts.collect import Collector, Facts
from precis.facts.gist import request_gist
from precis.facts.model import Fact, Ledger, dedupe, newest_states
from precis.facts.patterns import PATH_EXT_RE
from precis.facts.tally import W_OUTPUT, W_SPOKEN, Tally
from precis.facts.terms import project_root
from precis.facts.text import compact, is_trivial, one_line

# Compact sizes (UTF-16 units) of one fact's text, and how many facts of a kind one span gives.
_TASK_UNITS: Final = 200
_CONSTRAINT_UNITS: Final = 300
_PINNED_UNITS: Final = 200
REQUEST_UNITS: Final = 120
_ERROR_UNITS: Final = 160
_FIX_UNITS: Final = 120
_MAX_MODIFIED: Final = 60
_MAX_READ: Final = 30
_MAX_IDENTIFIERS: Final = 40
_MAX_ERRORS: Final = 10
_MAX_REQUESTS: Final = 20
# Identifier kinds worth keeping even when only a tool's output named them.
_OUTPUT_ID_KINDS: Final = frozenset({"commit", "port", "pr", "email"})
_CARRIERS: Final = frozenset({KIND_SUMMARY, KIND_MARKER})


class Replay:
    """The collector's pass over a span's first messages (`fed`, in order), with where each fact
    was first seen: fed more as the span grows, it holds what a pass over the longer span would."""

    __slots__ = ("collector", "fed", "sources", "task")

    def __init__(self, task: str | None, memo: Memo | None = None) -> None:
        self.task = task
        self.collector = Collector(task, full=False, memo=memo)
        self.sources = _Sources(task is not None)
        self.fed: list[Message] = []

    def feed(self, messages: Iterable[Message]) -> None:
        """Replay these messages after those fed so far."""
        collector, sources, fed = self.collector, self.sources, self.fed
        for message in messages:
            fed.append(message)
            if message.kind in _CARRIERS or message.kind == KIND_TASK:
                continue
            # Each message is fed as a span of its own, as the guard always did: every error is
            # filed at position 0, so errors keep the order they were first seen in.
            collector.feed_one(message, 0)
            sources.note(collector.facts, message.id or f"@{len(fed) - 1}")

    def starts(self, messages: Sequence[Message], task: str | None) -> bool:
        """Whether this is the replay of the first messages of `messages` with this task."""
        fed = self.fed
        return task == self.task and len(fed) <= len(messages) and all(map(is_, fed, messages))


def extract_facts(
    messages: Sequence[Message],
    *,
    task: str | None = None,
    replay: Replay | None = None,
    memo: Memo | None = None,
) -> list[Fact]:
    """Every fact of the span a summary must keep, deterministic and in priority order.

    Ledgers stored on earlier summaries inside the span come first, so they are never lost.
    `replay`, a replay of the span's first messages (read ahead), is fed the rest and read
    instead of replaying the span anew; it is the same pass. `memo`, the session's, keeps
    what reading each message found (without one, the span is read afresh).
    """
    memo = memo if memo is not None else Memo()
    carried: list[Fact] = []
    carriers = 0
    keys: Set[tuple[str, str]] | None = None
    for message in messages:
        if message.kind in _CARRIERS:
            ledger, keys = _stored(message, memo)
            carried.extend(ledger.facts)
            carriers += 1
    if not (task and task.strip()):
        task = next(
            (m.content for m in messages if m.kind == KIND_TASK and m.content.strip()), None
        )
    if replay is None or not replay.starts(messages, task):
        replay = Replay(task, memo)
    replay.feed(islice(messages, len(replay.fed), None))
    collector, sources = replay.collector, replay.sources
    facts = collector.facts
    found: list[Fact] = []
    found += _constraint_facts(facts, sources)
    if facts.task:
        found.append(Fact("task", compact(facts.task, _TASK_UNITS), sources.task or "task"))
    found += _pinned_facts(messages)
    found += _state_facts(facts)
    modified, read = _file_facts(facts, sources)
    found += modified
    found += _identifier_facts(facts.identifiers, sources)
    found += _error_facts(facts, sources)
    found += read
    found += _request_facts(facts, sources, memo)
    # In priority order already: each kind's facts follow the last's. Each copy after the first
    # is dropped once, here, and the carried states the span's own replace are left out.
    kept = newest_states(carried, found)
    if keys is None or carriers > 1 or len(kept) < len(carried):
        return list(dedupe((*kept, *found)))
    # One ledger carried whole, its facts each once: only the span's own are looked up.
    out = list(kept)
    out.extend(f for f in dedupe(found) if (f.kind, f.text) not in keys)
    return out


def stored_ledger(message: Message, memo: Memo | None = None) -> Ledger:
    """The ledger a summary or marker carries in `metadata["ledger"]`, read once per message
    into `memo`."""
    return _stored(message, memo)[0]


def _stored(message: Message, memo: Memo | None) -> tuple[Ledger, Set[tuple[str, str]] | None]:
    """`stored_ledger`, and the (kind, text) of each of its facts when `remember_ledger` noted
    them with it (each fact is then there once)."""
    data = message.metadata.get("ledger")
    if not message.id or memo is None:
        return Ledger.from_json(data), None
    ledgers = memo[LEDGERS]
    hit = ledgers.get(message.id)
    if hit is not None and (hit[0] is data or hit[0] == data):
        return hit[1], hit[2]
    ledger = Ledger.from_json(data)
    ledgers.put(message.id, (data, ledger, None))
    return ledger, None


def remember_ledger(message: Message, ledger: Ledger, memo: Memo) -> bool:
    """Note in `memo` that `message` (a summary or marker being made) carries `ledger`, so
    reading it back in a later compaction (`stored_ledger`) parses nothing; whether it was noted.

    Only a ledger that reading its JSON would give back unchanged is remembered: every text
    non-blank, each (kind, text) once, the strings plain (`str` itself, the kind too). Else
    `stored_ledger` parses as before.
    """
    data = message.metadata.get("ledger")
    facts = ledger.facts
    if not message.id or not isinstance(data, list) or len(data) != len(facts):
        return False
    for fact in facts:
        text = fact.text
        # Blank is what `not text.strip()` says: empty, or whitespace only.
        if type(text) is not str or not text or text.isspace():
            return False
        if type(fact.source_id) is not str or type(fact.note) is not str:
            return False
        if type(fact.kind) is not str:
            return False
    keys = {(fact.kind, fact.text) for fact in facts}
    if len(keys) != len(facts):
        return False
    memo[LEDGERS].put(message.id, (data, ledger, keys))
    return True


# A ledger's JSON as stored, the ledger, and its facts' (kind, text) when `remember_ledger`
# noted them, by the message's id.
# Only the newest summaries are in context to be read again (an older one was folded into the
# next), and a ledger runs to tens of KB: a long-lived session keeps a few.
LEDGERS_KEPT: Final = 16
LEDGERS: Final = Table[str, tuple[Any, Ledger, Set[tuple[str, str]] | None]](
    "ledgers", LEDGERS_KEPT
)


class _Sources:
    """Which message first gave each fact, found by watching the collector grow."""

    def __init__(self, task_given: bool) -> None:
        self.task: str | None = "task" if task_given else None
        self.ids: dict[tuple[str, str], str] = {}
        self._seen: dict[str, int] = {}
        self._requests = 0
        self._keys: tuple[tuple[str, dict[str, Any]], ...] | None = None

    def note(self, facts: Facts, source: str) -> None:
        if self.task is None and facts.task:
            self.task = source
        if self._keys is None:  # the collector's containers, which it only ever adds to
            self._keys = (
                ("constraint", facts.constraints),
                ("file_modified", facts.modified.terms),
                ("file_read", facts.read.terms),
                ("identifier", facts.identifiers.terms),
                ("error", facts.errors),
            )
        for name, keys in self._keys:
            # The collector only ever adds keys, in order: the new ones are those at the end,
            # read from the end so the ones seen before are not walked again.
            seen = self._seen.get(name, 0)
            if len(keys) > seen:
                for key in islice(reversed(keys), len(keys) - seen):
                    self.ids.setdefault((name, key), source)
                self._seen[name] = len(keys)
        for _, text, _ in facts.requests[self._requests :]:
            self.ids.setdefault(("request", text), source)
        self._requests = len(facts.requests)

    def of(self, kind: FactKind, key: str) -> str:
        return self.ids.get((kind, key), "task")


_STATE_WORDS: Final = {
    "done": "done",
    "in_progress": "in progress",
    "blocked": "blocked",
    "committed": "committed",
}
_MAX_STATES: Final = 20


def _state_facts(facts: Facts) -> list[Fact]:
    """Each item whose state a command set: "web-12: done, committed 1a2b3c4", newest last."""
    items = [e for e in facts.progress.items.values() if e.status in _STATE_WORDS]
    items.sort(key=lambda e: e.last)
    out: list[Fact] = []
    for entry in items[-_MAX_STATES:]:
        text = f"{entry.key}: {_STATE_WORDS[entry.status]}"
        if entry.commit and entry.status != "committed":
            text += f", committed {entry.commit}"
        elif entry.commit:
            text += f" {entry.commit}"
        out.append(Fact("state", text, "progress"))
    return out


def _constraint_facts(facts: Facts, sources: _Sources) -> list[Fact]:
    """The user's red lines (and the task's), verbatim; a question sets no rule."""
    return [
        Fact("constraint", compact(sentence, _CONSTRAINT_UNITS), sources.of("constraint", key))
        for key, sentence in facts.constraints.items()
        if not sentence.rstrip().endswith(("?", "？"))
    ]


def _pinned_facts(messages: Sequence[Message]) -> list[Fact]:
    """Pinned messages: short ones whole, long ones by their first line."""
    out: list[Fact] = []
    for index, message in enumerate(messages):
        if not message.pinned:
            continue
        text = message.content.strip()
        if not text:
            continue
        whole = one_line(text)
        if utf16_len(whole) > _PINNED_UNITS:
            whole = compact(next(line for line in text.splitlines() if line.strip()), _PINNED_UNITS)
        out.append(Fact("pinned", whole, message.id or f"@{index}"))
    return out


def _file_facts(facts: Facts, sources: _Sources) -> tuple[list[Fact], list[Fact]]:
    """Files written, then files read on purpose, relative to the project root when one shows."""
    modified_terms = facts.modified.keyed()
    read_terms = facts.read.keyed(min_weight=W_SPOKEN)
    root = project_root([t.label for _, t in modified_terms]) or project_root(
        [t.label for _, t in modified_terms] + [t.label for _, t in read_terms[:200]]
    )

    def short(path: str) -> str:
        shown = path[len(root) :] if root and path.startswith(root) else path
        return shown.removeprefix("./")

    modified: dict[str, Fact] = {}
    for key, term in modified_terms:
        if len(modified) >= _MAX_MODIFIED:
            break
        path = short(term.label)
        if path and path not in modified:  # the first term that shows a path gives its fact
            modified[path] = Fact("file_modified", path, sources.of("file_modified", key))
    names = {p.rsplit("/", 1)[-1] for p in modified if "/" in p}
    names |= {short(t.label).rsplit("/", 1)[-1] for _, t in read_terms if "/" in t.label}
    read: dict[str, Fact] = {}
    for key, term in read_terms:
        if len(read) >= _MAX_READ:
            break
        path = short(term.label)
        if not path or path in modified or path in read:
            continue
        if PATH_EXT_RE.search(path) is None or ("/" not in path and path in names):
            continue  # a directory, or a bare name a full path already covers
        read[path] = Fact("file_read", path, sources.of("file_read", key))
    return list(modified.values()), list(read.values())


def _identifier_facts(tally: Tally, sources: _Sources) -> list[Fact]:
    """URLs, tickets, hashes, ports, versions, codes: those a person or a call named, mostly."""
    out: list[Fact] = []
    for key, term in tally.keyed():
        if len(out) >= _MAX_IDENTIFIERS:
            break
        if term.kind == "symbol" or (term.weight <= W_OUTPUT and term.kind not in _OUTPUT_ID_KINDS):
            continue  # code names in prose are the brief's to rank, not the guard's to demand
        text = key.removeprefix("port ") if term.kind == "port" else key
        out.append(Fact("identifier", text, sources.of("identifier", key)))
    return out


def _error_facts(facts: Facts, sources: _Sources) -> list[Fact]:
    """Error signatures on one line, newest first, each with the fix that followed if any."""
    errors = sorted(facts.errors.items(), key=lambda kv: (-kv[1].last, kv[1].first))
    return [
        Fact(
            "error",
            compact(error.signature, _ERROR_UNITS),
            sources.of("error", key),
            compact(error.fix, _FIX_UNITS) if error.fix else "",
        )
        for key, error in errors[:_MAX_ERRORS]
    ]


def _request_facts(facts: Facts, sources: _Sources, memo: Memo) -> list[Fact]:
    """The user's later requests, by their first line, acknowledgements aside."""
    out: list[Fact] = []
    gists = memo[_GISTS]
    for _, text, _ in facts.requests:
        if is_trivial(text):
            continue
        gist = gists.get(text)  # as the brief shows it: its courtesies aside
        if gist is None:
            gist = gists.put(text, request_gist(text))
        out.append(Fact("request", compact(gist, REQUEST_UNITS), sources.of("request", text)))
    return out[-_MAX_REQUESTS:]


# Each request's gist (`request_gist`), by its text: every compaction's span repeats most.
_GISTS: Final = Table[str, str]("request gists", 512)
