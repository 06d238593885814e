"""How recall scores and shows a hit: the text it searches, the query's terms, a relevance and
a snippet around the first match — the same in every store."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from precis.core.messages import Message, ToolCall

# Longest snippet a recall hit carries, so a hit list stays small enough to show a model.
SNIPPET_CHARS = 200
# What occurrences add to term_score stays under 1, so a message holding more distinct terms
# always ranks first (the bonus reaches it only past 22,000 occurrences).
MAX_OCCURRENCE_BONUS = 0.99


def search_text(message: Message) -> str:
    """The text recall indexes: the content plus each tool call's name and arguments."""
    return search_text_of(message.content, message.tool_calls)


def search_text_of(content: str, tool_calls: Sequence[ToolCall]) -> str:
    """`search_text` of a message given as its content and tool calls."""
    if not tool_calls:
        return content
    calls = " ".join(f"{tc.name} {tc.arguments}" for tc in tool_calls)
    return f"{content}\n{calls}" if content else calls


def query_terms(query: str) -> list[str]:
    """The whitespace-separated terms of a recall query, duplicates dropped, order kept."""
    seen: dict[str, None] = {}
    for term in query.split():
        seen.setdefault(term, None)
    return list(seen)


def term_score(text: str, terms: Sequence[str]) -> float:
    """A simple relevance: distinct terms present, plus a damped count of their occurrences
    (under 1, so more distinct terms always rank higher)."""
    return folded_term_score(text.casefold(), [term.casefold() for term in terms])


def folded_term_score(folded: str, folded_terms: Sequence[str]) -> float:
    """`term_score` of a text and terms already case-folded."""
    distinct = 0
    occurrences = 0
    for term in folded_terms:
        n = folded.count(term)
        if n:
            distinct += 1
            occurrences += n
    if not distinct:
        return 0.0
    return distinct + min(math.log1p(occurrences) / 10, MAX_OCCURRENCE_BONUS)


def snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """A window of at most `width` chars around the first match, so a hit shows why it matched."""
    if len(text) <= width:
        return text
    pattern = "|".join(re.escape(t) for t in terms if t)
    match = re.search(pattern, text, re.IGNORECASE) if pattern else None
    if match is None:
        return text[: width - 1] + "…"
    start = max(0, match.start() - width // 3)
    end = min(len(text), start + width)
    start = max(0, end - width)
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(text) else ""
    body = text[start + len(prefix) : end - len(suffix)]
    return prefix + body + suffix
