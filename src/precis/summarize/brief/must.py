"""The facts the guard demands, placed by the brief itself.

The guard appends, verbatim, whatever ledger fact a summary lost, and cuts the summary's tail
to make room: its newest notes go first, and a fact the brief showed in another form (a
shortened rule, a task by its gist) is shown twice. So once the task has its share, the brief
fills the items that carry a ledger fact its plain rendering lost before any other, in the
guard's order, and adds an item in the fact's own words where none of its items carries it
(`fill.compose` renders again until no more are lost). What the guard would still append is
then little, and what the brief leaves out to make room is its own least vital items, not its
tail. The facts come from `extractive.must_keep`: the span's ledger as the engine reads it,
less what the pinned task and the kept messages hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from precis.core.jscompat import utf16_len
from precis.facts import Fact, fold, present, shorten
from precis.facts.gist import fit_sentences
from precis.facts.patterns import DIGIT_RE, SENTENCE_SPLIT_RE
from precis.facts.text import ELLIPSIS
from precis.summarize.brief.items import Item
from precis.summarize.brief.labels import (
    CONSTRAINTS,
    ERRORS,
    IDENTIFIERS,
    MODIFIED,
    READ,
    REQUESTS,
    TASK,
    WORK,
)
from precis.summarize.guard import in_guard_order

# The section a fact of each kind belongs in when no item carries it.
HOME: Final[Mapping[str, str]] = {
    "constraint": CONSTRAINTS,
    "task": TASK,
    "pinned": REQUESTS,
    "state": WORK,
    "file_modified": MODIFIED,
    "identifier": IDENTIFIERS,
    "error": ERRORS,
    "file_read": READ,
    "request": REQUESTS,
}
# The share of the budget the guard's facts may take first. All of it: the guard would cut the
# brief's tail for any it lost (down to its body floor), so a lower bound only moves the cut.
MUST_SHARE: Final = 1.0
# Renderings of one brief at most: each places first the facts the one before lost.
MUST_ROUNDS: Final = 3
# The least of the gist worth showing after the guard's words for the task.
_MIN_REST: Final = 40
# A sentence that names code, a path or file, or a host; then one that has a number.
_CODE_NAMED_RE: Final = re.compile(r"`[^`]+`|\w[/.:]\w")
# A markup tag around a task's parts ("<uploaded_files>", "</issue_description>").
_TAG_RE: Final = re.compile(r"</?[A-Za-z_][\w-]*>")
# What the gist's section takes besides its text (heading, newlines), so the lead fits as it did.
_SLACK: Final = 16
# Where new items go in their section's reading order: after the items it had.
_NEW_ORDER: Final = 10**7


def _line(fact: Fact) -> str:
    return f"{fact.text} → {fact.note}" if fact.note else fact.text


def mark(out: dict[str, list[Item]], facts: Sequence[Fact]) -> None:
    """Mark each item that carries one of `facts` (the first that does, its home section
    first), and add an item in the fact's words to its home section where none does."""
    folded: dict[int, str] = {}
    # Each section's items folded together: a fact whose words are not there is in none of them.
    joined = {key: fold("\n".join(i.text for i in items)) for key, items in out.items()}

    def carried(item: Item) -> str:
        key = id(item)
        if key not in folded:
            folded[key] = fold(item.text)
        return folded[key]

    # The task leads, as it leads the brief; then the guard's order.
    for rank, fact in enumerate(sorted(in_guard_order(facts), key=lambda f: f.kind != "task")):
        home = HOME.get(fact.kind)
        if home is None or (home not in out and home != TASK):
            continue
        needle = _needle(fact)
        order = [home, *(k for k in out if k != home)]
        found = next(
            (
                item
                for key in order
                if needle in joined.get(key, "")
                for item in out.get(key, ())
                if present(fact, carried(item)) or _as_variant(item, fact)
            ),
            None,
        )
        if found is not None:
            if found.must is None:
                found.must = rank
            continue
        if fact.kind == "task":
            _lead_task(out.setdefault(TASK, []), fact, rank)
            continue
        text = _line(fact)
        variants = (fact.text,) if fact.note else ()
        out[home].append(Item(text, _NEW_ORDER + rank, shrink=False, variants=variants, must=rank))


