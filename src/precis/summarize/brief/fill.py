"""Fitting a brief to its budget: sections filled by priority, then rendered in reading order."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from precis.core.jscompat import utf16_len
from precis.facts import Fact, Facts, head, missing_facts, one_line, shorten
from precis.summarize.brief.labels import (
    CODE,
    DISPLAY_ORDER,
    FILES,
    FLOORS,
    HINTS,
    IDENTIFIERS,
    LAYOUTS,
    MIN_ITEM_UNITS,
    MODIFIED,
    NOTES,
    PHASE,
    READ,
    SHARES,
    SMALL_BRIEF_CHARS,
    SMALL_FILL_ORDER,
    STYLE_FILL,
    STYLE_ORDER,
    TASK,
    WORD_RE,
    labels_for,
    shares_for,
)
from precis.summarize.brief.must import MUST_ROUNDS, MUST_SHARE, mark
from precis.summarize.brief.sections import (
    Item,
    Ranked,
    hint_items,
    rank,
    sections,
    wanted_sections,
)
from precis.summarize.prompts import BRIEF_WORD_LIMIT

# Sections whose items are in the tally's rank (recency and use), filled in that order.
RANKED_LISTS: Final = frozenset({MODIFIED, READ, FILES, IDENTIFIERS})


@dataclass(slots=True)
class _Section:
    key: str
    layout: str
    items: list[Item]
    header: str = ""
    shown_count: int = 0
    used: int = 0
    opened: bool = False


class _Brief:
    """Fills sections by priority within the budget, then renders them in reading order."""

    def __init__(
        self,
        budget: int,
        labels: Mapping[str, str],
        root: str,
        order: Sequence[str] = DISPLAY_ORDER,
    ) -> None:
        self.budget = budget
        self.labels = labels
        self.root = root
        self.order = tuple(order)
        self.root_shown = False
        self.sections: dict[str, _Section] = {}
        self.used = 0
        self.min_item = max(8, min(MIN_ITEM_UNITS, budget // 5))
        self.boosted: frozenset[str] = frozenset()
        self.shares = shares_for(budget)

    def add_section(self, key: str, items: list[Item]) -> None:
        if items:
            self.sections[key] = _Section(key, LAYOUTS.get(key, "bullets"), items)

    def _header(self, section: _Section) -> str:
        if section.layout == "bare":
            return ""
        header = f"## {self.labels[section.key]}"
        if self.root and not self.root_shown and section.key in {MODIFIED, READ, FILES}:
            header += f" ({self.labels['in']} {self.root})"
        return header

    def _item_cost(self, section: _Section, text: str) -> int:
        header = "" if section.opened else self._header(section)
        opening = utf16_len(header) + 1 if header else 0
        if section.layout in {"plain", "bare"}:
            return opening + utf16_len(text) + 1
        if section.layout == "bullets":
            return opening + utf16_len(text) + 3
        return opening + utf16_len(text) + (1 if section.shown_count == 0 else 2)

    def _show(self, section: _Section, item: Item, text: str, cost: int) -> None:
        if not section.opened:
            section.opened = True
            section.header = self._header(section)
            if section.key in {MODIFIED, READ, FILES} and self.root:
                self.root_shown = True
        item.shown = text
        section.shown_count += 1
        section.used += cost
        self.used += cost

    def _try_item(self, section: _Section, item: Item, room: int) -> None:
        cost = self._item_cost(section, item.text)
        if cost <= room:
            self._show(section, item, item.text, cost)
            return
        overhead = cost - utf16_len(item.text)
        available = room - overhead
        for variant in item.variants:
            if utf16_len(variant) <= available:
                self._show(section, item, variant, overhead + utf16_len(variant))
                return
        if not item.shrink or section.layout == "inline":
            return
        if available >= self.min_item:
            text = shorten(item.text, available, item.keep)
            self._show(section, item, text, overhead + utf16_len(text))

    def _widen(self, section: _Section, item: Item, limit: int) -> None:
        """Give a shortened item back some of its text once every section had its turn."""
        assert item.shown is not None
        if item.shown == item.text or not item.shrink:
            return
        now = utf16_len(item.shown)
        if item.must is not None and item.shown in item.variants:
            # Shown by a whole shorter form that carries what the guard demands (its words for
            # the task, say): a longer whole form if one fits, never a cut of the text, which
            # may lose them (the guard would add them again, cutting the brief's tail).
            room = now + limit - self.used
            wider = next((v for v in item.variants if now < utf16_len(v) <= room), item.shown)
        else:
            wider = shorten(item.text, now + limit - self.used, item.keep)
        extra = utf16_len(wider) - now
        if extra > 0 and self.used + extra <= limit:
            item.shown = wider
            section.used += extra
            self.used += extra

    def fill_must(self, limit: int) -> None:
        """The items that carry a fact the guard demands, in the guard's order, whole or in
        the fact's own words, within `limit`."""
        marked = [
            (item.must, n, key, section, item)
            for key, section in self.sections.items()
            for n, item in enumerate(section.items)
            if item.must is not None and item.shown is None
        ]
        # A list (files, identifiers) is filled in its own order, newest and most used first,
        # from where its first demanded fact stands: a ledger carried on lists its oldest first.
        start: dict[str, int] = {}
        for must, _, key, _, _ in marked:
            if key in RANKED_LISTS:
                start[key] = min(start.get(key, must), must)
        marked.sort(key=lambda e: (start.get(e[2], e[0]), e[1]))
        for _, _, _, section, item in marked:
            room = limit - self.used
            if room <= 0:
                break
            cost = self._item_cost(section, item.text)
            if cost <= room:
                self._show(section, item, item.text, cost)
                continue
            overhead = cost - utf16_len(item.text)
            for variant in item.variants:
                if utf16_len(variant) + overhead <= room:
                    self._show(section, item, variant, overhead + utf16_len(variant))
                    break

    def _share(self, key: str) -> int:
        """A section's first-pass room: its share of the budget, its floor, more if boosted."""
        share = max(self.shares[key] * self.budget, FLOORS.get(key, 0))
        if key in self.boosted:
            share = max(share, 0.3 * self.budget)
        return int(share)

    def fill_shares(self, keys: Sequence[str], limit: int) -> None:
        """The first pass of `fill` for `keys` alone: each up to its share."""
        for key in keys:
            section = self.sections.get(key)
            if section is None:
                continue
            share = self._share(key)
            for item in section.items:
                if item.shown is not None:
                    continue
                room = min(limit - self.used, share - section.used)
                if room <= 0:
                    break
                if not item.late:
                    self._try_item(section, item, room)

    def widen(self, key: str, limit: int) -> None:
        """Give a section's shortened items back their text, as far as `limit` allows."""
        section = self.sections.get(key)
        for item in section.items if section is not None else ():
            if item.shown is not None:
                self._widen(section, item, limit)  # type: ignore[arg-type]

    def fill(
        self,
        priority: Sequence[str],
        limit: int,
        elastic: Sequence[str] = (),
        then: Sequence[str] | None = None,
    ) -> None:
        """Each section up to its share, then the rest by priority (or in the order `then`
        gives), then the late items.

        An `elastic` section (one that could take any room: the agent's notes) has its share
        first, but takes the rest only after every other section had its fill.
        """
        rest = priority if then is None else then
        after = [k for k in rest if k not in elastic] + [k for k in rest if k in elastic]
        for first_pass, late in ((True, False), (False, False), (False, True)):
            for key in priority if first_pass else after:
                section = self.sections.get(key)
                if section is None:
                    continue
                cap = self._share(key) if first_pass else limit
                for item in section.items:
                    if item.shown is not None:
                        if not first_pass:
                            self._widen(section, item, limit)
                        continue
                    room = min(limit - self.used, cap - section.used)
                    if room <= 0:
                        break
                    # A modest item has its section's share, then waits with the late ones.
                    turn = late if item.modest and not first_pass else item.late == late
                    if turn:
                        self._try_item(section, item, room)

    def shown_text(self) -> str:
        return "\n".join(
            item.shown for s in self.sections.values() for item in s.items if item.shown
        )

    def render(self) -> str:
        lines: list[str] = []
        for key in self.order:
            section = self.sections.get(key)
            if section is None or not section.opened:
                continue
            if section.header:
                lines.append(section.header)
            shown = sorted((i for i in section.items if i.shown is not None), key=lambda i: i.order)
            texts = [i.shown for i in shown if i.shown is not None]
            if section.layout in {"plain", "bare"}:
                lines.extend(texts)
            elif section.layout == "bullets":
                lines.extend(f"- {t}" for t in texts)
            else:
                lines.append(", ".join(texts))
        return "\n".join(lines)


