"""Anchored merging: the earlier summary kept line for line, the span's new items added to it.

The earlier text is cut at its own headings only to know where each new item goes; what it
already says is never re-derived from it. The task it was written for comes from the ledger the
summary carries (`metadata["ledger"]`) when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from precis.core.jscompat import utf16_len
from precis.facts import Facts, Ledger, fact_present, head, one_line, shorten
from precis.summarize.brief.labels import (
    CONSTRAINTS,
    HEADING_RE,
    HEADING_ROOT_RE,
    HEADING_TO_SECTION,
    LAYOUTS,
    MAX_BRIEF_CHARS,
    MIN_ITEM_UNITS,
    PHASE,
    PHASE_LINE_RE,
    STYLE_FILL,
    STYLE_ORDER,
    TASK,
    labels_for,
)
from precis.summarize.brief.sections import Item, display_path, rank, sections


@dataclass(slots=True)
class _Line:
    prefix: str
    body: str
    rank: tuple[int, int, int]
    shrink: bool = False
    variants: tuple[str, ...] = ()
    order: int = 0
    shown: str | None = None


@dataclass(slots=True)
class _Block:
    heading: str
    key: str | None
    lines: list[_Line] = field(default_factory=list)
    root: str = ""
    bullets: bool = True


def _norm(text: str) -> str:
    return one_line(text.strip().lstrip("-*•").strip()).lower()


def _tier(key: str | None) -> int:
    """Fill priority of a section: the task, the phase, the red lines, then the rest."""
    return {TASK: 0, PHASE: 1, CONSTRAINTS: 2}.get(key or "", 3)


def _previous_blocks(text: str) -> tuple[list[_Block], str]:
    """The earlier summary cut at the headings we know, every line kept exactly; and the text
    of its task section, as the lines under its task heading (phase lines aside) read."""
    blocks = [_Block("", None)]
    seq = 0
    current: str | None = None
    task: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        heading = HEADING_RE.match(line)
        if heading is not None:
            title = heading.group(1)
            root = HEADING_ROOT_RE.search(title)
            key = HEADING_TO_SECTION.get((title[: root.start()] if root else title).strip().lower())
            if key is not None:
                blocks.append(_Block(line.rstrip(), key, root=root.group(1) if root else ""))
                current = key
                continue
        if PHASE_LINE_RE.match(line.strip()) is not None:
            blocks.append(_Block("", PHASE))
        elif current == TASK:
            stripped = line.strip()
            task.append(stripped[2:] if stripped.startswith("- ") else stripped)
        block = blocks[-1]
        block.lines.append(_Line("", line.rstrip(), (_tier(block.key), 0, seq), order=seq))
        seq += 1
    for block in blocks:
        block.bullets = any(line.body.lstrip().startswith("- ") for line in block.lines) or not (
            block.lines
        )
    return [b for b in blocks if b.lines], " ".join(task)


def anchor_task(previous: str, ledger: Ledger | None) -> str | None:
    """The task the earlier summary was written for, so the span's first request is not taken
    for it: the ledger's task when the summary carries one and still holds it, else the text of
    the summary's task section (a summary given as bare text carries no ledger)."""
    tasks = ledger.of_kind("task") if ledger is not None else ()
    if tasks and fact_present(tasks[0], previous):
        return tasks[0].text
    return _previous_blocks(previous)[1] or None


def _merge_into(
    blocks: list[_Block],
    new: Mapping[str, list[Item]],
    style: str,
    labels: Mapping[str, str],
    previous: str,
) -> None:
    """Append the span's items to the matching earlier sections, or as new ones; no repeats."""
    seen = {_norm(line.body) for b in blocks for line in b.lines}
    seen |= {_norm(p) for b in blocks for line in b.lines for p in line.body.split(", ")}
    whole = _norm(previous)
    fill = STYLE_FILL[style]
    extra: list[_Block] = []
    for key in STYLE_ORDER[style]:
        items = [
            i for i in new.get(key, []) if (n := _norm(i.text)) and n not in seen and n not in whole
        ]
        if not items:
            continue
        for item in items:
            seen.add(_norm(item.text))
        block = next((b for b in blocks if b.key == key), None)
        if block is None:
            block = _Block("" if key == PHASE else f"## {labels[key]}", key)
            block.bullets = LAYOUTS.get(key, "bullets") == "bullets"
            extra.append(block)
        rank_base = (_tier(key), 1 + fill.index(key) if key in fill else 99)
        if LAYOUTS.get(key) == "inline" and not block.bullets:
            names = [display_path(i.text, block.root) if block.root else i.text for i in items]
            variants = tuple(", ".join(names[:n]) for n in (10, 5, 2, 1) if n < len(names))
            line = _Line("", ", ".join(names), (*rank_base, 0), variants=variants, order=10**6)
            block.lines.append(line)
            continue
        prefix = "- " if block.bullets and key not in {TASK, PHASE} else ""
        for position, item in enumerate(items):
            block.lines.append(
                _Line(
                    prefix,
                    item.text,
                    (*rank_base, position),
                    shrink=item.shrink,
                    variants=item.variants,
                    order=10**6 + item.order,
                )
            )
    head = [b for b in extra if b.key in {TASK, PHASE}]
    rest = [b for b in extra if b.key not in {TASK, PHASE}]
    at = next((i + 1 for i, b in enumerate(blocks) if b.key == TASK), 0)
    for block in reversed(head):
        blocks.insert(0 if block.key == TASK else at, block)
        if block.key == TASK:
            at += 1
    blocks.extend(rest)


def _fit_blocks(blocks: list[_Block], budget: int, min_item: int) -> str:
    """Show lines by rank while they fit; earlier lines whole or not at all."""
    for block in blocks:
        for line in block.lines:
            line.shown = None
    limit = budget + 1
    used = 0
    opened: set[int] = set()
    ordered = sorted(
        ((line.rank, bi, line) for bi, b in enumerate(blocks) for line in b.lines),
        key=lambda entry: (entry[0], entry[1]),
    )
    for _, bi, line in ordered:
        heading = blocks[bi].heading
        opening = utf16_len(heading) + 1 if heading and bi not in opened else 0
        room = limit - used - opening - utf16_len(line.prefix) - 1
        choice = next((t for t in (line.body, *line.variants) if utf16_len(t) <= room), None)
        if choice is None and line.shrink and room >= min_item:
            choice = shorten(line.body, room)
        if choice is None:
            continue
        line.shown = line.prefix + choice
        used += opening + utf16_len(line.shown) + 1
        opened.add(bi)
    out: list[str] = []
    for bi, block in enumerate(blocks):
        if bi not in opened:
            continue
        if block.heading:
            out.append(block.heading)
        shown = sorted((ln for ln in block.lines if ln.shown is not None), key=lambda ln: ln.order)
        out.extend(ln.shown for ln in shown if ln.shown is not None)
    text = "\n".join(out)
    return text if utf16_len(text) <= budget else head(text, budget)


def anchored(
    previous: str,
    facts: Facts,
    *,
    style: str,
    language: str,
    mode: str,
    budget: int,
) -> str:
    """The earlier summary kept line for line, with the span's new items merged in."""
    labels = labels_for(style, language)
    blocks, _ = _previous_blocks(previous)
    ranked = rank(facts, use_root=False)
    new = sections(style, facts, labels, language, mode, MAX_BRIEF_CHARS, ranked)
    _merge_into(blocks, new, style, labels, previous)
    return _fit_blocks(blocks, budget, max(8, min(MIN_ITEM_UNITS, budget // 5)))
