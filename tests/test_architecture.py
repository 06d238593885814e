"""The layout keeps its promises: no import cycle between the packages."""

from __future__ import annotations

import grimp


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
