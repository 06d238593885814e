"""`precis serve`: the HTTP service over the configured store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from precis.cli.config import (
    ENV_API_KEY,
    ENV_API_KEYS,
    KEYS_FILE,
    CliConfig,
    config_settings,
    make_summarizer,
)
from precis.cli.errors import CliUsageError
from precis.server.app import uvicorn_log_config
from precis.server.keys import ApiKeys

if TYPE_CHECKING:
    from fastapi import FastAPI

    from precis.stores.base import ConversationStore


# How much of a SQLite file a worker reads through a memory map: the mapped pages it touched
# count in its resident set, so a full map (the library's 2 GiB) grows the worker with the
# database; beyond this the file is read through SQLite's own cache, which is bounded.
SERVICE_MMAP_BYTES = 32 * 1024 * 1024


def _is_loopback(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, not an address
        return False


def service_keys(home: Path) -> ApiKeys:
    """Every key the service accepts: PRECIS_API_KEY, PRECIS_API_KEYS and the home's keys file."""
    keys = ApiKeys({})
    if single := os.environ.get(ENV_API_KEY):
        keys = keys.merged(ApiKeys.single(single, ENV_API_KEY))
    if pairs := os.environ.get(ENV_API_KEYS):
        keys = keys.merged(ApiKeys.from_pairs(pairs, ENV_API_KEYS))
    path = home / KEYS_FILE
    if path.exists():
        keys = keys.merged(ApiKeys.from_file(path))
    return keys


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8321,
    store: Annotated[
        str | None, typer.Option(help="Store URL (default: the global --store / PRECIS_STORE).")
    ] = None,
) -> None:
    """Run the HTTP service (the inspector at /ui); a non-loopback address needs an API key."""
    config: CliConfig = ctx.obj
    keys = service_keys(config.home)
    if not keys and not _is_loopback(host):
        raise CliUsageError(
            f"refusing to listen on {host} without an API key; "
            f"set {ENV_API_KEY} or {ENV_API_KEYS}, or add one with `precis keys add` "
            "(or listen on 127.0.0.1)"
        )
    import uvicorn

    with service_app(config, store, keys) as (service, _):
        settle_gc()
        uvicorn.run(
            service, host=host, port=port, log_level="info", log_config=uvicorn_log_config()
        )


def settle_gc() -> None:
    """What a worker loaded to start (modules, the app, its schemas) is frozen out of the
    collector's sight, so a full collection walks only what requests made. The thresholds stay
    Python's: with the youngest generation collected every 10,000 allocations instead of 700, a
    worker grew by about 78 MiB per 100 conversations under `bench/service_memory.py` (331 MiB
    after 300, against 152 MiB), for 2 % of its CPU saved."""
    import gc

    gc.collect()
    gc.freeze()


@contextmanager
def service_app(
    config: CliConfig, store: str | None, keys: ApiKeys
) -> Iterator[tuple[FastAPI, ConversationStore]]:
    """The service over the configured store (closed afterwards), as `precis serve` runs it."""
    from precis.server import create_app
    from precis.stores import open_store

    url = store if store is not None else config.store_url
    settings = config_settings(config).settings
    if url is None:
        config.home.mkdir(parents=True, exist_ok=True)
    opened = open_store(url, home=config.home, read_only_ok=True, mmap_bytes=SERVICE_MMAP_BYTES)
    try:
        yield (
            create_app(
                opened,
                settings=settings,
                api_keys=keys,
                summarizer_factory=lambda: make_summarizer(config),
            ),
            opened,
        )
    finally:
        opened.close()
