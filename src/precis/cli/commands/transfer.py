"""Moving a conversation in and out as OpenAI-format JSONL: `import` and `export`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from precis.cli.config import session_for
from precis.cli.errors import CliFailure
from precis.core.errors import InvalidMessage, StoreError


def import_command(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="OpenAI-format JSONL, one message per line; - reads stdin.")
    ],
) -> None:
    """Append the messages of a JSONL file, all or none (the first user message is the task)."""
    from precis.stores.jsonl import parse_jsonl

    with session_for(ctx.obj) as session:
        try:
            if str(file) == "-":
                messages = parse_jsonl(sys.stdin)
            else:
                with file.open(encoding="utf-8") as lines:
                    messages = parse_jsonl(lines)
            # Through the session: the same task pinning and tool-call rules as any append.
            count = len(session.append(*messages)) if messages else 0
        except InvalidMessage as exc:
            raise CliFailure(f"{file}: {exc}; nothing was imported") from None
        except UnicodeDecodeError as exc:
            raise CliFailure(f"{file}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise CliFailure(f"cannot read {file}: {exc.strerror or exc}") from None
        except StoreError as exc:  # a bad line (ImportLineError) or a failed append
            raise CliFailure(f"{file}: {exc}; nothing was imported") from None
        print(f"imported {count} messages into {session.conversation_id!r}")


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
