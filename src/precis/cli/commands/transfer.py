"""Moving a conversation in and out as OpenAI-format JSONL: `import` and `export`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from precis.cli.config import session_for
from precis.cli.errors import CliFailure
from precis.core.errors import StoreError


def import_command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="OpenAI-format JSONL, one message per line.")],
) -> None:
    """Append the messages of a JSONL file, all or none."""
    from precis.stores import import_jsonl

    with session_for(ctx.obj) as session:
        try:
            with file.open(encoding="utf-8") as lines:
                count = import_jsonl(session.store, session.conversation_id, lines)
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

    with session_for(ctx.obj) as session:
        export_jsonl(session.store, session.conversation_id, sys.stdout, context_only=context_only)
