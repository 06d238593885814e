"""Looking at and shrinking one conversation: `compact`, `context`, `history`, `events`,
`recall`."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from precis.cli.config import session_for
from precis.cli.errors import CliFailure
from precis.cli.render import print_events, print_messages, print_recall, report_compaction
from precis.core.types import PlanMode

JsonFlag = Annotated[bool, typer.Option("--json", help="Print a JSON array.")]


def compact(
    ctx: typer.Context,
    mode: Annotated[
        PlanMode | None, typer.Option(help="Summarize the oldest span, or all but pinned.")
    ] = None,
    clip_chars: Annotated[int | None, typer.Option(help="Longest summary, in characters.")] = None,
) -> None:
    """Compact now; print one JSON line of stats, then the summary.

    When nothing can make the context smaller nothing is written: a line on stderr says why,
    the stats line says `"compacted": false`, and the exit code is 0.
    """
    with session_for(ctx.obj, clip_chars=clip_chars) as session:
        if not session.context():
            raise CliFailure(
                f"conversation {session.conversation_id!r} has no messages; nothing to compact"
            )
        result = session.compact_result(mode, trigger="manual")
        if result.summary is None:
            print(f"precis: nothing compacted: {result.reason}", file=sys.stderr, flush=True)
            print(json.dumps({**result.stats.as_dict(), "compacted": False}))
            return
        report_compaction(result.stats)
        print(json.dumps(result.stats.as_dict()))
        summary = result.summary.metadata.get("summary")
        print(summary if isinstance(summary, str) else result.summary.content)


def context(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show what is in context now, in the order the model sees it."""
    with session_for(ctx.obj, read=True) as session:
        print_messages(session.view(), session, "context", as_json)


def history(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show every message ever appended, compacted or not."""
    with session_for(ctx.obj, read=True) as session:
        print_messages(session.history(), session, "history", as_json)


def events(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show every compaction: when, why, how much it shrank, and what stood in for a summarizer
    that failed."""
    with session_for(ctx.obj, read=True) as session:
        print_events(session.events(), as_json)


def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to search the whole history for.")],
    limit: Annotated[int, typer.Option(min=1, help="Most hits to show.")] = 10,
) -> None:
    """Search every original message, including those compacted away."""
    with session_for(ctx.obj, read=True) as session:
        print_recall(session, query, limit)
