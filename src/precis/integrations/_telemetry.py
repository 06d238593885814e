"""One OpenTelemetry span per compaction, made in one place for every framework (`Mirror`).

The span follows the GenAI semantic conventions where they fit (`gen_ai.operation.name`,
`gen_ai.conversation.id`, `gen_ai.request.model` for the summarizer) and carries precis's own
figures under `precis.compaction.*`. It is a child of whatever span is current when the
compaction runs (the framework's model call or agent run), and is only made when
`opentelemetry-api` is installed (`pip install 'precis-context[otel]'`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from precis.core.messages import Message
from precis.engine.results import CompactionStats

try:  # an optional extra: without it no span is made
    from opentelemetry import trace
except ImportError:  # pragma: no cover - the dev extra installs it
    trace = None  # type: ignore[assignment]

SPAN_NAME = "precis.compaction"
OPERATION = "compaction"
TRACER = "precis"


@dataclass(frozen=True, slots=True)
class Compaction:
    """One compaction an integration ran: what the frameworks are told, in their own terms.

    `summary` is the summary (or truncation marker) the compaction wrote; `facts_kept` how many
    of the conversation's hard constraints the compaction checked were kept verbatim;
    `started_ns`/`ended_ns` when it ran (`time.time_ns`)."""

    conversation_id: str
    stats: CompactionStats
    summary: Message | None
    facts_kept: int
    started_ns: int
    ended_ns: int

    @property
    def summarizer(self) -> str | None:
        """The summarizer that wrote the summary (None for a truncation marker)."""
        name = self.summary.metadata.get("summarizer") if self.summary is not None else None
        return name if isinstance(name, str) else None

    def attributes(self) -> dict[str, Any]:
        """The span's attributes: GenAI conventions, then precis's own figures."""
        s = self.stats
        out: dict[str, Any] = {
            "gen_ai.operation.name": OPERATION,
            "gen_ai.conversation.id": self.conversation_id,
            "precis.compaction.trigger": s.trigger,
            "precis.compaction.mode": s.mode,
            "precis.compaction.tokens_before": s.context_tokens_before,
            "precis.compaction.tokens_after": s.context_tokens_after,
            "precis.compaction.messages_before": s.messages_count_before,
            "precis.compaction.messages_after": s.messages_count_after,
            "precis.compaction.summarized": s.summarized,
            "precis.compaction.facts_kept": self.facts_kept,
            "precis.compaction.fallback": s.fallback or "none",
        }
        if self.summarizer is not None:
            out["gen_ai.request.model"] = self.summarizer
        if s.context_window is not None:
            out["precis.compaction.context_window"] = s.context_window
        if s.fallback_reason:
            out["precis.compaction.fallback_reason"] = s.fallback_reason
        if self.summary is not None:
            out["precis.compaction.summary_id"] = self.summary.id
        return out

    def as_dict(self) -> dict[str, Any]:
        """The compaction as plain JSON data (a LangChain custom event's payload, say)."""
        return {
            "conversation_id": self.conversation_id,
            **self.stats.as_dict(),
            "facts_kept": self.facts_kept,
            "summary_id": self.summary.id if self.summary is not None else None,
            "summary": self.summary.content if self.summary is not None else None,
        }


def facts_kept(summary: Message | None) -> int:
    """How many hard constraints the compaction's audit says it kept verbatim."""
    audit = summary.metadata.get("audit") if summary is not None else None
    verification = audit.get("verification") if isinstance(audit, dict) else None
    kept = verification.get("verbatim_kept") if isinstance(verification, dict) else None
    return len(kept) if isinstance(kept, list) else 0


def emit_span(compaction: Compaction, tracer_provider: Any = None) -> None:
    """Record the compaction as a span under the current one (no-op without OpenTelemetry)."""
    if trace is None:
        return
    tracer = trace.get_tracer(TRACER, tracer_provider=tracer_provider)
    span = tracer.start_span(
        SPAN_NAME,
        kind=trace.SpanKind.INTERNAL,
        attributes=compaction.attributes(),
        start_time=compaction.started_ns,
    )
    span.end(end_time=compaction.ended_ns)
