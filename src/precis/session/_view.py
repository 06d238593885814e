"""What the model sees of a session's messages: each shown on its own, each turn fitted to its
room, the last view remembered so the next one shows only what is new (`BaseSession` is one)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import is_
from typing import NamedTuple

from precis.core.memo import Memo
from precis.core.messages import Message
from precis.core.tokens import TokenCounter
from precis.engine.masking import masked_view
from precis.engine.settings import CompactionSettings
from precis.engine.views import display_message, fit_message, fit_turns, mask_observations

# Characters per token when sizing a view to the window (generous for English, safe for code).
CHARS_PER_TOKEN = 4
# The least a turn is given in a view, however full the window is of fixed things.
MIN_TURN_TOKENS = 64


class _View(NamedTuple):
    """The last view a session made (see `BaseSession.view_of`): by what (settings, counter),
    for which floor, of which messages; each shown on its own, the turn budget, and the view."""

    made_by: tuple[object, object]
    floor_tokens: int
    messages: list[Message]
    displayed: list[Message]
    budget: int | None
    shown: list[Message]


# `_display`'s limits worked out of one settings: it, fits, for tools, head, tail, short.
_Limits = tuple[CompactionSettings, int | None, int | None, int, int, int]


class Views:
    """The pure half of a session: how its messages are viewed, with the last view kept."""

    settings: CompactionSettings
    counter: TokenCounter
    memo: Memo
    _last_view: _View | None
    # What `_display` works out of the settings, with the settings it was worked out of.
    _display_limits: _Limits | None

    def view_of(self, messages: list[Message], floor_tokens: int = 0) -> list[Message]:
        """What the model sees of these messages: long tool outputs head+tail, old ones masked,
        any message too big for half the window head+tail too, and any turn too big for its
        room (`turn_budget`) cut to fit it (the originals stay stored).

        A compaction views the context the check just viewed: the same messages (the same
        objects) give the same view, so the last one is handed out again; a check views the
        context the last view showed with a few messages after it, which are all it shows anew;
        and the context a compaction left ends in the messages it kept, already shown.
        """
        made_by = (self.settings, self.counter)
        last = self._last_view
        if last is not None and last.made_by == made_by and last.floor_tokens == floor_tokens:
            seen, displayed, budget, shown = last.messages, last.displayed, last.budget, last.shown
            k = len(seen)
            if len(messages) == k and all(map(is_, seen, messages)):
                return list(shown)
            if self.settings.mask_after_turns is None:
                # A turn starts at every message but a tool result, and each turn is fitted on
                # its own: the turns the two views share are shown as they were.
                if len(messages) > k and all(map(is_, seen, messages)):  # (zip stops at k)
                    # The last view and messages after it: show only those, and fit again
                    # only the turn the old messages end in.
                    added = self._display(messages[k:])
                    displayed = displayed + added
                    # The budget counts the pinned: unchanged unless a pinned one was added.
                    if not any(m.pinned for m in added) or (
                        self.turn_budget(displayed, floor_tokens) == budget
                    ):
                        t = next(
                            (i for i in range(k - 1, -1, -1) if displayed[i].role != "tool"), 0
                        )
                        shown = shown[:t] + self._fit(displayed[t:], budget)
                        self._last_view = _View(
                            made_by, floor_tokens, list(messages), displayed, budget, shown
                        )
                        return list(shown)
                else:
                    # New messages before the last view's tail (a summary before what it kept):
                    # show those, and the tail from its first whole turn as it was shown.
                    same = list(map(is_, reversed(messages), reversed(seen)))
                    j = same.index(False) if False in same else len(same)
                    while j and messages[-j].role == "tool":
                        j -= 1
                    if j:
                        head = self._display(messages[:-j])
                        displayed = head + displayed[-j:]
                        if self.turn_budget(displayed, floor_tokens) == budget:
                            shown = self._fit(head, budget) + shown[-j:]
                            self._last_view = _View(
                                made_by, floor_tokens, list(messages), displayed, budget, shown
                            )
                            return list(shown)
        displayed, budget, shown = self._viewed(messages, floor_tokens)
        self._last_view = _View(made_by, floor_tokens, list(messages), displayed, budget, shown)
        return list(shown)

    def view_alone(self, messages: Sequence[Message], floor_tokens: int = 0) -> list[Message]:
        """`view_of` that does not remember the view: a batch just appended, viewed on its own,
        would push out the whole context's view, which the next check only extends."""
        return self._viewed(messages, floor_tokens)[2]

    def _viewed(
        self, messages: Sequence[Message], floor_tokens: int
    ) -> tuple[list[Message], int | None, list[Message]]:
        """The view from scratch: each message as displayed, the turn budget, what is shown."""
        displayed = self._display(messages)
        if self.settings.mask_after_turns is not None:
            displayed = mask_observations(displayed, keep_last_turns=self.settings.mask_after_turns)
        budget = self.turn_budget(displayed, floor_tokens)
        return displayed, budget, self._fit(displayed, budget)

    def _display(self, messages: Sequence[Message]) -> list[Message]:
        """Each message as shown: outputs before a mask marker stubbed, long ones head+tail."""
        s = self.settings
        limits = self._display_limits
        if limits is None or limits[0] is not s:
            fits = s.context_window * CHARS_PER_TOKEN // 2 if s.context_window else None
            tools = s.tool_output_max_chars
            for_tools = (
                min(tools, fits) if tools is not None and fits is not None else tools or fits
            )
            head, tail = s.tool_output_head_lines, s.tool_output_tail_lines
            # Most messages are short enough to be shown as they are: skip the display calls.
            short = -1 if head < 0 or tail < 0 else min(x for x in (for_tools, fits, 1 << 62) if x)
            limits = self._display_limits = (s, fits, for_tools, head, tail, short)
        _, fits, for_tools, head, tail, short = limits
        memo = self.memo

        def shown(m: Message) -> Message:
            m = display_message(m, max_chars=for_tools, head_lines=head, tail_lines=tail, memo=memo)
            return fit_message(m, max_chars=fits, head_lines=head, tail_lines=tail, memo=memo)

        return [m if len(m.content) <= short else shown(m) for m in masked_view(messages)]

    def _fit(self, displayed: list[Message], budget: int | None) -> list[Message]:
        """The displayed messages with each turn over `budget` cut to fit it."""
        if budget is None:
            return displayed
        s = self.settings
        return fit_turns(
            displayed,
            budget_tokens=budget,
            count=self.counter.count,
            head_lines=s.tool_output_head_lines,
            tail_lines=s.tool_output_tail_lines,
            memo=self.memo,
        )

    def turn_budget(self, shown: Sequence[Message], floor_tokens: int) -> int | None:
        """The most one unsplittable turn may take: half of what the soft watermark leaves
        beside the system prompt, tools and pinned messages (the other half is the summary's).
        None without a window."""
        threshold = self.settings.threshold
        if threshold is None:
            return None
        pinned = sum(self.counter.count(m) for m in shown if m.pinned)
        return max(MIN_TURN_TOKENS, (threshold - floor_tokens - pinned) // 2)

    def _ordered_view(self, context: list[Message], floor_tokens: int) -> list[Message]:
        shown = self.view_of(context, floor_tokens)
        return [m for m in shown if m.pinned] + [m for m in shown if not m.pinned]