def _needle(fact: Fact) -> str:
    """Words any text that keeps the fact holds (`precis.facts.present`): a state's subject,
    a path without its "./"; nothing for a ticket, which may be cited many ways."""
    folded = fold(fact.text)
    if fact.kind == "state":
        return folded.partition(": ")[0]
    if fact.kind == "identifier" and folded.startswith("#"):
        return ""
    return folded.removeprefix("./")


def _as_variant(item: Item, fact: Fact) -> bool:
    """Whether a shrinkable item's text holds the fact's words (a prefix cut of the same text):
    then the fact's words are its last resort, instead of a cut that may lose them."""
    if fact.kind not in {"constraint", "request", "error", "pinned"} or not item.shrink:
        return False
    if not item.text.startswith(fact.text):
        return False
    if fact.text not in item.variants:
        item.variants = (*item.variants, fact.text)
    return True


def _lead_task(items: list[Item], fact: Fact, rank: int) -> None:
    """The task led by the guard's words for it, then what else its gist named."""
    if not items:
        items.append(Item(fact.text, 0, shrink=False, must=rank))
        return
    task = items[0]
    # Drop the gist's opening where the fact's words already say it (the gist drops markup
    # tags and a colon before what it introduces: so are the words, to compare).
    said = " ".join(_TAG_RE.sub(" ", fact.text).split())
    words = task.text.split(" ")
    cut = 0
    for i in range(1, len(words) + 1):
        if " ".join(words[:i]).rstrip(":") in said:
            cut = i
        else:
            break
    rest = " ".join(words[cut:]).strip().lstrip("… ").strip()
    # Within the gist's own size (its section's cap): the rest gives way to the fact's words.
    room = utf16_len(task.text) - utf16_len(fact.text) - utf16_len(ELLIPSIS) - _SLACK
    forms = _fit_forms(rest, room, fact.text) if room >= _MIN_REST else []
    texts = [f"{fact.text} … {form}" for form in forms if form not in fact.text]
    text = texts[0] if texts else fact.text
    # Shorter whole forms: the fact's words and fewer of the gist's sentences, the ones that
    # name something kept longest, down to the fact's words alone.
    variants = (*texts[1:], fact.text) if texts else (fact.text,)
    items[0] = Item(text, task.order, task.keep, variants=variants, must=rank)


def _fit_forms(rest: str, room: int, shown: str = "") -> list[str]:
    """The gist's sentences within `room`, shown in their order: those that name code, a path
    or a host first, then those with a number, then the rest; one cut only when none fits whole.
    Then each shorter form that leaves out its last-ranked sentence. A sentence whose opening
    the fact's words (`shown`) already hold is not shown again."""
    sentences = [p for p in SENTENCE_SPLIT_RE.split(rest) if p.strip() and _opening(p) not in shown]
    if not sentences:
        return []
    ranked = sorted(range(len(sentences)), key=lambda i: _naming(sentences[i]))
    picked = fit_sentences(sentences, ranked, room)
    if not picked:
        return [shorten(" ".join(sentences), room)]
    by_rank = sorted(picked, key=ranked.index)
    return [" ".join(sentences[i] for i in sorted(by_rank[:k])) for k in range(len(by_rank), 0, -1)]


def _naming(sentence: str) -> int:
    """0 for a sentence that names code, a path or a host, 1 for one with a number, else 2."""
    if _CODE_NAMED_RE.search(sentence):
        return 0
    return 1 if DIGIT_RE.search(sentence) else 2


def _opening(sentence: str) -> str:
    """A sentence's first words (at most five): what shows it was already shown."""
    return " ".join(sentence.split()[:5])
