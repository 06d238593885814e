"""Whether a text keeps a fact: the one containment check the guard, the engine and eval share."""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from itertools import accumulate
from operator import is_
from typing import Any, Final

from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.facts.language import raw_summary_text
from precis.facts.model import KINDS, Fact
from precis.facts.scan import MEMO_SIZE

_TICKET_FACT_RE: Final = re.compile(r"#(\d+)")


def fold(text: str) -> str:
    """Whitespace collapsed and case folded, the form every containment check uses."""
    return " ".join(text.split()).casefold()


class ContextText(str):
    """The text of some messages, with its folded form (`fold`) made from per-message parts.

    A context keeps most of its messages from one compaction to the next; each message's part
    is folded once, so checking facts against a whole context does not fold it all again.
    """

    folded: str


def _word(ch: str) -> bool:
    """What the regex class \\w matches in a str pattern."""
    return ch.isalnum() or ch == "_"


def _ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _path_in(needle: str, folded: str) -> bool:
    """`(?<![\\w.\\-])needle(?![\\w\\-]|\\.\\w)`, tried at every place the needle occurs."""
    size, end_of_text = len(needle), len(folded)
    at = folded.find(needle)
    while at >= 0:
        before = folded[at - 1] if at else ""
        if not before or not (_word(before) or before in ".-"):
            end = at + size
            after = folded[end] if end < end_of_text else ""
            if not after:
                return True
            dotted = after == "." and end + 1 < end_of_text and _word(folded[end + 1])
            if not (_word(after) or after == "-" or dotted):
                return True
        at = folded.find(needle, at + 1)
    return False


def _token_in(needle: str, folded: str) -> bool:
    """`(?<![A-Za-z0-9])needle(?![A-Za-z0-9])`, tried at every place the needle occurs."""
    size, end_of_text = len(needle), len(folded)
    at = folded.find(needle)
    while at >= 0:
        end = at + size
        if not (at and _ascii_alnum(folded[at - 1])) and not (
            end < end_of_text and _ascii_alnum(folded[end])
        ):
            return True
        at = folded.find(needle, at + 1)
    return False


@lru_cache(maxsize=8192)
def _matcher(kind: str, text: str) -> Callable[[str], bool]:
    """The presence test for one fact, made once: identifiers and paths stand as whole tokens."""
    needle = fold(text)
    if kind in {"file_modified", "file_read"}:
        needle = needle.removeprefix("./")
        if not needle:
            return lambda folded: False
        # Most facts are absent: one plain search answers for them.
        return lambda folded: needle in folded and _path_in(needle, folded)
    if kind == "state":
        return _state_matcher(needle)
    if kind == "identifier":
        ticket = _TICKET_FACT_RE.fullmatch(needle)
        if ticket is not None:
            number = ticket.group(1)
            cited = _ticket_patterns(number)
            return lambda folded: number in folded and any(p.search(folded) for p in cited)
        return lambda folded: needle in folded and _token_in(needle, folded)
    return lambda folded: bool(needle) and needle in folded


# How a summary may say a state, per status word of a state fact ("web-12: done, …").
_STATE_SYNONYMS: Final = {
    "done": ("done", "complete", "finished", "closed", "committed", "resolved", "fixed", "✓"),
    "in progress": (
        "in progress",
        "in_progress",
        "in-progress",
        "ongoing",
        "working on",
        "wip",
        "started",
        "current",
        "underway",
        "not committed",
        "uncommitted",
    ),
    "blocked": ("blocked", "stuck", "cannot", "can't", "failing", "fails", "failed"),
    "committed": ("committed", "commit"),
}
_STATE_WINDOW: Final = 400


def _state_terms(needle: str) -> tuple[str, tuple[str, ...], list[str]]:
    """A state fact's item, the words for its status and its commit hashes; no item when the
    fact is not "item: status" (it is then looked for as it is)."""
    subject, _, rest = needle.partition(": ")
    status = next((s for s in _STATE_SYNONYMS if rest.startswith(s)), "")
    words = _STATE_SYNONYMS.get(status, ())
    return (subject if words else ""), words, _HASH_RE.findall(rest)


