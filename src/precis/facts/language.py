"""Which messages are earlier summaries, and which language the user writes in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from precis.core.messages import KIND_SUMMARY, Message, parse_json
from precis.facts.patterns import CJK_RE, LATIN_RE
from precis.facts.text import clean_user_text

_PACKED_SUMMARY_MARK: Final = "The following is a summary of the previous messages:"


def raw_summary_text(message: Message) -> str | None:
    """The bare text of an earlier summary, so a re-summary sees it without its JSON wrapper."""
    ours = message.metadata.get("summary")
    if isinstance(ours, str):
        return ours
    compaction = message.metadata.get("compaction")
    if compaction is not None and isinstance(compaction, Mapping):  # (most have none)
        letta_summary = compaction.get("summary")
        if isinstance(letta_summary, str):
            return letta_summary
    return None


def earlier_summary_text(message: Message) -> str | None:
    """The raw text of an earlier summary, unwrapping letta's JSON when no raw copy was kept."""
    raw = raw_summary_text(message)
    if raw is not None:
        return raw
    if message.kind != KIND_SUMMARY:
        return None
    text = message.content
    try:
        packed = parse_json(text)
    except ValueError:
        packed = None
    if isinstance(packed, Mapping) and isinstance(packed.get("message"), str):
        text = packed["message"]
    _, mark, after = text.partition(_PACKED_SUMMARY_MARK)
    return after.strip() if mark else text.strip()


def is_chinese(texts: Iterable[str]) -> bool:
    """Whether Chinese dominates the user's words (a CJK character is worth about a word)."""
    texts = list(texts)
    cjk = sum(len(CJK_RE.findall(text)) for text in texts)
    if not cjk:
        return False  # the Latin letters need no count (the common case, and the long one)
    latin = sum(len(LATIN_RE.findall(text)) for text in texts)
    return cjk * 3 >= latin


def span_language(
    messages: Sequence[Message], task: str | None = None, previous: str | None = None
) -> str:
    """ "zh" when Chinese dominates the user's words (the task included), else "en"."""
    texts = [
        text
        for m in messages
        if m.role == "user"
        and earlier_summary_text(m) is None
        and (text := clean_user_text(m.content)) is not None
    ]
    if task:
        texts.append(task)
    if not texts and previous:
        texts.append(previous)
    return "zh" if is_chinese(texts) else "en"
