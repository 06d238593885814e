"""The strategies `precis eval` compares: settings, a mode, or no compaction at all."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from precis.core.errors import InvalidInput
from precis.core.types import CompactionMode
from precis.engine.settings import CompactionSettings


@dataclass(frozen=True, slots=True)
class Strategy:
    """One way to keep a conversation in its window: settings, a mode, or no compaction at all.

    `mode=None` lets the engine choose (sliding window, falling back to all-mode, then
    truncation); `compacts=False` only changes the view (observation masking) and never compacts.
    """

    name: str
    description: str
    configure: Callable[[CompactionSettings], CompactionSettings]
    mode: CompactionMode | None = None
    compacts: bool = True


def _letta(s: CompactionSettings) -> CompactionSettings:
    return replace(
        s,
        summary_style="letta",
        reserved_tokens=0,
        reserve_floor=False,
        guard=False,
        low_watermark=None,
    )


def _letta_guard(s: CompactionSettings) -> CompactionSettings:
    return replace(_letta(s), guard=True)


def _brief(s: CompactionSettings) -> CompactionSettings:
    return replace(s, summary_style="brief", guard=False)


def _brief_guard(s: CompactionSettings) -> CompactionSettings:
    return replace(s, summary_style="brief", guard=True)


def _all(s: CompactionSettings) -> CompactionSettings:
    return replace(s, summary_style="letta", guard=False)


def _masking(s: CompactionSettings) -> CompactionSettings:
    return replace(s, mask_after_turns=2, guard=False)


def _truncation(s: CompactionSettings) -> CompactionSettings:
    return replace(s, guard=False)


STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {
        s.name: s
        for s in (
            Strategy(
                "letta",
                "letta's policy: its sliding window and planner, letta-style summary",
                _letta,
            ),
            Strategy("all", "summarize everything but pinned items (all-mode)", _all, "all"),
            Strategy("extractive", "down to the low watermark, extractive task brief", _brief),
            Strategy("extractive+guard", "extractive brief with the fact guard", _brief_guard),
            Strategy("letta+guard", "letta's sliding window with the fact guard", _letta_guard),
            Strategy(
                "masking",
                "observation masking only (2 turns), no compaction",
                _masking,
                compacts=False,
            ),
            Strategy("truncation", "drop the oldest messages, no summary", _truncation, "truncate"),
        )
    }
)
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)


def strategy(name: str) -> Strategy:
    """The strategy of that name, or an InvalidInput listing the known ones (for the CLI)."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise InvalidInput(
            f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}"
        ) from None
