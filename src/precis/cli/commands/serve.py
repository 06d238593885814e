"""`precis serve`: the HTTP service over the configured store."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from precis.cli.config import ENV_API_KEY, CliConfig, config_settings, make_summarizer
from precis.cli.errors import CliUsageError


def _is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, not an address
        return False


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8321,
    store: Annotated[
        str | None, typer.Option(help="Store URL (default: the global --store / PRECIS_STORE).")
    ] = None,
) -> None:
    """Run the HTTP service; a non-loopback address needs PRECIS_API_KEY."""
    config: CliConfig = ctx.obj
    api_key = os.environ.get(ENV_API_KEY) or None
    if api_key is None and not _is_loopback(host):
        raise CliUsageError(
            f"refusing to listen on {host} without an API key; "
            f"set {ENV_API_KEY} (or listen on 127.0.0.1)"
        )
    import uvicorn

    from precis.server import create_app
    from precis.stores import open_store

    url = store if store is not None else config.store_url
    settings = config_settings(config).settings
    if url is None:
        config.home.mkdir(parents=True, exist_ok=True)
    opened = open_store(url, home=config.home)
    try:
        service = create_app(
            opened,
            settings=settings,
            api_key=api_key,
            summarizer_factory=lambda: make_summarizer(config),
        )
        uvicorn.run(service, host=host, port=port, log_level="info")
    finally:
        opened.close()
