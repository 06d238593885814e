"""Moving a conversation in and out: `import` (OpenAI JSONL, the repo's trajectories, Claude Code
session logs, Anthropic messages) and `export` (OpenAI JSONL)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from precis.cli.config import session_for
from precis.cli.errors import CliFailure, InterruptedAfterWrite
from precis.core.errors import InvalidMessage, StoreError

if TYPE_CHECKING:
    from precis.core.messages import Message
    from precis.session import Session


def import_command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSONL, one message per line; - reads stdin.")],
    form: Annotated[
        str,
        typer.Option(
            "--format",
            help="auto, openai, trajectory, claude-code (a session log) or anthropic; "
            "auto tells them apart.",
        ),
    ] = "auto",
) -> None:
    """Append the messages of a JSONL file, all or none (the first user message is the task)."""
    from precis.stores.formats import FORMATS
    from precis.stores.jsonl import parse_jsonl

    if form not in FORMATS:
        raise CliFailure(f"--format {form!r}: expected one of {', '.join(FORMATS)}")
    chosen = next(f for f in FORMATS if f == form)
    with session_for(ctx.obj) as session:
        try:
            if str(file) == "-":
                messages = parse_jsonl(sys.stdin, chosen)
            else:
                with file.open(encoding="utf-8") as lines:
                    messages = parse_jsonl(lines, chosen)
            # Through the session: the same task pinning and tool-call rules as any append.
            count = _appended(session, messages)
        except InvalidMessage as exc:
            raise CliFailure(f"{file}: {exc}; nothing was imported") from None
        except UnicodeDecodeError as exc:
            raise CliFailure(f"{file}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise CliFailure(f"cannot read {file}: {exc.strerror or exc}") from None
        except StoreError as exc:  # a bad line (ImportLineError) or a failed append
            raise CliFailure(f"{file}: {exc}; nothing was imported") from None
        print(f"imported {count} messages into {session.conversation_id!r}")


def _appended(session: Session, messages: list[Message]) -> int:
    """Append the file's messages in one transaction. A Ctrl-C that comes once it committed (while
    the session notes what the messages hold) says they are stored, so nobody imports them twice."""
    if not messages:
        return 0
    before = session.store.count(session.conversation_id)
    try:
        return len(session.append(*messages))
    except KeyboardInterrupt:
        stored = session.store.count(session.conversation_id) - before
        if stored <= 0:
            raise
        raise InterruptedAfterWrite(
            f"the import had committed: {stored:,} of the file's {len(messages):,} messages are "
            f"in {session.conversation_id!r} (importing the file again would add them twice)"
        ) from None


def export(
    ctx: typer.Context,
    context_only: Annotated[
        bool, typer.Option("--context", help="Only what is in context, not the whole log.")
    ] = False,
) -> None:
    """Print the conversation as OpenAI-format JSONL."""
    from precis.stores import export_jsonl

    with session_for(ctx.obj, read=True) as session:
        export_jsonl(session.store, session.conversation_id, sys.stdout, context_only=context_only)
