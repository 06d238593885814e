"""The overflow ladder: retry the summarizer on ever shorter transcripts while the model says
the request is too big."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from precis.core.errors import SummarizerError
from precis.core.messages import Message
from precis.core.steps import Steps, run_steps
from precis.providers.overflow import is_context_overflow
from precis.summarize.packaging import NO_MESSAGES_SUMMARY
from precis.summarize.transcript import (
    DEFAULT_TOOL_RESULT_CHARS,
    middle_truncate,
    render_transcript,
)

LADDER_STEPS: tuple[int, ...] = (120000, 90000, 60000, 40000, 25000, 15000, 10000, 6000, 4000, 2000)

# One question to the model: (system prompt, transcript) -> the answer text.
Ask = tuple[str, str]
SummaryCall = Callable[[str, str], str]


def usable_answer(answer: object) -> str:
    """The answer, or SummarizerError when it is blank (a blank summary is a failure)."""
    if not isinstance(answer, str) or not answer.strip():
        raise SummarizerError("the summarizer returned an empty answer")
    return answer


def ladder_steps(
    messages: Sequence[Message],
    *,
    prompt: str,
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
) -> Steps[Ask, str]:
    """Ask for a summary, shrinking the transcript step by step while the model says it is too big.

    Yields each question and is sent the answer (or thrown the model's error). Returns the answer
    unchanged (the caller clips it); raises SummarizerError on a blank answer, any non-overflow
    error at once, and the last overflow error when every step overflowed.
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
            answer = yield (prompt, transcript)
        except Exception as error:
            if not is_context_overflow(error):
                raise
            last_overflow = error
        else:
            return usable_answer(answer)
    assert last_overflow is not None
    raise last_overflow


def summarize_with_ladder(
    call: SummaryCall,
    messages: Sequence[Message],
    *,
    prompt: str,
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
) -> str:
    """`ladder_steps` answered by `call(prompt, transcript)`."""
    steps = ladder_steps(messages, prompt=prompt, tool_result_chars=tool_result_chars)
    return run_steps(steps, lambda ask: call(*ask))
