"""`precis config`: every effective compaction setting and where it came from; `precis trust`:
let a project's hooks run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from precis.cli.config import config_settings
from precis.cli.errors import CliFailure
from precis.cli.loading import SETTINGS_FILE, trust
from precis.cli.render import print_settings


def config_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Show each effective compaction setting, its value and where it came from."""
    print_settings(config_settings(ctx.obj), as_json)


def trust_command(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="The project's settings file, as it is now.")] = Path(
        SETTINGS_FILE
    ),
) -> None:
    """Let the hooks in a project's precis.toml run (until the file changes)."""
    if not path.is_file():
        raise CliFailure(f"{path}: no such file")
    line = trust(path, ctx.obj.home)
    print(f"trusted {line}")
