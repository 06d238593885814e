"""Composition samples: what filled the context window after each turn, one small row per turn.

After every append and every compaction the session counts the context by kind (system prompt,
tool definitions, pinned items and the task, the summary, kept messages, tool outputs) and the
store records it as a `Sample`, numbered per conversation. The inspector and `precis eval --plot`
draw the window's composition over time from these rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from precis.core.errors import StoreError

__all__ = [
    "PARTS",
    "SAMPLE_KINDS",
    "Sample",
    "SampleKind",
    "check_sample",
    "grown",
    "numbered",
]

SampleKind = Literal["append", "compaction"]
SAMPLE_KINDS: Final = ("append", "compaction")
# The parts a sample counts, bottom of the stack first; their sum is the sample's total.
PARTS: Final = ("system", "tools", "pinned", "summary", "messages", "tool_outputs")


@dataclass(frozen=True, slots=True)
class Sample:
    """Tokens in the window by kind after one turn; `turn` and `version` are the store's to set.

    `in_context` counts the messages in context; `messages` is the tokens of the kept ordinary
    messages (tool outputs apart); `reserved` is room the settings keep free besides the context
    (for the answer and the summary); `window` is None when no window is set. `version` is how
    many compactions came before it (the context version they made; pins move that one too).
    """

    kind: SampleKind
    at: str
    in_context: int
    window: int | None
    reserved: int = 0
    system: int = 0
    tools: int = 0
    pinned: int = 0
    summary: int = 0
    messages: int = 0
    tool_outputs: int = 0
    turn: int = 0
    version: int = 0

    def part(self, name: str) -> int:
        """One part by its name in PARTS."""
        value: int = getattr(self, name)
        return value

    @property
    def parts(self) -> dict[str, int]:
        return {name: self.part(name) for name in PARTS}

    @property
    def total(self) -> int:
        """Tokens in context: the sum of the parts."""
        return sum(self.part(name) for name in PARTS)

    @property
    def reserved_shown(self) -> int:
        """The reserve that fits under the window beside the context (0 without a window)."""
        if self.window is None:
            return 0
        return max(0, min(self.reserved, self.window - self.total))

    @property
    def free(self) -> int:
        """Room left in the window after the context and the reserve (0 without a window)."""
        if self.window is None:
            return 0
        return max(0, self.window - self.total - self.reserved_shown)

    def as_dict(self) -> dict[str, Any]:
        """The sample as plain data: its parts, their total, the reserve and the free room."""
        return {
            "turn": self.turn,
            "kind": self.kind,
            "at": self.at,
            "version": self.version,
            "in_context": self.in_context,
            "window": self.window,
            "parts": self.parts,
            "total": self.total,
            "reserved": self.reserved_shown,
            "free": self.free,
        }


def check_sample(conversation_id: str, sample: Sample) -> None:
    """Refuse a sample no chart could draw: an unknown kind, a negative count or window."""
    where = f"sample for conversation {conversation_id!r}"
    if sample.kind not in SAMPLE_KINDS:
        raise StoreError(f"{where}: kind must be one of {SAMPLE_KINDS}, got {sample.kind!r}")
    counts = {name: sample.part(name) for name in PARTS}
    counts |= {"in_context": sample.in_context, "reserved": sample.reserved}
    for name, value in counts.items():
        if not isinstance(value, int) or value < 0:
            raise StoreError(f"{where}: {name} must be a whole number >= 0, got {value!r}")
    if sample.window is not None and (not isinstance(sample.window, int) or sample.window < 1):
        raise StoreError(f"{where}: window must be positive or None, got {sample.window!r}")


def numbered(sample: Sample, turn: int, version: int) -> Sample:
    """The sample with the store's turn and version."""
    return replace(sample, turn=turn, version=version)


def grown(previous: Sample, added: Sample) -> Sample:
    """`added` (an append's new messages) on top of the last sample: the message parts and the
    count add up, while system prompt, tools, window and reserve are taken as `added` has them."""
    return replace(
        added,
        in_context=previous.in_context + added.in_context,
        pinned=previous.pinned + added.pinned,
        summary=previous.summary + added.summary,
        messages=previous.messages + added.messages,
        tool_outputs=previous.tool_outputs + added.tool_outputs,
    )