def compose(
    facts: Facts,
    *,
    style: str,
    language: str,
    mode: str,
    budget: int,
    instructions: str | None,
    must: Sequence[Fact] = (),
) -> str:
    """One rendering of the facts in `style` within `budget` UTF-16 units.

    `must` are the facts the guard will demand (`precis.summarize.brief.must`): those a
    rendering lost are placed first in the next one, until it loses no more of them (or
    `MUST_ROUNDS` renderings were made), so the guard finds them and cuts nothing.
    """
    labels = labels_for(style, language)
    ranked = rank(facts)
    built = sections(style, facts, labels, language, mode, budget, ranked)
    text = _compose(facts, style, budget, instructions, labels, ranked, built, ())
    if not must or style != "letta":
        return text
    wanted = list(must)
    placed: set[int] = set()
    for _ in range(MUST_ROUNDS):
        lost = {id(f) for f in missing_facts(wanted, text)} - placed
        if not lost:
            break
        placed |= lost
        chosen = [f for f in wanted if id(f) in placed]
        text = _compose(facts, style, budget, instructions, labels, ranked, built, chosen)
    return text


def _compose(
    facts: Facts,
    style: str,
    budget: int,
    instructions: str | None,
    labels: Mapping[str, str],
    ranked: Ranked,
    candidates: Mapping[str, list[Item]],
    must: Sequence[Fact],
) -> str:
    """One filling of fresh copies of the candidate items (the filler marks what it shows)."""
    brief = _Brief(budget, labels, ranked.root, STYLE_ORDER[style])
    built = {key: [replace(item) for item in items] for key, items in candidates.items()}
    if must and style == "letta":
        mark(built, must)
    for key, items in built.items():
        brief.add_section(key, items)
    wanted = wanted_sections(instructions)
    brief.boosted = frozenset(wanted)
    limit = budget + 1  # every line is charged a newline; the last one is never written
    fill = STYLE_FILL[style]
    if style == "letta":
        small = budget <= SMALL_BRIEF_CHARS and HINTS not in wanted
        order = SMALL_FILL_ORDER if small else fill
        priority = [k for k in (*wanted, *order) if k != HINTS]
        reserve = 0 if small else int(budget * (0.25 if HINTS in wanted else SHARES[HINTS]))
        # The notes take what is left once the rest had its fill; in a small brief they come
        # before the older requests, the identifiers and the files read.
        # A small brief's notes come before the rest of the rules (the pinned task keeps them).
        then = None
        elastic = () if small else (NOTES, CODE)
        # The task and what the caller asked for first, then what the guard will demand.
        brief.fill_shares(list(dict.fromkeys((*wanted, TASK, PHASE))), limit - reserve)
        if facts.task_given:  # a reminder of the pinned task, whole if it is short
            brief.widen(TASK, limit - reserve)
        brief.fill_must(int((limit - reserve) * MUST_SHARE))
        brief.fill(list(dict.fromkeys(priority)), limit - reserve, elastic, then)
        if small:  # no room for search terms: what made it in is the brief
            return _final(brief.render(), facts, budget)
        # Lookup hints come last: they name what did not make it in.
        hints = hint_items(facts, ranked.errors, ranked.modified, ranked.read, brief.shown_text())
        brief.add_section(HINTS, hints)
        brief.fill([HINTS], limit)
    else:
        priority = [*fill[:3], *(k for k in wanted if k in fill), *fill]
        brief.fill(list(dict.fromkeys(priority)), limit)
    return _final(brief.render(), facts, budget)


def _final(text: str, facts: Facts, budget: int) -> str:
    if not text:  # a budget too small for any heading
        text = shorten(one_line(facts.task or facts.last_assistant_text or "…"), budget)
    return text if utf16_len(text) <= budget else head(text, budget)


def _word_count(text: str) -> int:
    """Words as a reader counts them: Latin words, and each Chinese character as one."""
    return sum(1 for word in WORD_RE.findall(text) if any(ch.isalnum() for ch in word))


def within_words(render: Callable[[int], str], style: str, budget: int) -> str:
    """Render, then shrink the budget until a brief keeps to S3's word limit."""
    text = render(budget)
    if style != "brief":
        return text
    for _ in range(8):
        words = _word_count(text)
        if words <= BRIEF_WORD_LIMIT or budget <= 100:
            break
        budget = max(100, int(budget * max(0.5, min(0.92, BRIEF_WORD_LIMIT / words))))
        text = render(budget)
    return text
