"""`precis inspect`: the service on loopback with its inspector, and the URL to open."""

from __future__ import annotations

import errno
import socket
from typing import Annotated
from urllib.parse import quote

import typer

from precis.cli.commands.serve import service_app, service_keys
from precis.cli.config import CliConfig
from precis.cli.errors import CliFailure
from precis.server.app import uvicorn_log_config

# The inspector's default port, next to `precis serve`'s 8321 so both can run.
DEFAULT_PORT = 8322


def inspect_command(
    ctx: typer.Context,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")
    ] = DEFAULT_PORT,
    store: Annotated[
        str | None, typer.Option(help="Store URL (default: the global --store / PRECIS_STORE).")
    ] = None,
) -> None:
    """Open the inspector: serve on 127.0.0.1 and print the URL of the conversation's page."""
    config: CliConfig = ctx.obj
    keys = service_keys(config.home)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(128)  # from now on a request waits for the server instead of being refused
    except OSError as exc:
        sock.close()
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc.strerror})"
        raise CliFailure(f"port {port} on 127.0.0.1 {why}; pick another with --port") from None
    import uvicorn

    try:
        with service_app(config, store, keys) as (app, opened):
            bound = sock.getsockname()[1]
            page = "/ui/"
            if opened.exists(config.conversation):
                page = f"/ui/c/{quote(config.conversation, safe='')}"
            print(f"precis inspector: http://127.0.0.1:{bound}{page}", flush=True)
            if keys:
                print("the page asks for an API key once (see `precis keys add`)", flush=True)
            server = uvicorn.Server(
                uvicorn.Config(app, log_level="warning", log_config=uvicorn_log_config())
            )
            server.run(sockets=[sock])
    finally:
        sock.close()
