"""An error's fix as the work told it, and a failed read: the words after an error, the change
made a few turns later, and a command's output that is only a refusal in a harness's wrapper."""

from __future__ import annotations

import re
from typing import Final

from precis.facts.patterns import SENTENCE_SPLIT_RE

# How many messages after the words that followed an error the change they planned may come.
FIX_CHANGE_MESSAGES: Final = 6
# A harness's wrapper around a command's output: tags alone, or a tag around a status code.
_WRAPPER_RE: Final = re.compile(r"^\s*(?:</?[a-z_-]+>|<([a-z_-]+)>\s*-?\d{1,3}\s*</\1>)\s*$")
_WRAPPED_LINES: Final = 8
_PLAN_OPENING_RE: Final = re.compile(
    r"(?i)(?:now,? |first,? |next,? )?(?:let me|let's|i'll|i will)\b"
)
# A code name in what an edit added (`lazy_html`, `Phoenix.ConnTest`, `getUser`).
_CODE_WORD_RE: Final = re.compile(r"[A-Za-z_]\w*(?:[._]\w+)+|[a-z]+[A-Z]\w*")


def refusal(text: str) -> bool:
    """Whether an output is a line or two once a harness's wrapper lines are set aside."""
    if text.count("\n") < 2:
        return True
    if text.count("\n") > _WRAPPED_LINES:
        return False
    said = [ln for ln in text.splitlines() if ln.strip() and not _WRAPPER_RE.match(ln)]
    return len(said) <= 2


def fixed_by(fix: str, words: str, edit: str) -> str:
    """An error's fix once a change follows the words said after it: what the change's own
    words say follows the first sentence of the first ones (often only a plan to look again);
    a change that says nothing is shown by its edit, unless the words already name what it
    adds."""
    if said := _saying(words):
        return f"{_first_sentence(fix)} ⇒ {said}"
    added = _CODE_WORD_RE.findall(edit.partition(": +")[2])
    if any(name in fix for name in added):
        return fix
    return f"{_first_sentence(fix)} ⇒ {edit}"


def _first_sentence(text: str) -> str:
    """The first sentence that says something, else the first."""
    return _saying(text) or SENTENCE_SPLIT_RE.split(text, maxsplit=1)[0]


def _saying(text: str) -> str:
    """The first sentence that says something: not a cry ("Great!", "I found the issue!"), a
    plan ("Now let me add the tests") or a word or three ("I see."); "" when none does."""
    return next(
        (
            s
            for s in SENTENCE_SPLIT_RE.split(text)
            if len(s.split()) >= 4 and not s.endswith("!") and not _PLAN_OPENING_RE.match(s)
        ),
        "",
    )