def _state_matcher(needle: str) -> Callable[[str], bool]:
    """A state fact is kept when its item is named, and near it (within 400 characters) its
    commit hash, if any, and a word for its status."""
    subject, words, hashes = _state_terms(needle)
    if not subject:
        return lambda folded: bool(needle) and needle in folded

    def kept(folded: str) -> bool:
        size, at = len(folded), folded.find(subject)
        while at >= 0:
            end = at + len(subject)
            after = folded[end] if end < size else ""
            dotted = after in {".", "-"} and end + 1 < size and _ascii_alnum(folded[end + 1])
            glued = bool(after) and _ascii_alnum(after)
            if not (at and _ascii_alnum(folded[at - 1])) and not glued and not dotted:
                near = folded[max(0, at - _STATE_WINDOW) : end + _STATE_WINDOW]
                if all(h in near for h in hashes) and any(w in near for w in words):
                    return True
            at = folded.find(subject, at + 1)
        return False

    return kept


_HASH_RE: Final = re.compile(r"\b[0-9a-f]{7,40}\b")


def _ticket_patterns(number: str) -> tuple[re.Pattern[str], ...]:
    """`(?:#|\\b(?:pr|issue|ticket)\\s*#?\\s*){number}(?!\\d)` as one pattern per branch.

    A text holds the ticket when any of them matches, as with the one pattern; but each starts
    with a literal, which the regex engine skips to, where the one pattern tried its branches
    at every character (~30x slower on a long context). The `\\b` before a word is checked by
    a lookbehind after it, so the literal still comes first.
    """
    return (
        re.compile(rf"#{number}(?!\d)"),
        *(re.compile(rf"{w}(?<=\b{w})\s*#?\s*{number}(?!\d)") for w in ("pr", "issue", "ticket")),
    )


def present(fact: Fact, folded: str) -> bool:
    """Whether the folded text holds the fact; identifiers and paths must stand as whole tokens."""
    return _matcher(fact.kind, fact.text)(folded)


def folded_text(text: str) -> str:
    """`fold(text)`, taken from a `ContextText` without folding it again."""
    return text.folded if isinstance(text, ContextText) else fold(text)


def context_text(messages: Sequence[Message]) -> ContextText:
    """Everything a model reads of these messages, the text facts are looked for in: contents,
    tool calls, and the raw text of summaries and markers."""
    parts: list[str] = []
    folded: list[str] = []
    for m in messages:
        mine, theirs = _message_parts(m)
        parts.extend(mine)
        folded.extend(theirs)
    text = ContextText("\n".join(parts))
    # fold() of parts joined by newlines is their non-empty folds joined by one space.
    text.folded = " ".join(f for f in folded if f)
    return text


def folded_parts(message: Message) -> tuple[str, ...]:
    """One message's parts of a context text, folded (empty ones too): `context_text(ms).folded`
    is the non-empty parts of `ms` joined by spaces. Remembered by message id."""
    return _message_parts(message)[1]


def _message_parts(message: Message) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One message's parts of a context text, and each folded, from the memo when seen."""
    key = (message.content, message.tool_calls, raw_summary_text(message))
    hit = _PARTS.get(message.id) if message.id else None
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    content, calls, raw = key
    parts = [content]
    if raw is not None and raw != content:
        parts.append(raw)
    parts.extend(f"{call.name} {call.arguments}" for call in calls)
    mine = tuple(parts)
    theirs = tuple(fold(part) for part in mine)
    if message.id:
        with _PARTS_LOCK:
            if message.id not in _PARTS and len(_PARTS) >= MEMO_SIZE:
                del _PARTS[next(iter(_PARTS))]
            _PARTS[message.id] = (key, mine, theirs)
    return mine, theirs


