"""The model-backed summarizer: our prompts, the overflow ladder, retries on blank answers."""

from __future__ import annotations

from precis.core.errors import SummarizerError
from precis.core.messages import Message
from precis.core.steps import Steps, arun_steps, run_steps
from precis.facts import span_language
from precis.providers.base import ChatProvider
from precis.summarize.base import SummaryRequest, contains_message, split_previous
from precis.summarize.ladder import Ask, ladder_steps, usable_answer
from precis.summarize.packaging import NO_MESSAGES_SUMMARY
from precis.summarize.prompts import (
    ANCHORED_RULE,
    PHASE_LABEL_EN,
    PHASE_LABEL_ZH,
    PHASE_RULE,
    REGENERATE_RULE,
    TASK_RULE,
    phase_line,
    style_prompt,
)
from precis.summarize.transcript import DEFAULT_TOOL_RESULT_CHARS, render_transcript


class _Plan:
    """What one request sends: the system prompt, the span, and the text put before it."""

    def __init__(self, request: SummaryRequest, default_prompt: str | None) -> None:
        self.language = "en"
        self.messages: tuple[Message, ...] = request.messages
        self.preface = ""
        task = request.task.strip() if request.task and request.task.strip() else None
        phase = request.phase.strip() if request.phase and request.phase.strip() else None
        self.task, self.phase = task, phase
        touched = request.style != "letta" or request.merge != "regenerate"
        if not touched and task is None and phase is None and request.previous_summary is None:
            # Today's behaviour, byte for byte: letta's prompt over letta's transcript.
            self.prompt = (
                request.instructions or default_prompt or style_prompt("letta", request.mode, "en")
            )
            return
        previous, fresh = split_previous(request)
        self.language = span_language(fresh, task, previous)
        custom = request.instructions or default_prompt
        prompt = custom or style_prompt(request.style, request.mode, self.language)
        rules: list[str] = []
        parts: list[str] = []
        if task is not None:
            parts.append(f"Task: {task}")
            rules.append(TASK_RULE)
        anchored = request.merge == "anchored" and previous is not None and custom is None
        if previous is not None and anchored:
            rules.append(ANCHORED_RULE.format(previous=previous))
            self.messages = fresh
        elif previous is not None and request.style == "letta" and not request.previous_summary:
            pass  # letta folds the earlier summary where it sits in the span, as today
        elif (
            previous is not None
            and request.style == "letta"
            and contains_message(request.messages, previous)
        ):
            pass
        elif previous is not None:
            parts.append(f"Previous summary:\n{previous}")
            rules.append(REGENERATE_RULE)
            self.messages = fresh
        if phase is not None:
            label = PHASE_LABEL_ZH if self.language == "zh" else PHASE_LABEL_EN
            rules.append(PHASE_RULE.format(phase=phase, label=label))
        if custom is None and rules:
            prompt = "\n\n".join([prompt, *rules])
        self.prompt = prompt
        if parts:
            self.preface = "\n\n".join(parts) + "\n\nNew messages:\n"

    def chat(self, system: str, transcript: str) -> list[dict[str, str]]:
        """The request: our prompt, then the transcript with the task and the previous summary
        put first (never truncated)."""
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self.preface + transcript},
        ]

    def complete(self, answer: str) -> str:
        """The answer with the task and the phase line added when the model left them out."""
        if self.phase is not None and self.phase not in answer:
            answer = f"{phase_line(self.phase, self.language)}\n\n{answer}"
        if self.task is not None and " ".join(self.task.split()) not in " ".join(answer.split()):
            heading = "任务" if self.language == "zh" else "Task"
            answer = f"## {heading}\n{self.task}\n\n{answer}"
        return answer


class LLMSummarizer:
    """Summarizes with a chat model, which may be a different one than the agent's."""

    def __init__(
        self,
        provider: ChatProvider,
        *,
        prompt: str | None = None,
        tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
        blank_retries: int = 2,
    ) -> None:
        self._provider = provider
        self._prompt = prompt
        self._tool_result_chars = tool_result_chars
        self._blank_retries = blank_retries

    @property
    def name(self) -> str:
        return "llm"

    def summarize(self, request: SummaryRequest) -> str:
        plan = _Plan(request, self._prompt)
        return run_steps(
            self._steps(plan),
            lambda ask: self._provider.complete(plan.chat(*ask), timeout=request.timeout).text,
        )

    async def asummarize(self, request: SummaryRequest) -> str:
        plan = _Plan(request, self._prompt)

        async def ask(question: Ask) -> str:
            reply = await self._provider.acomplete(plan.chat(*question), timeout=request.timeout)
            return reply.text

        return await arun_steps(self._steps(plan), ask)

    def _steps(self, plan: _Plan) -> Steps[Ask, str]:
        """The questions one summary takes: the ladder, retried while answers come back blank."""
        for attempt in range(self._blank_retries + 1):
            try:
                if plan.messages or not plan.preface:
                    answer = yield from ladder_steps(
                        plan.messages, prompt=plan.prompt, tool_result_chars=self._tool_result_chars
                    )
                else:  # nothing new, but a task or an earlier summary to rebuild from
                    answer = usable_answer((yield (plan.prompt, render_transcript(()))))
            except SummarizerError:
                if attempt == self._blank_retries:
                    raise
            else:
                if answer == NO_MESSAGES_SUMMARY and plan.task is None and plan.phase is None:
                    return answer
                return plan.complete(answer)
        raise AssertionError("unreachable")
