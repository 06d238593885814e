"""What a context's kept messages hold of a ledger, carried from one check to the next.

`KeptFacts` answers as `missing_from_folded` does over the kept text parts joined
(`precis.facts.verify` holds the one presence test); what it found last time spares asking
again where nothing changed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from operator import is_
from typing import Final

from precis.core.memo import Memo
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.facts.model import Fact
from precis.facts.verify import _Probed, _probed, folded_text_parts

# What `KeptFacts` remembers of a fact: the index of a part that holds it, or one of these.
_ABSENT: Final = -1
_SPREAD: Final = -2  # held, but by no one part alone


# What `KeptFacts` found of a fact (`_held`) and its `_probed`.
_Found = tuple[int, _Probed]
# What `KeptFacts` last asked: the text parts, what it found of each fact (by the fact's id), the
# facts, the answer (the facts missing) and, for each of those, `_probed`.
_Asked = tuple[
    tuple[str, ...],
    dict[int, _Found],
    tuple[Fact, ...],
    tuple[Fact, ...],
    tuple[_Probed, ...],
]


class KeptFacts:
    """`missing_from_folded` over a context's kept text parts, carried from one check to the next.

    Most kept messages and most facts are the same as at the last compaction, so a fact is
    tested again only where the text changed: an occurrence whose reach lies within a run of
    text parts that stood together last time would have been found then (the runs are bounded by
    joining spaces or the text's ends, which every test reads alike, and a state's window only
    grows where the run is cut off). So a fact absent last time is looked for only around the
    new text parts and new joins; one a part held alone is held while that part is kept; the rest
    are tested on the whole. A window can only say yes wrongly (its ends cut a test short), so
    a yes is confirmed on the whole. The answers are those of `missing_from_folded`.

    `observe` asks the same of the context as messages come (the last facts asked about, of
    the messages a summary did not write), so that a compaction finds its kept messages seen.
    `memo` is the session's: each fact's test and each message's folded text parts, made once.
    """

    __slots__ = ("_last", "_seen", "memo")

    def __init__(self, memo: Memo | None = None) -> None:
        self.memo = memo if memo is not None else Memo()
        self._last: _Asked = ((), {}, (), (), ())
        # The messages last observed, how many text parts those up to each one have, and those.
        self._seen: tuple[tuple[Message, ...], tuple[int, ...], tuple[str, ...]] = ((), (), ())

    def missing(
        self, facts: Iterable[Fact], text_parts: Sequence[str], whole: str | None = None
    ) -> list[Fact]:
        """The facts that `whole`, the non-empty folded `text_parts` joined by spaces, lacks."""
        text_parts, facts = tuple(text_parts), tuple(facts)
        last = self._last  # read once: another thread may replace it
        old_text_parts, old_found, old_facts, old_missing, _ = last
        k = len(old_text_parts)
        grown = k <= len(text_parts) and all(map(is_, old_text_parts, text_parts))
        if grown and len(facts) == len(old_facts) and all(map(is_, facts, old_facts)):
            if k == len(text_parts):
                return list(old_missing)  # the same question
            return self._grown(last, text_parts, whole)
        text = " ".join(text_parts) if whole is None else whole
        at_now: dict[int, int] | None = None
        # With the old text parts' first j and last tail, as a cut leaves.
        j, tail = 0, len(text_parts)
        if grown:  # every holder is where it was
            j, tail = k, 0
            added = sum(map(len, text_parts[k:])) + len(text_parts) - k  # and the joins before
            fresh = [(len(text) - added, len(text))] if added else []
        else:
            while j < min(k, len(text_parts)) and text_parts[j] is old_text_parts[j]:
                j += 1
            tail = len(text_parts) - j
            if k - tail >= j and all(map(is_, text_parts[j:], old_text_parts[k - tail :])):
                # Old text parts cut out after the first j (an eviction after the pinned): only
                # the join they leave is new.
                at = sum(map(len, text_parts[:j])) + j
                fresh = [(at - 1, at)] if 0 < j < len(text_parts) else []
            else:
                at_now = {id(p): i for i, p in enumerate(text_parts)}
                fresh = _fresh(text_parts, {id(p): i for i, p in enumerate(old_text_parts)})
                j, tail = 0, len(text_parts)
        windows: dict[int, list[str]] = {}
        found: dict[int, _Found] = {}
        missing: list[Fact] = []
        probes: list[_Probed] = []
        was = old_found.get
        starts: list[int] | None = None
        for fact in facts:
            entry = was(id(fact))  # the old facts live while `last` does: an id is theirs
            if entry is None:  # not asked about last time
                probe = _probed(fact, self.memo)
                spread = False
            else:
                state, probe = entry
                if state >= 0:
                    if at_now is not None:
                        holder = at_now.get(id(old_text_parts[state]))
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
                starts = _starts(text_parts)
            _, test, anchor, _ = probe
            state = _held(test, anchor, text_parts, text, spread, starts)
            found[id(fact)] = (state, probe)
            if state == _ABSENT:
                missing.append(fact)
                probes.append(probe)
        self._last = (text_parts, found, facts, tuple(missing), tuple(probes))
        return missing

    def _grown(self, last: _Asked, text_parts: tuple[str, ...], whole: str | None) -> list[Fact]:
        """`missing` of the `last` facts in its text parts and more after them: only the facts found
        missing then are looked for, and only around what was added."""
        old_text_parts, found, facts, old_missing, old_probes = last
        added = " ".join(text_parts[len(old_text_parts) :])
        tails: dict[int, str] = {}
        missing: list[Fact] = []
        probes: list[_Probed] = []
        copied = False  # the published answer is never changed
        for fact, probe in zip(old_missing, old_probes, strict=True):
            _, test, anchor, reach = probe
            near = tails.get(reach)
            if near is None:
                near = tails[reach] = _tail(old_text_parts, reach) + added
            if anchor in near and test(near):
                whole = " ".join(text_parts) if whole is None else whole
                state = _held(test, anchor, text_parts, whole, False)
                if state != _ABSENT:
                    if not copied:
                        found, copied = dict(found), True
                    found[id(fact)] = (state, probe)
                    continue
            missing.append(fact)
            probes.append(probe)
        self._last = (text_parts, found, facts, tuple(missing), tuple(probes))
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
        """Ask the last facts of these messages' text parts, summaries and markers aside (what the
        next compaction keeps, as it will ask); nothing before the first compaction."""
        asked, _, facts, _, _ = self._last
        if not facts:
            return
        messages = [m for m in messages if m.kind not in _CARRIERS]
        seen, ends, then = self._seen
        same = 0
        if then is asked:  # the text parts last asked about are these messages'
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
        text_parts: Sequence[str],
        more: Sequence[Message],
    ) -> None:
        """Ask `facts` of `text_parts` (those of the messages `seen`, up to each one `ends`) and
        the text parts of the messages `more` after them; note whose text parts they all are."""
        now, grown = list(ends), list(text_parts)
        for message in more:
            grown.extend(filter(None, folded_text_parts(message, self.memo)))
            now.append(len(grown))
        shown = tuple(grown)
        self.missing(facts, shown)
        self._seen = ((*seen, *more), tuple(now), shown)

    def parts_of(
        self, messages: Sequence[Message], first: int, ends: list[int]
    ) -> list[str] | None:
        """The non-empty folded text parts of `messages`, read off those last observed when the
        first `first` of them are the first observed and the rest the last (a compaction keeps the
        pinned and the newest); with how many the messages up to each one have appended to
        `ends`. None when they are not: the caller folds them."""
        seen, seen_ends, text_parts = self._seen  # read once: another thread may replace it
        cut = len(seen) - (len(messages) - first)
        if cut < first or not all(map(is_, messages[:first], seen)):
            return None
        if not all(map(is_, messages[first:], seen[cut:])):
            return None
        head = seen_ends[first - 1] if first else 0
        gone = (seen_ends[cut - 1] if cut else 0) - head  # the text parts of the messages cut out
        ends.extend(seen_ends[:first])
        ends.extend(end - gone for end in seen_ends[cut:])
        return [*text_parts[:head], *text_parts[head + gone :]]

    def asked_of(self, messages: Sequence[Message], ends: Sequence[int]) -> None:
        """Note that the text parts last asked about are these messages', the first `ends[i]` of
        them those of the first i + 1 (so that observing them again asks nothing)."""
        self._seen = (tuple(messages), tuple(ends), self._last[0])


_CARRIERS: Final = frozenset({KIND_SUMMARY, KIND_MARKER})


def _tail(text_parts: Sequence[str], reach: int) -> str:
    """The last `reach` characters of the text parts joined by spaces, and the space after them
    (nothing when there are no text parts)."""
    out: list[str] = []
    size = 0
    for part in reversed(text_parts):
        out.append(part)
        size += len(part) + 1
        if size > reach:
            break
    return (" ".join(reversed(out)) + " ")[-reach - 1 :] if out else ""


def _held(
    test: Callable[[str], bool],
    anchor: str,
    text_parts: Sequence[str],
    text: str,
    spread: bool,
    starts: list[int] | None = None,
) -> int:
    """What `KeptFacts` notes of a fact tested on the whole: absent, or the newest part that
    holds it alone (the newest stays longest), or spread when none does or, for a fact spread
    last time, without looking again. A part that holds it is looked for first: what a part
    holds, the whole holds (its ends are joining spaces there), so the whole is tested only
    when no part holds it, or its anchor shows it absent.

    The text parts holding the anchor are found from the whole's end, newest first, by where it
    occurs in the whole (`starts`: where each part begins there, `_starts`), so text parts that lack
    it are never read."""
    if spread:
        return _SPREAD if test(text) else _ABSENT
    at = text.rfind(anchor)
    if at < 0:
        return _ABSENT  # every text the test passes holds the anchor
    if starts is None:
        starts = _starts(text_parts)
    size = len(anchor)
    while at >= 0:
        i = bisect_right(starts, at) - 1
        start = starts[i]
        if at + size <= start + len(text_parts[i]):  # within part i: the newest holding it
            if test(text_parts[i]):
                return i
            at = text.rfind(anchor, 0, start - 1) if start else -1  # the text parts before it
        else:
            at = text.rfind(anchor, 0, at + size - 1)  # across a join: the occurrence before
    return _SPREAD if test(text) else _ABSENT


def _starts(text_parts: Sequence[str]) -> list[int]:
    """Where each part begins in the text parts joined by spaces."""
    return list(accumulate((len(p) + 1 for p in text_parts[:-1]), initial=0)) if text_parts else []


def _fresh(text_parts: Sequence[str], old_at: dict[int, int]) -> list[tuple[int, int]]:
    """The spans of the joined `text_parts` that no run of the old ones (by `old_at`, each one's
    place among them) held as they are: new text parts, and joins of text parts that stood apart."""
    fresh: list[tuple[int, int]] = []
    start, previous = 0, -2
    for i, part in enumerate(text_parts):
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