_PARTS: dict[str, tuple[tuple[Any, ...], tuple[str, ...], tuple[str, ...]]] = {}
_PARTS_LOCK = threading.Lock()


def fact_present(fact: Fact, text: str) -> bool:
    """Whether `text` keeps the fact: its compact text, ignoring case, spacing and a leading ./."""
    return present(fact, folded_text(text))


def presence_test(fact: Fact) -> tuple[Callable[[str], bool], str]:
    """The fact's test of a folded text (`present`) and a string every text it passes holds,
    for a caller that asks them of many texts."""
    probed = _probed(fact)
    return probed[1], probed[2]


def missing_facts(facts: Iterable[Fact], summary_text: str) -> list[Fact]:
    """The facts the summary lost, in the order given."""
    return missing_from_folded(facts, folded_text(summary_text))


def missing_from_folded(facts: Iterable[Fact], folded: str) -> list[Fact]:
    """`missing_facts` for a text already folded (a fact whose anchor the text lacks is
    missing without its test)."""
    out: list[Fact] = []
    remembered = _PROBED.get
    for fact in facts:
        hit = remembered(id(fact))  # `_probed`, inline: this runs for every fact
        _, test, anchor, _ = hit[1] if hit is not None and hit[0] is fact else _probed(fact)
        if not (anchor in folded and test(folded)):
            out.append(fact)
    return out


# Characters around an occurrence that its presence test reads besides the needle: a boundary
# on each side, a path's "." after it, a ticket's "issue #" before its number.
_AROUND: Final = 16
# What `KeptFacts` remembers of a fact: the index of a part that holds it, or one of these.
_ABSENT: Final = -1
_SPREAD: Final = -2  # held, but by no one part alone


