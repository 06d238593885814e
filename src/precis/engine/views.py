"""Tool output in context: head+tail display, observation masking and paginated reading.

Tool results are the bulk of an agent's context and mostly stale after a few turns; these views
shrink them while the store keeps every original, which `read_original` pages back in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from precis.core.memo import Memo, Table
from precis.core.messages import KIND_MARKER, KIND_SUMMARY, Message, parse_json
from precis.core.planning import pinned_mask

# Longest first line a table of contents shows per section, so the table stays small.
PREVIEW_CHARS = 60
ELLIPSIS = "…"


def head_tail(
    text: str, *, message_id: str, max_chars: int, head_lines: int, tail_lines: int
) -> str | None:
    """The first and last lines of an over-long text around an omission note; None if it fits.

    The view is at most `max_chars` long, or only the note when `max_chars` cannot hold it;
    long lines are cut, and text with too few lines to omit any is cut by characters.
    """
    if max_chars < 0 or head_lines < 0 or tail_lines < 0:
        raise ValueError("max_chars, head_lines and tail_lines must be >= 0")
    if len(text) <= max_chars:
        return None
    # The prompt a harness prints after every output is not the result's tail: it follows the
    # tail, outside its share, when it takes a small part of the room; else it is left out.
    body = _unwrapped(text)
    wrapper = len(text) - len(body)
    room = max_chars - len(_omission(len(text), "characters", message_id))
    if wrapper and wrapper * WRAPPER_PARTS <= room:
        return (
            _head_tail(body, message_id, max_chars - wrapper, head_lines, tail_lines)
            + (text[len(body) :])
        )
    return _head_tail(body, message_id, max_chars, head_lines, tail_lines, text[len(body) :])


# The most of a cut text's room (beside its note) its harness's wrapper lines may take and still
# be shown: a third.
WRAPPER_PARTS: Final = 3


def _head_tail(
    text: str, message_id: str, max_chars: int, head_lines: int, tail_lines: int, cut: str = ""
) -> str:
    """`head_tail` of a text longer than `max_chars`, whose end `cut` (whole lines, each after
    a newline) was cut off and is counted as omitted."""
    shown = head_lines + tail_lines
    head_share = head_lines / shown if shown else 0.5
    lines = text.split("\n")
    if len(lines) <= shown:
        return _head_tail_chars(text, message_id, max_chars, head_share, len(cut))
    budget = max(0, max_chars - len(_omission(len(lines), "lines", message_id)) - 2)
    head = _take_lines(lines[:head_lines], int(budget * head_share), from_end=False)
    tail_budget = budget - sum(len(line) + 1 for line in head)
    tail_source = lines[len(lines) - tail_lines :] if tail_lines else []
    tail = _take_lines(tail_source, tail_budget, from_end=True)
    omitted = len(lines) - len(head) - len(tail) + cut.count("\n")
    return "\n".join([*head, _omission(omitted, "lines", message_id), *tail])


# A line a shell harness prints after every output: its prompt ("bash-$", "$"), a status line
# "(Label: value)" ("(Current directory: /repo)"), or the tag that closes the output.
_WRAPPER_LINE_RE: Final = re.compile(
    r"\s*(?:[\w.@~:/-]*\$\s*|\([A-Z][\w ]{0,40}: [^\n]*\)|</[a-z_-]+>|)\s*"
)


def _unwrapped(text: str) -> str:
    """`text` without the harness's wrapper lines at its end (all of it when nothing else is
    left: then it is no wrapper)."""
    end = len(text)
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        if start == 0 or _WRAPPER_LINE_RE.fullmatch(text, start, end) is None:
            break
        end = start - 1
    return text[:end] if text[:end].strip() else text


def _omission(count: int, unit: str, message_id: str) -> str:
    return f"[… {count} {unit} omitted; read_original({message_id}, section) …]"


def _head_tail_chars(
    text: str, message_id: str, max_chars: int, head_share: float, left_out: int = 0
) -> str:
    """The head and tail of `text` by characters; `left_out` more were cut off its end."""
    budget = max(0, max_chars - len(_omission(len(text) + left_out, "characters", message_id)) - 2)
    head_chars = int(budget * head_share)
    tail_chars = budget - head_chars
    head = text[:head_chars]
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    if len(head) + len(tail) >= len(text):
        head, tail = text, ""  # the text without its wrapper fits whole
    note = _omission(len(text) + left_out - len(head) - len(tail), "characters", message_id)
    return "\n".join(part for part in (head, note, tail) if part)


def _take_lines(lines: Sequence[str], budget: int, *, from_end: bool) -> list[str]:
    """Whole lines (each costing its length + 1) while they fit, then one cut line."""
    ordered = list(reversed(lines)) if from_end else list(lines)
    out: list[str] = []
    used = 0
    for line in ordered:
        if used + len(line) + 1 <= budget:
            out.append(line)
            used += len(line) + 1
            continue
        room = budget - used - 2  # the line's newline and the ellipsis
        if room > 0:
            out.append(ELLIPSIS + line[len(line) - room :] if from_end else line[:room] + ELLIPSIS)
        break
    return list(reversed(out)) if from_end else out


def with_content(message: Message, content: str, metadata: Mapping[str, Any]) -> Message:
    """A copy with new text and extra metadata, same id; drops a list content it replaces."""
    extra = {k: v for k, v in message.openai_extra.items() if k != "content"}
    return replace(
        message,
        content=content,
        metadata={**message.metadata, **metadata},
        openai_extra=extra,
    )


def display_message(
    message: Message,
    *,
    max_chars: int | None,
    head_lines: int,
    tail_lines: int,
    memo: Memo | None = None,
) -> Message:
    """The message as the model should see it: an over-long tool output shown head+tail."""
    if message.role != "tool":
        return message
    return fit_message(
        message, max_chars=max_chars, head_lines=head_lines, tail_lines=tail_lines, memo=memo
    )


def fit_message(
    message: Message,
    *,
    max_chars: int | None,
    head_lines: int,
    tail_lines: int,
    memo: Memo | None = None,
) -> Message:
    """Any message over `max_chars` shown head+tail (a pasted log too big for the window);
    every view of the context shows a long output again, so `memo` keeps its view."""
    if max_chars is None or len(message.content) <= max_chars:
        return message
    content = message.content
    key = (message.id, max_chars, head_lines, tail_lines)
    shown = memo[_SHOWN] if memo is not None and message.id else None
    hit = shown.get(key) if shown is not None else None
    view: str | None
    if hit is not None and (hit[0] is content or hit[0] == content):
        view = hit[1]
    else:
        view = head_tail(
            content,
            message_id=message.id,
            max_chars=max_chars,
            head_lines=head_lines,
            tail_lines=tail_lines,
        )
        if view is not None and shown is not None:
            shown.put(key, (content, view))
    if view is None:
        return message
    return with_content(message, view, {"shortened_from": len(content)})


# Long tool outputs shown head+tail, by (message id, settings): the text, then its view. Few, as
# each entry holds a whole long output (which a store that reads rows afresh would let go).
_SHOWN: Final = Table[tuple[str, int, int, int], tuple[str, str]]("shown outputs", 256)


# A text is never cut to fewer characters than this to fit its turn (its head+tail note needs
# about as many), and only texts longer than it are cut.
MIN_SHARE_CHARS = 240
# Rounds of cutting a turn: each recounts and cuts again if the notes pushed it over.
FIT_ROUNDS = 4
# What a turn's long tool-call arguments (a file an agent wrote, say) are cut to when the turn
# does not fit its room: one size, so a message has one shortened form.
ARGUMENTS_SHOWN_CHARS = 1000


def fit_turns(
    messages: Sequence[Message],
    *,
    budget_tokens: int,
    count: Callable[[Message], int],
    head_lines: int,
    tail_lines: int,
    memo: Memo | None = None,
) -> list[Message]:
    """Each unsplittable turn (a tool call with its results, or a lone message) larger than
    `budget_tokens` shown within it: its long texts head+tail, each cut to a fair share.

    A turn cannot be split by a compaction, so one larger than the room beside the summary would
    keep the context over its budget however much is summarized. Pinned turns, summaries and
    truncation markers are left whole (the engine sizes those). `memo` keeps each cut turn, as
    every view of the context shows a big turn again.
    """
    memo = memo if memo is not None else Memo()
    out = list(messages)
    counts = list(map(count, out))  # cached per message: the cheapest look at its size
    n = len(out)
    start = 0
    while start < n:
        first = out[start]
        end = start + 1
        tokens = counts[start]
        if first.tool_calls:  # its results follow it: one turn
            ids = {c.id for c in first.tool_calls}
            while end < n and out[end].role == "tool" and out[end].tool_call_id in ids:
                tokens += counts[end]
                end += 1
        if tokens > budget_tokens:
            members = out[start:end]
            # A pinned call keeps its results (the whole turn is pinned); summaries and
            # markers are sized by the engine.
            if not any(m.pinned or m.kind in (KIND_SUMMARY, KIND_MARKER) for m in members):
                out[start:end] = _fitted_group(
                    members, budget_tokens, count, head_lines, tail_lines, memo
                )
        start = end
    return out


# Turns cut to fit, by (member ids, budget, head, tail, counter): the members, then what was
# shown. Few: each holds long texts.
_FITTED: Final = Table[
    tuple[tuple[str, ...], int, int, int, Callable[[Message], int]],
    tuple[list[Message], list[Message]],
]("fitted turns", 64)


def _fitted_group(
    members: list[Message],
    budget: int,
    count: Callable[[Message], int],
    head_lines: int,
    tail_lines: int,
    memo: Memo,
) -> list[Message]:
    """`_fit_group` of a turn over the budget, remembered (the members are checked equal: ids
    alone may repeat across stores); keyed by the counter too, whose counts the cut fits."""
    ids = tuple(m.id for m in members)
    key = (ids, budget, head_lines, tail_lines, count)
    fitted = memo[_FITTED] if all(ids) else None
    hit = fitted.get(key) if fitted is not None else None
    if hit is not None and all(a is b or a == b for a, b in zip(hit[0], members, strict=True)):
        return list(hit[1])
    counts = [count(m) for m in members]
    if sum(counts) <= budget:
        shown = members
    else:
        shown = _fit_group(members, counts, budget, count, head_lines, tail_lines, memo)
    if fitted is not None:
        fitted.put(key, (list(members), list(shown)))
    return list(shown)


def _fit_group(
    members: Sequence[Message],
    counts: Sequence[int],
    budget: int,
    count: Callable[[Message], int],
    head_lines: int,
    tail_lines: int,
    memo: Memo,
) -> list[Message]:
    """The members cut so their tokens fit `budget`: short ones whole, long ones to equal shares
    of what is left (water-filling), recounted and cut again while the notes overshoot."""
    cuttable = [k for k, m in enumerate(members) if _text_chars(m) > MIN_SHARE_CHARS]
    fixed = sum(c for k, c in enumerate(counts) if k not in cuttable)
    shown = list(members)
    target = budget
    for _ in range(FIT_ROUNDS):
        shares = _water_fill([counts[k] for k in cuttable], max(0, target - fixed))
        for k, share in zip(cuttable, shares, strict=True):
            member = members[k]
            chars = max(MIN_SHARE_CHARS, _text_chars(member) * share // max(1, counts[k]))
            shown[k] = (
                member
                if share >= counts[k]
                else _cut_to(member, chars, head_lines, tail_lines, memo)
            )
        total = sum(count(m) for m in shown)
        if total <= budget or target <= fixed:
            break
        target = int(target * budget / total) - 1
    return shown


def _text_chars(message: Message) -> int:
    """The characters a view may cut: the content and the tool calls' arguments."""
    return len(message.content) + sum(len(c.arguments) for c in message.tool_calls)


