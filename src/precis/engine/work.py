"""What one compaction's candidate search shares: the candidates it weighs and what it works
out once and reads again.

Kept apart from `compactor`, which stays under 600 lines; the compactor makes one `Work` per
search (see `Compactor._candidate`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import is_not
from typing import cast

from precis.core.memo import Memo
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message
from precis.core.planning import first_cut
from precis.core.tokens import TokenCounter
from precis.core.types import MadeMode
from precis.engine.results import CompactionStats
from precis.facts import folded_text_parts, stored_ledger
from precis.facts.extract import Replay
from precis.summarize.guard import BODY_FLOOR_SHARE, Fact, Ledger
from precis.summarize.packaging import MIN_CLIP_CHARS

__all__ = [
    "CARRIED_KINDS",
    "LEDGER_LIMIT",
    "REQUIRED_KINDS",
    "REQUIRED_SHARE",
    "Candidate",
    "LedgerAhead",
    "NoOp",
    "Work",
    "capped_ledger",
    "guard_budget",
    "joined",
    "required_facts",
    "smaller",
    "with_red_lines_of",
]

# Fact kinds a summary always carries forward, and the bound on the ledger it carries.
CARRIED_KINDS = frozenset({"constraint", "task", "pinned"})
LEDGER_LIMIT = 200
# Share of the summary budget that the task and red lines may claim as required text.
REQUIRED_SHARE = 0.6
# Fact kinds a compaction must keep verbatim (else it is rolled back).
REQUIRED_KINDS = ("task", "constraint")


@dataclass(frozen=True, slots=True)
class Candidate:
    mode: MadeMode
    summary: Message
    context: list[Message]
    stats: CompactionStats
    required: tuple[Fact, ...]  # what the new context must hold verbatim (task, red lines)
    ledger: Ledger
    # The context's text as facts are looked for in it (`context_text(…).folded`), made only
    # when needed, and folded texts of runs of its messages: a fact a run holds, it holds.
    whole: Callable[[], str]
    runs: tuple[str, ...] = ()

    def with_summary(self, summary: Message) -> Candidate:
        """The candidate with another summary (its audited one)."""
        return replace(self, summary=summary)


def capped_ledger(ledger: Ledger) -> Ledger:
    """Bound what a summary carries forward: every rule, the task and pins, the newest rest."""
    carried = [f for f in ledger.facts if f.kind in CARRIED_KINDS]
    rest = [f for f in ledger.facts if f.kind not in CARRIED_KINDS]
    room = max(0, LEDGER_LIMIT - len(carried))
    return Ledger((*carried, *(rest[-room:] if room else ())))


class Work:
    """What one candidate search works out once and reads again: each message's tokens and
    folded text parts, and each span's ledger. Keyed by the messages' identity: the context's
    messages live for the search, and other entries hold their messages, so no id is reused
    while it is remembered."""

    __slots__ = ("counter", "counts", "ledgers", "memo", "replay", "stored", "text_parts")

    def __init__(
        self,
        messages: Sequence[Message],
        counts: Sequence[int],
        counter: TokenCounter,
        replay: Replay | None = None,
        stored: Sequence[Message] = (),
        memo: Memo | None = None,
    ):
        self.counter = counter
        self.memo = memo  # the session's: each message's folded text parts, made once
        self.replay = replay  # the replay of the evicted span's first messages, read ahead
        # The context as stored, before the view cut its long outputs: by id, when any differs.
        self.stored = {m.id: m for m in stored if m.id}
        self.counts = dict(zip(map(id, messages), counts, strict=True))
        self.text_parts: dict[int, tuple[Message, tuple[str, ...]]] = {}
        self.ledgers: dict[tuple[int, ...], tuple[tuple[Message, ...], Ledger]] = {}

    def originals(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The messages as stored, where the view showed one cut (a long output head+tail, an
        old one masked); () when it showed them all whole."""
        stored = self.stored
        whole = tuple(stored.get(m.id, m) if m.id else m for m in messages)
        return whole if any(map(is_not, whole, messages)) else ()

    def tokens(self, messages: Sequence[Message]) -> int:
        """`Compactor.tokens`, from the context's counts (a message made since is counted)."""
        found = list(map(self.counts.get, map(id, messages)))
        if None not in found:  # the usual case: every message is the context's
            return sum(cast(list[int], found))
        count = self.counter.count
        return sum(count(m) if n is None else n for m, n in zip(messages, found, strict=True))

    def folded(self, messages: Sequence[Message]) -> str:
        """`context_text(messages).folded`, from text parts already folded."""
        return " ".join(self.folded_text_parts(messages))

    def folded_text_parts(
        self, messages: Sequence[Message], ends: list[int] | None = None
    ) -> list[str]:
        """The messages' non-empty folded text parts, which `folded` joins by spaces; with `ends`,
        how many of them the messages up to each one have is appended to it."""
        text_parts = self.text_parts
        out: list[str] = []
        for message in messages:
            entry = text_parts.get(id(message))
            if entry is None:
                entry = text_parts[id(message)] = (message, folded_text_parts(message, self.memo))
            out.extend(filter(None, entry[1]))
            if ends is not None:
                ends.append(len(out))
        return out