@lru_cache(maxsize=8192)
def _probe(kind: str, text: str) -> tuple[Callable[[str], bool], str, int]:
    """A fact's presence test; a string every text it passes holds (what it looks for first);
    and its reach: the most characters one occurrence's test reads (the needle, what it checks
    around it, a state's status words within `_STATE_WINDOW` on either side), rounded up to a
    multiple of 128 so that facts of about one size share their windows."""
    needle = fold(text)
    anchor = needle
    if kind in {"file_modified", "file_read"}:
        anchor = needle.removeprefix("./")
    elif kind == "identifier":
        ticket = _TICKET_FACT_RE.fullmatch(needle)
        anchor = needle if ticket is None else ticket.group(1)
    elif kind == "state":
        anchor = _state_terms(needle)[0] or needle
    size = len(needle) + _AROUND + (2 * _STATE_WINDOW if kind == "state" else 0)
    return _matcher(kind, text), anchor, -(-size // 128) * 128


# A fact's (kind, text) and `_probe`.
_Probed = tuple[tuple[str, str], Callable[[str], bool], str, int]


def _probed(fact: Fact) -> _Probed:
    """The fact's (kind, text) and `_probe`, remembered per fact: a ledger's facts are mostly
    the last one's again, and are asked about at every append."""
    hit = _PROBED.get(id(fact))
    if hit is not None and hit[0] is fact:
        return hit[1]
    key = (fact.kind, fact.text)
    probed = (key, *_probe(*key))
    if len(_PROBED) >= _PROBED_KEPT:
        _PROBED.clear()
    _PROBED[id(fact)] = (fact, probed)
    return probed


_PROBED: dict[int, tuple[Fact, _Probed]] = {}
_PROBED_KEPT: Final = 8192


# What `KeptFacts` found of a fact (`_held`) and its `_probed`.
_Found = tuple[int, _Probed]
# What `KeptFacts` last asked: the parts, what it found of each fact (by the fact's id), the
# facts, the answer (the facts missing) and, for each of those, `_probed`.
_Asked = tuple[
    tuple[str, ...],
    dict[int, _Found],
    tuple[Fact, ...],
    tuple[Fact, ...],
    tuple[_Probed, ...],
]


class KeptFacts:
    """`missing_from_folded` over a context's kept parts, carried from one check to the next.

    Most kept messages and most facts are the same as at the last compaction, so a fact is
    tested again only where the text changed: an occurrence whose reach lies within a run of
    parts that stood together last time would have been found then (the runs are bounded by
    joining spaces or the text's ends, which every test reads alike, and a state's window only
    grows where the run is cut off). So a fact absent last time is looked for only around the
    new parts and new joins; one a part held alone is held while that part is kept; the rest
    are tested on the whole. A window can only say yes wrongly (its ends cut a test short), so
    a yes is confirmed on the whole. The answers are those of `missing_from_folded`.

    `observe` asks the same of the context as messages come (the last facts asked about, of
    the messages a summary did not write), so that a compaction finds its kept messages seen.
    """

    __slots__ = ("_last", "_seen")

    def __init__(self) -> None:
        self._last: _Asked = ((), {}, (), (), ())
        # The messages last observed, how many parts those up to each one have, and the parts.
        self._seen: tuple[tuple[Message, ...], tuple[int, ...], tuple[str, ...]] = ((), (), ())

    def missing(
        self, facts: Iterable[Fact], parts: Sequence[str], whole: str | None = None
    ) -> list[Fact]:
        """The facts that `whole`, the non-empty folded `parts` joined by spaces, lacks."""
        parts, facts = tuple(parts), tuple(facts)
        last = self._last  # read once: another thread may replace it
        old_parts, old_found, old_facts, old_missing, _ = last
        k = len(old_parts)
        grown = k <= len(parts) and all(map(is_, old_parts, parts))
        if grown and len(facts) == len(old_facts) and all(map(is_, facts, old_facts)):
            if k == len(parts):
                return list(old_missing)  # the same question
            return self._grown(last, parts, whole)
        text = " ".join(parts) if whole is None else whole
        at_now: dict[int, int] | None = None
        j, tail = 0, len(parts)  # with the old parts' first j and last tail, as a cut leaves
        if grown:  # every holder is where it was
            j, tail = k, 0
            added = sum(map(len, parts[k:])) + len(parts) - k  # with the joins before them
            fresh = [(len(text) - added, len(text))] if added else []
        else:
            while j < min(k, len(parts)) and parts[j] is old_parts[j]:
                j += 1
            tail = len(parts) - j
            if k - tail >= j and all(map(is_, parts[j:], old_parts[k - tail :])):
                # Old parts cut out after the first j (an eviction after the pinned): only
                # the join they leave is new.
                at = sum(map(len, parts[:j])) + j
                fresh = [(at - 1, at)] if 0 < j < len(parts) else []
            else:
                at_now = {id(p): i for i, p in enumerate(parts)}
                fresh = _fresh(parts, {id(p): i for i, p in enumerate(old_parts)})
                j, tail = 0, len(parts)
        windows: dict[int, list[str]] = {}
        found: dict[int, _Found] = {}
        missing: list[Fact] = []
        probes: list[_Probed] = []
        remembered, was = _PROBED.get, old_found.get
        starts: list[int] | None = None
        for fact in facts:
            entry = was(id(fact))  # the old facts live while `last` does: an id is theirs
            if entry is None:  # not asked about last time
                hit = remembered(id(fact))  # `_probed`, inline: this runs for every new fact
                probe = hit[1] if hit is not None and hit[0] is fact else _probed(fact)
                spread = False
            else:
                state, probe = entry
                if state >= 0:
                    if at_now is not None:
                        holder = at_now.get(id(old_parts[state]))
                    elif state < j or state >= k - tail:
                        holder = state if state < j else state - (k - tail) + j
                    else:
                        holder = None  # cut out
                    if holder is not None:
                        found[id(fact)] = entry if holder == state else (holder, probe)
                        continue
                elif state == _ABSENT:
                    _, test, anchor, reach = probe
                    near = windows.get(reach)
                    if near is None:
                        near = windows[reach] = _windows(text, fresh, reach)
                    for w in near:
                        if anchor in w and test(w):
                            break
                    else:
                        found[id(fact)] = entry
                        missing.append(fact)
                        probes.append(probe)
                        continue
                spread = state == _SPREAD
            if starts is None:
                starts = _starts(parts)
            _, test, anchor, _ = probe
            state = _held(test, anchor, parts, text, spread, starts)
            found[id(fact)] = (state, probe)
            if state == _ABSENT:
                missing.append(fact)
                probes.append(probe)
        self._last = (parts, found, facts, tuple(missing), tuple(probes))
        return missing

    def _grown(self, last: _Asked, parts: tuple[str, ...], whole: str | None) -> list[Fact]:
        """`missing` of the `last` facts in its parts and more after them: only the facts found
        missing then are looked for, and only around what was added."""
        old_parts, found, facts, old_missing, old_probes = last
        added = " ".join(parts[len(old_parts) :])
        tails: dict[int, str] = {}
        missing: list[Fact] = []
        probes: list[_Probed] = []
        copied = False  # the published answer is never changed
        for fact, probe in zip(old_missing, old_probes, strict=True):
            _, test, anchor, reach = probe
            near = tails.get(reach)
            if near is None:
                near = tails[reach] = _tail(old_parts, reach) + added
            if anchor in near and test(near):
                whole = " ".join(parts) if whole is None else whole
                state = _held(test, anchor, parts, whole, False)
                if state != _ABSENT:
                    if not copied:
                        found, copied = dict(found), True
                    found[id(fact)] = (state, probe)
                    continue
            missing.append(fact)
            probes.append(probe)
        self._last = (parts, found, facts, tuple(missing), tuple(probes))
        return missing

    def observe_more(self, messages: Sequence[Message]) -> None:
        """`observe` of the messages last observed and these after them (a batch appended)."""
        seen, ends, then = self._seen
        asked, _, facts, _, _ = self._last
        if facts and then is asked:  # only the batch is new
            self._ask(facts, seen, ends, asked, [m for m in messages if m.kind not in _CARRIERS])
        else:
            self.observe((*seen, *messages))

    def observe(self, messages: Sequence[Message]) -> None:
        """Ask the last facts of these messages' parts, summaries and markers aside (what the
        next compaction keeps, as it will ask); nothing before the first compaction."""
        asked, _, facts, _, _ = self._last
        if not facts:
            return
        messages = [m for m in messages if m.kind not in _CARRIERS]
        seen, ends, then = self._seen
        same = 0
        if then is asked:  # the parts last asked about are these messages'
            if len(seen) <= len(messages) and all(map(is_, seen, messages)):
                if len(seen) == len(messages):
                    return  # asked already
                same = len(seen)
            else:
                while same < min(len(seen), len(messages)) and seen[same] is messages[same]:
                    same += 1
        kept = ends[same - 1] if same else 0
        self._ask(facts, messages[:same], ends[:same], asked[:kept], messages[same:])

    def _ask(
        self,
        facts: tuple[Fact, ...],
        seen: Sequence[Message],
        ends: Sequence[int],
        parts: Sequence[str],
        more: Sequence[Message],
    ) -> None:
        """Ask `facts` of `parts` (those of the messages `seen`, up to each one `ends`) and
        the parts of the messages `more` after them; note whose parts they all are."""
        now, grown = list(ends), list(parts)
        for message in more:
            grown.extend(filter(None, folded_parts(message)))
            now.append(len(grown))
        shown = tuple(grown)
        self.missing(facts, shown)
        self._seen = ((*seen, *more), tuple(now), shown)

    def asked_of(self, messages: Sequence[Message], ends: Sequence[int]) -> None:
        """Note that the parts last asked about are these messages', the first `ends[i]` of
        them those of the first i + 1 (so that observing them again asks nothing)."""
        self._seen = (tuple(messages), tuple(ends), self._last[0])


_CARRIERS: Final = frozenset({KIND_SUMMARY, KIND_MARKER})


def _tail(parts: Sequence[str], reach: int) -> str:
    """The last `reach` characters of the parts joined by spaces, and the space after them
    (nothing when there are no parts)."""
    out: list[str] = []
    size = 0
    for part in reversed(parts):
        out.append(part)
        size += len(part) + 1
        if size > reach:
            break
    return (" ".join(reversed(out)) + " ")[-reach - 1 :] if out else ""


def _held(
    test: Callable[[str], bool],
    anchor: str,
    parts: Sequence[str],
    text: str,
    spread: bool,
    starts: list[int] | None = None,
) -> int:
    """What `KeptFacts` notes of a fact tested on the whole: absent, or the newest part that
    holds it alone (the newest stays longest), or spread when none does or, for a fact spread
    last time, without looking again. A part that holds it is looked for first: what a part
    holds, the whole holds (its ends are joining spaces there), so the whole is tested only
    when no part holds it, or its anchor shows it absent.

    The parts holding the anchor are found from the whole's end, newest first, by where it
    occurs in the whole (`starts`: where each part begins there, `_starts`), so parts that lack
    it are never read."""
    if spread:
        return _SPREAD if test(text) else _ABSENT
    at = text.rfind(anchor)
    if at < 0:
        return _ABSENT  # every text the test passes holds the anchor
    if starts is None:
        starts = _starts(parts)
    size = len(anchor)
    while at >= 0:
        i = bisect_right(starts, at) - 1
        start = starts[i]
        if at + size <= start + len(parts[i]):  # within part i: the newest holding it
            if test(parts[i]):
                return i
            at = text.rfind(anchor, 0, start - 1) if start else -1  # the parts before it
        else:
            at = text.rfind(anchor, 0, at + size - 1)  # across a join: the occurrence before
    return _SPREAD if test(text) else _ABSENT


def _starts(parts: Sequence[str]) -> list[int]:
    """Where each part begins in the parts joined by spaces."""
    return list(accumulate((len(p) + 1 for p in parts[:-1]), initial=0)) if parts else []


def _fresh(parts: Sequence[str], old_at: dict[int, int]) -> list[tuple[int, int]]:
    """The spans of the joined `parts` that no run of the old parts (by `old_at`, each one's
    place among them) held as they are: new parts, and joins of parts that stood apart."""
    fresh: list[tuple[int, int]] = []
    start, previous = 0, -2
    for i, part in enumerate(parts):
        old = old_at.get(id(part), -2)
        if old < 0:
            fresh.append((max(start - 1, 0), start + len(part)))
        elif i and old != previous + 1:
            fresh.append((start - 1, start))
        previous = old
        start += len(part) + 1
    return fresh


def _windows(text: str, spans: Sequence[tuple[int, int]], reach: int) -> list[str]:
    """The pieces of `text` within `reach` of the spans, overlapping ones merged."""
    out: list[str] = []
    low = high = -1
    for a, b in spans:
        a, b = max(a - reach, 0), b + reach
        if a > high:
            if high > low:
                out.append(text[low:high])
            low = a
        high = max(high, b)
    if high > low:
        out.append(text[low:high])
    return out


def retention(facts: Iterable[Fact], context_text: str) -> dict[str, float]:
    """Share of facts the context keeps, per kind and "overall": the measure `precis eval` uses."""
    folded = folded_text(context_text)
    kept: dict[str, list[int]] = {}
    for fact in facts:
        tally = kept.setdefault(fact.kind, [0, 0])
        tally[0] += present(fact, folded)
        tally[1] += 1
    out: dict[str, float] = {k: kept[k][0] / kept[k][1] for k in KINDS if k in kept}
    total = sum(t[1] for t in kept.values())
    out["overall"] = sum(t[0] for t in kept.values()) / total if total else 1.0
    return out
