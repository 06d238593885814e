"""`precis keys add TENANT`: a new API key for a tenant, shown once, kept only as its digest."""

from __future__ import annotations

from typing import Annotated

import typer

from precis.cli.config import KEYS_FILE, CliConfig
from precis.server.keys import check_tenant, digest, new_key


def add_key(
    ctx: typer.Context,
    tenant: Annotated[str, typer.Argument(help="Who the key is for; sees only its own data.")],
) -> None:
    """Make an API key for a tenant; `precis serve` accepts it from then on."""
    config: CliConfig = ctx.obj
    check_tenant(tenant, "tenant")
    key = new_key()
    config.home.mkdir(parents=True, exist_ok=True)
    path = config.home / KEYS_FILE
    with path.open("a", encoding="utf-8") as keys:
        keys.write(f"{tenant} sha256:{digest(key)}\n")
    path.chmod(0o600)
    print(key)
    typer.echo(f"added a key for {tenant!r} to {path}; it is shown only this once", err=True)