def joined(*folded: str) -> str:
    """Folded texts of consecutive runs of messages as the folded text of all of them."""
    return " ".join(text for text in folded if text)


def clip_room(clip: int, pinned: Sequence[Message]) -> int:
    """What the clip leaves the summary beside the pinned messages it stays with: the clip bounds
    everything a compaction puts in the context, the pinned task included (never below the
    smallest summary)."""
    held = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in pinned)
    return max(MIN_CLIP_CHARS, clip - held)


def guard_budget(required: Sequence[Fact], clip: int, widest: int) -> int:
    """Room for summary + retained facts: the clip, widened (up to `widest`, the configured
    clip) only when the required facts would not fit beside the body's least share."""
    need = sum(len(f.text) + 4 for f in required) + 40
    if need <= clip * (1 - BODY_FLOOR_SHARE):
        return clip
    return min(widest, need + int(clip * BODY_FLOOR_SHARE))


def with_red_lines_of(ledger: Ledger, stays: Sequence[Message], memo: Memo) -> Ledger:
    """The ledger with the task and red lines the summaries and markers that stay carry.

    A summary leaves out of its text a red line that a message kept beside it holds; when that
    message leaves later with the summary staying, the red line must still be demanded."""
    carried = [
        fact
        for m in stays
        if m.kind in _CARRIERS
        for fact in stored_ledger(m, memo).facts
        if fact.kind in REQUIRED_KINDS
    ]
    return ledger.merge(carried) if carried else ledger


_CARRIERS = frozenset({KIND_SUMMARY, KIND_MARKER})


def required_facts(ledger: Ledger, known_task: bool, clip: int) -> tuple[Fact, ...]:
    """The task and the red lines, as many as fit in a share of the clip: the text a compaction
    must keep verbatim, else it is rolled back.

    Past that share a summary could not hold them and anything else, so the rest are kept by
    the guard when there is room but not demanded.
    """
    room = int(clip * REQUIRED_SHARE)
    required: list[Fact] = []
    if not known_task:
        # Without a stated task the span's first request stands in for it; keep it if there is
        # room, but do not roll back over it.
        ledger = Ledger(tuple(f for f in ledger.facts if f.kind != "task"))
    # The required kinds in their order, each kind's facts in ledger order (a stable sort).
    for fact in [f for kind in REQUIRED_KINDS for f in ledger.facts if f.kind == kind]:
        room -= len(fact.text) + 3
        if room < 0 and required:
            break
        required.append(fact)
    return tuple(required)


@dataclass(frozen=True, slots=True)
class NoOp:
    """A search that found nothing smaller than the context: why, for the caller to say."""

    reason: str
    tokens: int
    messages: int


def smaller(best: Candidate | None, other: Candidate) -> Candidate:
    """The candidate whose context is smaller (the earlier on a tie)."""
    if best is None:
        return other
    after = other.stats.context_tokens_after
    return other if after < best.stats.context_tokens_after else best


class LedgerAhead:
    """A `Replay` of the context's unpinned messages before the sliding window's first cut
    (`first_cut`), for one version of the context and one task; fed at each check, handed to
    the compaction of that version, which feeds it the rest of its span (`extract_facts` checks
    that it is the replay of the span's first messages, else replays the span anew)."""

    __slots__ = ("_lock", "_state", "memo")

    def __init__(self, memo: Memo | None = None) -> None:
        self.memo = memo  # the session's, which the replay's scans go into
        self._lock = threading.Lock()
        # The context version and task, the replay, how many messages of the context it has
        # looked at, and the last of them.
        self._state: tuple[int, str, Replay, int, Message | None] | None = None

    def read(
        self,
        version: int,
        task_of: Callable[[], str | None],
        messages: Sequence[Message],
        percentage: float | None,
    ) -> None:
        """Feed the replay the unpinned messages before the first cut that it has not seen;
        `task_of` gives the context's task, asked when this version is new (a task set since is
        not the one the compaction is given, which then replays its span anew)."""
        upto = first_cut(messages, percentage)
        with self._lock:
            state = self._state
            if state is None or state[0] != version:
                task = task_of() if upto else None
                if not (task and task.strip()):
                    return  # a task found in the span itself is the span's to find
                state = (version, task, Replay(task, self.memo), 0, None)
            task = state[1]
            _, _, replay, seen, last = state
            if seen and (seen > len(messages) or messages[seen - 1] is not last):
                state = (version, task, Replay(task, self.memo), 0, None)  # not the context it read
                _, _, replay, seen, last = state
            if upto > seen:
                replay.feed(m for m in messages[seen:upto] if not m.pinned)
                state = (version, task, replay, upto, messages[upto - 1])
            self._state = state

    def take(self, version: int, task: str | None) -> Replay | None:
        """The replay read ahead of this version of the context with this task, handed over
        (a compaction feeds it on: no check feeds it again)."""
        with self._lock:
            state, self._state = self._state, None
        if state is None or state[0] != version or state[1] != task:
            return None
        return state[2]
