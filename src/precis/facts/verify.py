"""Whether a text keeps a fact: the one containment check the guard, the engine and eval share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from precis.core.memo import Memo, Table
from precis.core.messages import Message
from precis.facts.language import raw_summary_text
from precis.facts.model import KINDS, Fact
from precis.facts.scan import MEMO_SIZE

_TICKET_FACT_RE: Final = re.compile(r"#(\d+)")


def fold(text: str) -> str:
    """Whitespace collapsed and case folded, the form every containment check uses."""
    return " ".join(text.split()).casefold()


class ContextText(str):
    """The text of some messages, with its folded form (`fold`) made from per-message text parts.

    A context keeps most of its messages from one compaction to the next; each message's text
    parts are folded once, so checking facts against a whole context does not fold it all again.
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


def present(fact: Fact, folded: str, memo: Memo | None = None) -> bool:
    """Whether the folded text holds the fact; identifiers and paths must stand as whole tokens.
    `memo` keeps the fact's test, made once per session."""
    if memo is None:
        return _matcher(fact.kind, fact.text)(folded)
    return _probed(fact, memo)[1](folded)


def folded_text(text: str) -> str:
    """`fold(text)`, taken from a `ContextText` without folding it again."""
    return text.folded if isinstance(text, ContextText) else fold(text)


def context_text(messages: Sequence[Message], memo: Memo | None = None) -> ContextText:
    """Everything a model reads of these messages, the text facts are looked for in: contents,
    tool calls, and the raw text of summaries and markers; each message's text parts from `memo`
    when it was folded before."""
    text_parts: list[str] = []
    folded: list[str] = []
    for m in messages:
        mine, theirs = _message_text_parts(m, memo)
        text_parts.extend(mine)
        folded.extend(theirs)
    text = ContextText("\n".join(text_parts))
    # fold() of text parts joined by newlines is their non-empty folds joined by one space.
    text.folded = " ".join(f for f in folded if f)
    return text


def folded_text_parts(message: Message, memo: Memo | None = None) -> tuple[str, ...]:
    """One message's text parts of a context text, folded (empty ones too): the non-empty ones
    of `ms` joined by spaces are `context_text(ms).folded`. Remembered in `memo` by message id."""
    return _message_text_parts(message, memo)[1]


def _message_text_parts(
    message: Message, memo: Memo | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """One message's text parts of a context text, and each folded, from the memo when seen."""
    key = (message.content, message.tool_calls, raw_summary_text(message))
    table = memo[_TEXT_PARTS] if memo is not None and message.id else None
    hit = table.get(message.id) if table is not None else None
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    content, calls, raw = key
    text_parts = [content]
    if raw is not None and raw != content:
        text_parts.append(raw)
    text_parts.extend(f"{call.name} {call.arguments}" for call in calls)
    mine = tuple(text_parts)
    theirs = tuple(fold(part) for part in mine)
    if table is not None:
        table.put(message.id, (key, mine, theirs))
    return mine, theirs


# Each message's text parts of a context text and their folds, by its id, with their sources.
_TEXT_PARTS: Final = Table[str, tuple[tuple[Any, ...], tuple[str, ...], tuple[str, ...]]](
    "folded text parts", MEMO_SIZE
)


def fact_present(fact: Fact, text: str) -> bool:
    """Whether `text` keeps the fact: its compact text, ignoring case, spacing and a leading ./."""
    return present(fact, folded_text(text))


def presence_test(fact: Fact, memo: Memo | None = None) -> tuple[Callable[[str], bool], str]:
    """The fact's test of a folded text (`present`) and a string every text it passes holds,
    for a caller that asks them of many texts."""
    probed = _probed(fact, memo)
    return probed[1], probed[2]


def missing_facts(facts: Iterable[Fact], summary_text: str, memo: Memo | None = None) -> list[Fact]:
    """The facts the summary lost, in the order given."""
    return missing_from_folded(facts, folded_text(summary_text), memo)


def missing_from_folded(facts: Iterable[Fact], folded: str, memo: Memo | None = None) -> list[Fact]:
    """`missing_facts` for a text already folded (a fact whose anchor the text lacks is
    missing without its test); `memo` keeps each fact's test."""
    memo = memo if memo is not None else Memo()
    out: list[Fact] = []
    for fact in facts:
        _, test, anchor, _ = _probed(fact, memo)
        if not (anchor in folded and test(folded)):
            out.append(fact)
    return out


# Characters around an occurrence that its presence test reads besides the needle: a boundary
# on each side, a path's "." after it, a ticket's "issue #" before its number.
_AROUND: Final = 16


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


def _probed(fact: Fact, memo: Memo | None) -> _Probed:
    """The fact's (kind, text) and `_probe`, remembered in `memo` per fact (a ledger's facts
    are mostly the last one's again, and are asked about at every append) and per (kind, text)
    (a fact read again from a stored ledger is a new object with the same test)."""
    key = (fact.kind, fact.text)
    if memo is None:
        return (key, *_probe(*key))
    by_fact = memo[_PROBED]
    hit = by_fact.get(id(fact))
    if hit is not None and hit[0] is fact:
        return hit[1]
    by_text = memo[_PROBES]
    probe = by_text.get(key)
    if probe is None:
        probe = by_text.put(key, _probe(*key))
    return by_fact.put(id(fact), (fact, (key, *probe)))[1]


# `_probed` by the fact's identity (the entry holds the fact, so its id is not reused while
# remembered), and `_probe` by (kind, text).
_PROBED: Final = Table[int, tuple[Fact, _Probed]]("probed facts", 8192)
_PROBES: Final = Table[tuple[str, str], tuple[Callable[[str], bool], str, int]](
    "presence tests", 8192
)


def retention(
    facts: Iterable[Fact], context_text: str, memo: Memo | None = None
) -> dict[str, float]:
    """Share of facts the context keeps, per kind and "overall": the measure `precis eval` uses."""
    folded = folded_text(context_text)
    kept: dict[str, list[int]] = {}
    for fact in facts:
        tally = kept.setdefault(fact.kind, [0, 0])
        tally[0] += present(fact, folded, memo)
        tally[1] += 1
    out: dict[str, float] = {k: kept[k][0] / kept[k][1] for k in KINDS if k in kept}
    total = sum(t[1] for t in kept.values())
    out["overall"] = sum(t[0] for t in kept.values()) / total if total else 1.0
    return out
