"""Small text helpers the rules share: one line, UTF-16 heads and tails, rules in sentences."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from precis.core.jscompat import utf16_len
from precis.facts.demos import request_part
from precis.facts.patterns import (
    ACK_RE,
    CJK_RE,
    COMMAND_ARGS_RE,
    COMMAND_RE,
    DIGIT_RE,
    HARNESS_LINE_RE,
    NO_CLAUSE_RE,
    NOTICE_PREFIXES,
    REMINDER_RE,
    RULE_HEADING_RE,
    RULE_ITEM_RE,
    SENTENCE_SPLIT_RE,
    STRONG_CONSTRAINT_RE,
)

ELLIPSIS: Final = " … "


def one_line(text: str) -> str:
    """Collapse whitespace, so each fact is one dense line."""
    return " ".join(text.split())


def head(text: str, units: int) -> str:
    """The longest prefix within `units` UTF-16 units, never splitting a surrogate pair."""
    if units <= 0:
        return ""
    if text.isascii():
        return text[:units]
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > units:
            return text[:i]
    return text


def tail(text: str, units: int) -> str:
    """The longest suffix within `units` UTF-16 units, never splitting a surrogate pair."""
    if units <= 0:
        return ""
    if text.isascii():
        return text[-units:]
    used = 0
    for i in range(len(text) - 1, -1, -1):
        used += 2 if ord(text[i]) > 0xFFFF else 1
        if used > units:
            return text[i + 1 :]
    return text


def shorten(text: str, units: int, keep: Sequence[str] = ()) -> str:
    """Head and tail around an ellipsis, keeping `keep` sentences from the middle when they fit.

    `keep` is in order of importance; together the kept sentences take at most half the room.
    """
    if utf16_len(text) <= units:
        return text
    if units < 12:
        return head(text, units)
    kept: list[str] = []  # the longest run of `keep` (those in the text) in half the room
    room = units // 2
    for k in keep:
        if k and k in text:
            room -= utf16_len(k) + 3
            if room < 0:
                break
            kept.append(k)
    kept.sort(key=text.find)
    spare = units - sum(utf16_len(k) for k in kept) - utf16_len(ELLIPSIS) * (len(kept) + 1)
    head_units = (spare * 2) // 3
    start = head(text, head_units).rstrip()
    end = tail(text, spare - head_units).lstrip()
    middle = [k for k in kept if k not in start and k not in end]
    return ELLIPSIS.join([start, *middle, end])


def is_trivial(request: str) -> bool:
    """A short acknowledgement ("thanks, that's all", "continue") rather than a request."""
    words = len(request.split())
    if words < 6 and not CJK_RE.search(request):
        return True
    return words < 12 and ACK_RE.search(request) is not None and not DIGIT_RE.search(request)


def by_strength(sentences: Iterable[str]) -> list[str]:
    """Outright prohibitions first (never, don't, 不要), then the softer rules, each in order."""
    return sorted(sentences, key=lambda s: STRONG_CONSTRAINT_RE.search(s) is None)


def forbids(rule: str) -> bool:
    """A prohibition: "never …", "don't …", "must not …", or a clause that opens with "No …"."""
    return STRONG_CONSTRAINT_RE.search(rule) is not None or NO_CLAUSE_RE.search(rule) is not None


def heading_rules(text: str, *, limit: int = 240) -> list[str]:
    """The items listed under a heading that names rules ("## Constraints", "Important Rules:",
    "## Technical Requirements"), one line each, in order; an item that goes on is cut."""
    found: list[str] = []
    under = False
    last = ""  # the item a more indented line goes on with
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        item = RULE_ITEM_RE.match(line)
        if item is None:
            if under and last and line[:1].isspace():
                last = f"{last} {stripped}"
                found[-1] = shorten(one_line(last), limit)
                continue
            last = ""
            is_heading = stripped.startswith("#") or stripped.endswith(":") or stripped.isupper()
            if is_heading and len(stripped) <= 80:
                under = RULE_HEADING_RE.match(stripped) is not None
            continue
        last = ""
        if under:
            rule = shorten(one_line(item.group(1).strip("*_ ")), limit)
            if len(rule) >= 6 and rule not in found:
                found.append(rule)
                last = item.group(1).strip("*_ ")
    return found


# A terminal's colour codes, as a command's captured output carries them.
_ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_INJECTED_PREFIX: Final = "<local-command-stdout>"


def injected_rules(content: str) -> tuple[str, ...]:
    """The rules a command's output that the harness put in the user's turn lists under a
    rules heading (a tracker's "## Core Rules" its hook prints after a compaction), one line
    each, its bold labels plain ("Prohibited: Do NOT use …")."""
    if not content.startswith(_INJECTED_PREFIX):
        return ()
    text = _ANSI_RE.sub("", content)
    return tuple(rule.replace("**", "") for rule in heading_rules(text))


def listed_rules(text: str, sentences: Sequence[str]) -> list[str]:
    """The items listed under a rules heading that none of a text's rule `sentences` holds
    (an item that holds a sentence is the fuller rule: it is listed)."""
    lowered = [f.lower() for f in sentences]
    found: list[str] = []
    for rule in heading_rules(text):
        low = rule.lower()
        if not any(low in f for f in lowered):
            found.append(rule)
            lowered.append(low)
    return found


def clean_user_text(text: str) -> str | None:
    """A user turn as the user wrote it, or None for a notice the agent harness injected or a
    demonstration of another task (`precis.facts.demos`)."""
    text = REMINDER_RE.sub("", text).strip()
    if not text or text.startswith(NOTICE_PREFIXES):
        return None
    request = request_part(text)  # a demonstration of another task is not the user's request
    if request is None:
        return None
    text = request
    command = COMMAND_RE.search(text)
    if command is not None and text.startswith("<command-"):
        args = COMMAND_ARGS_RE.search(text)
        spoken = f"{command.group(1).strip()} {args.group(1).strip() if args else ''}"
        return spoken.strip() or None
    return text


def fix_text(text: str) -> str:
    """What the agent said right after an error, cut to its first sentences."""
    line = one_line(text)
    if utf16_len(line) <= 200:
        return line
    first = " ".join(SENTENCE_SPLIT_RE.split(line)[:2])
    return shorten(first, 160)


def first_line(text: str, units: int = 64) -> str:
    """The first line of a tool's output that says something, cut to `units`."""
    start = 0
    for _ in range(12):
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        if line.strip() and HARNESS_LINE_RE.match(line) is None:
            return shorten(one_line(line), units)
        if end < 0:
            break
        start = end + 1
    return ""


def compact(text: str, units: int) -> str:
    """One line, cut at a word boundary within `units`: a prefix, so the full text contains it.

    The one line of a head of the text is a head of the text's one line, so a long text's head
    that gives more than `units` of it gives the same cut (a task may run to pages)."""
    line = ""
    if len(text) > 2 * units + 64:
        line = one_line(text[: 2 * units + 64])
    if utf16_len(line) <= units:
        line = one_line(text)
        if utf16_len(line) <= units:
            return line
    cut = head(line, units)
    space = cut.rfind(" ")
    return (cut[:space] if space >= len(cut) // 2 else cut).rstrip(" ,;:")