def _cut_to(message: Message, chars: int, head_lines: int, tail_lines: int, memo: Memo) -> Message:
    """The message within about `chars` characters: each call's long arguments shown at one
    fixed size (`ARGUMENTS_SHOWN_CHARS`, their JSON kept valid), the content cut to the rest.

    Counters remember a message by id and content length, so a copy whose arguments were cut
    must differ from the stored message in its content: it says so in a note. The arguments are
    cut the same way whatever the room, so every such copy of a message is the same one.
    """
    calls = message.tool_calls
    cut = tuple(
        call
        if len(call.arguments) <= ARGUMENTS_SHOWN_CHARS
        else replace(call, arguments=_cut_arguments(call.arguments, message.id, memo))
        for call in calls
    )
    room = max(MIN_SHARE_CHARS, chars - sum(len(c.arguments) for c in cut))
    out = message
    if len(message.content) > room:
        out = fit_message(
            out, max_chars=room, head_lines=head_lines, tail_lines=tail_lines, memo=memo
        )
    if cut == calls:
        return out
    note = f"[long call arguments shown head+tail; read_original({message.id}) has them whole]"
    content = f"{out.content}\n{note}" if out.content else note
    if len(content) == len(message.content):
        content += " "  # never the stored message's length: a counter would take it for it
    extra = {k: v for k, v in out.openai_extra.items() if k != "content"}
    metadata = {**out.metadata, "arguments_shortened": True}
    return replace(out, content=content, tool_calls=cut, metadata=metadata, openai_extra=extra)


