"""The `precis` command: a thin face over the library."""

from precis.cli.app import app, main

__all__ = ["app", "main"]
