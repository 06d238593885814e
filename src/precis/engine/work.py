"""What one compaction's candidate search works out once and reads again.

Kept apart from `compactor`, which stays under 600 lines; the compactor makes one
`Work` per search (see `Compactor._candidate`).
"""

from __future__ import annotations

from collections.abc import Sequence

from precis.core.messages import Message
from precis.core.tokens import TokenCounter
from precis.facts import folded_parts
from precis.summarize.guard import Ledger

__all__ = ["Work", "joined"]


class Work:
    """What one candidate search works out once and reads again: each message's tokens and
    folded text parts, and each span's ledger. Keyed by the messages' identity: the context's
    messages live for the search, and other entries hold their messages, so no id is reused
    while it is remembered."""

    __slots__ = ("counter", "counts", "ledgers", "parts")

    def __init__(self, messages: Sequence[Message], counts: Sequence[int], counter: TokenCounter):
        self.counter = counter
        self.counts = dict(zip(map(id, messages), counts, strict=True))
        self.parts: dict[int, tuple[Message, tuple[str, ...]]] = {}
        self.ledgers: dict[tuple[int, ...], tuple[tuple[Message, ...], Ledger]] = {}

    def tokens(self, messages: Sequence[Message]) -> int:
        """`Compactor.tokens`, from the context's counts (a message made since is counted)."""
        counts, count = self.counts, self.counter.count
        return sum(counts[id(m)] if id(m) in counts else count(m) for m in messages)

    def folded(self, messages: Sequence[Message]) -> str:
        """`context_text(messages).folded`, from parts already folded."""
        parts = self.parts
        out: list[str] = []
        for message in messages:
            entry = parts.get(id(message))
            if entry is None:
                entry = parts[id(message)] = (message, folded_parts(message))
            out.extend(entry[1])
        return " ".join(part for part in out if part)


def joined(*folded: str) -> str:
    """Folded texts of consecutive runs of messages as the folded text of all of them."""
    return " ".join(text for text in folded if text)