def _cut_arguments(arguments: str, message_id: str, memo: Memo) -> str:
    """`cut_arguments` to `ARGUMENTS_SHOWN_CHARS`, remembered: each view cuts them again."""
    cut = memo[_CUT_ARGUMENTS]
    key = (arguments, message_id)
    found = cut.get(key)
    if found is None:
        found = cut.put(key, cut_arguments(arguments, ARGUMENTS_SHOWN_CHARS, message_id))
    return found


# Long tool-call arguments as a view shows them, by (arguments, message id).
_CUT_ARGUMENTS: Final = Table[tuple[str, str], str]("cut arguments", 256)


def cut_arguments(arguments: str, max_chars: int, message_id: str) -> str:
    """Tool-call arguments within about `max_chars`: in JSON, the longest string values cut
    head+tail (the JSON stays valid); other text cut head+tail as it is."""
    if len(arguments) <= max_chars:
        return arguments
    try:
        value = parse_json(arguments)
    except ValueError:
        value = None
    if not isinstance(value, dict | list):
        shown = head_tail(
            arguments, message_id=message_id, max_chars=max_chars, head_lines=1, tail_lines=1
        )
        return arguments if shown is None else shown
    leaves = sorted(_string_leaves(value), key=lambda leaf: -len(leaf[2]))
    excess = len(json.dumps(value, ensure_ascii=False)) - max_chars
    for holder, key, text in leaves:
        if excess <= 0:
            break
        keep = max(0, len(text) - excess)
        shown = _head_tail_chars(text, message_id, keep, 0.6) if keep < len(text) else text
        holder[key] = shown
        excess -= len(text) - len(shown)
    return json.dumps(value, ensure_ascii=False)


