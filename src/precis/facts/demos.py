"""A worked demonstration in the user's turn is not the request: find the request beside it.

Agent harnesses (SWE-agent's `--- DEMONSTRATION ---` block, few-shot prompts, "here is an
example run") open a run with a transcript of another task before the real one, in the same
message or in one of its own. The task is the request the agent works on, so the rules here
say which part of a user turn is a demonstration, by its structure and wording alone.
"""

from __future__ import annotations

import re
from typing import Final

# "--- DEMONSTRATION ---", "=== EXAMPLE ===", "### Example transcript", "【示例】"
_BANNER: Final = r"[-=#*~_ \t【\[]*"
_OPENING_RE: Final = re.compile(
    rf"^{_BANNER}(?:demonstration|example (?:run|session|transcript|trajectory|interaction)"
    r"|worked example|示例|演示|范例)s?[-=#*~_ \t】\]:：]*$",
    re.IGNORECASE | re.MULTILINE,
)
_CLOSING_RE: Final = re.compile(
    rf"^{_BANNER}(?:end of (?:the )?(?:demonstration|example)s?|(?:demonstration|example)s? ends?"
    r"|示例结束|演示结束|范例结束)[-=#*~_ \t】\].。:：]*$",
    re.IGNORECASE | re.MULTILINE,
)
# A lead-in that says what follows is a demonstration of another task, not this one.
_LEAD_RE: Final = re.compile(
    r"\A\W*(?:(?:here\s+is|here's|below\s+is|the\s+following\s+is|this\s+is)\s+"
    r"(?:a|an|one)\s+(?:demonstration|worked\s+example"
    r"|example\s+(?:run|session|transcript|trajectory|interaction|conversation))"
    r"|(?:以下|下面)是(?:一个|一段)?(?:示例|演示|范例)|(?:示例|演示|范例)[:：])",
    re.IGNORECASE,
)
# Where the real request starts after a lead-in: "Now, …your task", "Here is the actual issue".
_HANDOVER_RE: Final = re.compile(
    r"^[^\w\n]*(?:now[,\s]+(?:it'?s\s+your\s+turn|(?:here\s+is|here's|this\s+is)\s+"
    r"(?:the|your)\s+(?:actual|real|new)?\s*(?:task|issue|problem|request|challenge))"
    r"|(?:here\s+is|here's|this\s+is)\s+(?:the|your)\s+(?:actual|real)\s+"
    r"(?:task|issue|problem|request|challenge)|your\s+(?:actual|real)\s+task\b"
    r"|(?:现在|接下来)(?:轮到你|是你的任务|请完成)|你的(?:真实|实际)?任务[是:：])",
    re.IGNORECASE | re.MULTILINE,
)
# An opening line that states a task, long enough to be a template's and not a phrase.
_MIN_OPENING_CHARS: Final = 30
_TASK_WORD_RE: Final = re.compile(
    r"\b(?:task|issue|problem|challenge|solv\w*|fix\w*|implement\w*|request)\b|任务|问题",
    re.IGNORECASE,
)


def request_part(text: str) -> str | None:
    """The part of a user turn that is the request; None when all of it is a demonstration.

    A closing banner ("--- END OF DEMONSTRATION ---") ends the demonstration: the request is
    what follows it. A turn that opens with a demonstration banner or lead-in is the
    demonstration up to a hand-over ("Now it's your turn", "Here is the actual task"). A turn
    whose opening line comes again further down is a transcript of an earlier instance of the
    same task template followed by the real one: the request starts at its last occurrence.
    """
    closing = max(_CLOSING_RE.finditer(text), key=lambda m: m.start(), default=None)
    if closing is not None:
        return text[closing.end() :].strip() or None
    body = text.strip()
    opening = _OPENING_RE.match(body)
    if opening is not None or _LEAD_RE.match(body) is not None:
        handover = _HANDOVER_RE.search(body, opening.end() if opening is not None else 1)
        return body[handover.start() :].strip() if handover is not None else None
    return _after_repeated_opening(body)


def is_demonstration(text: str) -> bool:
    """Whether the whole user turn is a demonstration (its request, if any, comes later)."""
    return request_part(text) is None


def _after_repeated_opening(text: str) -> str:
    """The text from the last line that repeats its first line (a template stated twice)."""
    first = text.split("\n", 1)[0].strip()
    if len(first) < _MIN_OPENING_CHARS or _TASK_WORD_RE.search(first) is None:
        return text
    at = text.rfind("\n" + first)
    return text[at + 1 :].strip() if at > 0 else text
