"""The layout keeps its promises: no import cycle between the packages, no module too long."""

from __future__ import annotations

from pathlib import Path

import grimp

import precis

# The project's limit: a module longer than this does more than one job.
MAX_MODULE_LINES = 600


def test_no_import_cycle_between_the_packages() -> None:
    graph = grimp.build_graph("precis")
    packages = sorted(m for m in graph.modules if m.count(".") == 1 and graph.find_children(m))
    for package in packages:
        graph.squash_module(package)
    cycles = [
        (a, b)
        for a in packages
        for b in packages
        if a < b
        and graph.direct_import_exists(importer=a, imported=b)
        and graph.find_shortest_chain(importer=b, imported=a) is not None
    ]
    assert cycles == []


def test_no_module_in_src_is_over_600_lines() -> None:
    root = Path(precis.__file__).parent
    modules = sorted(root.rglob("*.py"))
    assert len(modules) > 50  # the package itself, not an empty folder
    long = {
        str(path.relative_to(root)): lines
        for path in modules
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
