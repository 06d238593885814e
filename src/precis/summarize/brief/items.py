"""One candidate line of a brief, before the budget decides whether and how it is shown."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Item:
    text: str
    order: int
    keep: tuple[str, ...] = ()
    shrink: bool = True
    shown: str | None = None
    # Shorter whole forms to fall back on, longest first, instead of cutting the text.
    variants: tuple[str, ...] = ()
    # Filled only once every section had its share (the system prompt's rules).
    late: bool = False
    # Filled within its section's share, then only with the late items (a finished item's specs).
    modest: bool = False
    # The guard's rank of the fact this item carries verbatim (lower is more vital), if any:
    # such items are filled first, as the guard would append them anyway.
    must: int | None = None


def display_path(path: str, root: str) -> str:
    return path[len(root) :] if root and path.startswith(root) and len(path) > len(root) else path
