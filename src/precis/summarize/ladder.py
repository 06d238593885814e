"""The overflow ladder: retry the summarizer on ever shorter transcripts while the model says
the request is too big."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from precis.core.errors import SummarizerError
from precis.core.messages import Message
from precis.providers.overflow import is_context_overflow
from precis.summarize.packaging import NO_MESSAGES_SUMMARY
from precis.summarize.transcript import (
    DEFAULT_TOOL_RESULT_CHARS,
    middle_truncate,
    render_transcript,
)

LADDER_STEPS: tuple[int, ...] = (120000, 90000, 60000, 40000, 25000, 15000, 10000, 6000, 4000, 2000)

SummaryCall = Callable[[str, str], Awaitable[str]]


def _usable_answer(answer: object) -> str:
    if not isinstance(answer, str) or not answer.strip():
        raise SummarizerError("the summarizer returned an empty answer")
    return answer


async def summarize_with_ladder(
    call: SummaryCall,
    messages: Sequence[Message],
    *,
    prompt: str,
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
) -> str:
    """Ask for a summary, shrinking the transcript step by step while the model says it is too big.

    Returns the model's answer unchanged (the caller clips it); raises SummarizerError on a blank
    answer, any non-overflow error at once, and the last overflow error when every step overflowed.
    """
    if not messages:
        return NO_MESSAGES_SUMMARY
    full = render_transcript(messages, tool_result_chars=tool_result_chars)
    attempts = [full, *(middle_truncate(full, max_chars) for max_chars in LADDER_STEPS)]
    previous: str | None = None
    last_overflow: BaseException | None = None
    for transcript in attempts:
        if transcript == previous:
            continue
        previous = transcript
        try:
            answer = await call(prompt, transcript)
        except Exception as error:
            if not is_context_overflow(error):
                raise
            last_overflow = error
        else:
            return _usable_answer(answer)
    assert last_overflow is not None
    raise last_overflow
