"""`precis config`: every effective compaction setting and where its value came from."""

from __future__ import annotations

from typing import Annotated

import typer

from precis.cli.config import config_settings
from precis.cli.render import print_settings


def config_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Show each effective compaction setting, its value and where it came from."""
    print_settings(config_settings(ctx.obj), as_json)