def _string_leaves(value: Any) -> list[tuple[Any, Any, str]]:
    """(container, key, text) for every string inside a JSON value."""
    found: list[tuple[Any, Any, str]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(item, str):
            found.append((value, key, item))
        elif isinstance(item, dict | list):
            found.extend(_string_leaves(item))
    return found


def _water_fill(sizes: Sequence[int], room: int) -> list[int]:
    """Shares of `room`: sizes within an equal share keep their size, the rest split what is
    left equally."""
    shares = [0] * len(sizes)
    left, pending = room, len(sizes)
    for k in sorted(range(len(sizes)), key=lambda k: sizes[k]):
        fair = left // pending if pending else 0
        shares[k] = min(sizes[k], fair)
        left -= shares[k]
        pending -= 1
    return shares


def mask_observations(messages: Sequence[Message], *, keep_last_turns: int) -> list[Message]:
    """Replace tool outputs older than the last `keep_last_turns` turns with a one-line note.

    A turn starts at each user message (summaries and markers excluded). Calls, assistant text
    and reasoning stay; pinned groups and outputs shorter than their note are left as they are.
    """
    if keep_last_turns < 0:
        raise ValueError(f"keep_last_turns must be >= 0, got {keep_last_turns}")
    starts = [
        i
        for i, m in enumerate(messages)
        if m.role == "user" and m.kind not in {KIND_SUMMARY, KIND_MARKER}
    ]
    if keep_last_turns == 0:
        boundary = len(messages)
    elif len(starts) < keep_last_turns:
        return list(messages)
    else:
        boundary = starts[-keep_last_turns]
    pinned = pinned_mask(messages)
    tool_names: dict[str, str] = {}
    out: list[Message] = []
    for i, message in enumerate(messages):
        for call in message.tool_calls:
            tool_names[call.id] = call.name
        if i >= boundary or message.role != "tool" or pinned[i] or message.metadata.get("masked"):
            out.append(message)
            continue
        name = tool_names.get(message.tool_call_id or "", "tool")
        lines = message.content.count("\n") + 1 if message.content else 0
        note = f"[output of {name} omitted ({lines} lines); read_original({message.id})]"
        if len(note) >= len(message.content):
            out.append(message)
        else:
            out.append(with_content(message, note, {"masked": True}))
    return out


@dataclass(frozen=True, slots=True)
class Section:
    """One page of a long text: its 1-based index and line range, and a first-line preview."""

    index: int
    first_line: int
    last_line: int
    preview: str


def split_lines(text: str) -> list[str]:
    """Lines with their newlines kept, so joining them gives the text back exactly."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def sections(text: str, *, lines_per_section: int = 50) -> list[Section]:
    """The text cut into pages of `lines_per_section` lines, numbered from 1."""
    if lines_per_section < 1:
        raise ValueError(f"lines_per_section must be >= 1, got {lines_per_section}")
    lines = split_lines(text)
    out: list[Section] = []
    for start in range(0, len(lines), lines_per_section):
        page = lines[start : start + lines_per_section]
        first = next((line.strip() for line in page if line.strip()), "")
        out.append(
            Section(
                index=len(out) + 1,
                first_line=start + 1,
                last_line=start + len(page),
                preview=_shorten(first, PREVIEW_CHARS),
            )
        )
    return out


def read_section(
    text: str, section: int | None, *, lines_per_section: int = 50, message_id: str = ""
) -> str:
    """A table of contents (section None) or one section under a one-line header.

    The body after the header's newline is the section's text verbatim, so all sections
    together give the original back exactly.
    """
    label = f"message {message_id}" if message_id else "the text"
    pages = sections(text, lines_per_section=lines_per_section)
    total_lines = pages[-1].last_line if pages else 0
    if section is None:
        head = f"{label}: {total_lines} lines in {len(pages)} sections"
        rows = [
            f"section {p.index}: lines {p.first_line}-{p.last_line}: {p.preview}" for p in pages
        ]
        hint = f"read_original({message_id or '<id>'}, section) shows one section."
        return "\n".join([head, *rows, hint])
    if not pages:
        return f"error: {label} is empty; it has no sections."
    if not 1 <= section <= len(pages):
        return (
            f"error: section {section} is out of range; {label} has sections 1 to {len(pages)} "
            "(leave section out for the table of contents)."
        )
    page = pages[section - 1]
    body = "".join(split_lines(text)[page.first_line - 1 : page.last_line])
    header = (
        f"{label}, section {page.index} of {len(pages)} "
        f"(lines {page.first_line}-{page.last_line} of {total_lines}):"
    )
    return f"{header}\n{body}"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
