"""The `precis` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["demo"]:
        print("precis demo: coming in the engine")
        return 0
    print("usage: precis demo", file=sys.stderr)
    return 2
