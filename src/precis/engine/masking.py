"""The cheap tier of a compaction: old tool outputs masked, no summary written.

A masking compaction commits one marker message (kind `marker`, `MASKED_KEY` in its metadata)
at the start of the kept tail; every unpinned tool result before it is shown as a one-line stub
naming its message id, while the store keeps the original (recall finds it, `read_original`
pages it back in). The rule is positional, so a view needs nothing but the context: a later
masking moves the one marker further on (markers never pile up), and a summary that evicts the
marker evicts everything it masked with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from precis.core.messages import KIND_MARKER, Message
from precis.core.planning import pinned_mask
from precis.core.tokens import TokenCounter
from precis.engine.views import with_content

__all__ = [
    "MASKED_KEY",
    "MASK_MODE",
    "MaskPlan",
    "is_mask_marker",
    "mask_marker",
    "masked_view",
    "plan_masking",
]

# The mode a masking compaction reports (its tier): no summary, tool outputs masked.
MASK_MODE: Final = "mask"
# The marker's metadata key: how many tool outputs before it are masked, in all.
MASKED_KEY = "masked_outputs"


def is_mask_marker(message: Message) -> bool:
    return message.kind == KIND_MARKER and MASKED_KEY in message.metadata


def mask_marker(masked: int) -> Message:
    """The marker put where the kept tail starts; the engine assigns its id and time."""
    return Message(
        role="user",
        kind=KIND_MARKER,
        content=f"[{masked} older tool outputs above are masked: each stub names its message id; "
        "recall, or read_original(id), brings one back whole]",
        metadata={MASKED_KEY: masked},
    )


def _stub(message: Message, tool: str) -> Message | None:
    """The one-line stub of a tool result, or None when the output is no longer than it."""
    # Nothing counted from the text: a view that shows the output head+tail stubs it alike.
    note = f"[output of {tool} masked; read_original({message.id})]"
    if len(note) >= len(message.content):
        return None
    return with_content(message, note, {"masked": True})


def _last_marker(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if is_mask_marker(messages[i]):
            return i
    return -1


def _stubbed(messages: Sequence[Message], end: int) -> list[Message]:
    """messages[:end] with each unpinned tool result shown as its stub."""
    pins = pinned_mask(messages[:end])
    tools: dict[str, str] = {}
    out: list[Message] = []
    for i, message in enumerate(messages[:end]):
        for call in message.tool_calls:
            tools[call.id] = call.name
        stub = None
        if message.role == "tool" and not pins[i] and not message.metadata.get("masked"):
            stub = _stub(message, tools.get(message.tool_call_id or "", "tool"))
        out.append(stub or message)
    return out


def masked_view(messages: Sequence[Message]) -> list[Message]:
    """The messages as the model sees them: tool results before the mask marker as stubs."""
    k = _last_marker(messages)
    if k < 0:
        return list(messages)
    return [*_stubbed(messages, k), *messages[k:]]


@dataclass(frozen=True, slots=True)
class MaskPlan:
    """The context a masking leaves (the marker in place), the marker, and how many it masked."""

    context: tuple[Message, ...]
    marker: Message
    masked: int


def plan_masking(
    messages: Sequence[Message],
    counts: Sequence[int],
    *,
    counter: TokenCounter,
    target_tokens: int,
    floor_tokens: int,
    stored: int,
) -> MaskPlan | None:
    """Mask the fewest oldest tool outputs that bring the context within `target_tokens`.

    `messages` are as the model sees them (those before an earlier marker masked already), the
    first `stored` of them stored. The marker goes before a message that is no tool result, so
    no call is parted from its results, and no later than the newest turn and the stored
    messages. None when masking everything it may does not reach the target.
    """
    n = min(len(messages), stored)
    last = len(messages) - 1
    while last > 0 and messages[last].role == "tool":
        last -= 1  # the newest turn stays as it is
    last = min(last, n)
    old = _last_marker(messages[:n])
    total = sum(counts) + floor_tokens - (counts[old] if old >= 0 else 0)
    pins = pinned_mask(messages)
    tools: dict[str, str] = {}
    for message in messages[: old + 1]:
        for call in message.tool_calls:
            tools[call.id] = call.name
    earlier = messages[old].metadata.get(MASKED_KEY, 0) if old >= 0 else 0
    masked = earlier if isinstance(earlier, int) and not isinstance(earlier, bool) else 0
    saved = 0
    for i in range(old + 1, last + 1):
        previous = messages[i - 1] if i - 1 > old else None
        if previous is not None:
            for call in previous.tool_calls:
                tools[call.id] = call.name
            if previous.role == "tool" and not pins[i - 1] and not previous.metadata.get("masked"):
                stub = _stub(previous, tools.get(previous.tool_call_id or "", "tool"))
                if stub is not None:
                    saved += counts[i - 1] - counter.count(stub)
                    masked += 1
        if messages[i].role == "tool" or saved <= 0:
            continue
        marker = mask_marker(masked)
        if total - saved + counter.count(marker) <= target_tokens:
            head = [m for j, m in enumerate(_stubbed(messages, i)) if j != old]
            return MaskPlan((*head, marker, *messages[i:]), marker, masked - earlier)
    return None
