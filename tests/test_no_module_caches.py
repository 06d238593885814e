"""No module-level mutable cache in `src/precis`: state that speeds a session lives on the
session (`precis.core.memo`), so no answer made for one session is handed to another and a
service's memory does not grow with the conversations it served.

What may be module-level (ARCHITECTURE.md): constants and compiled patterns. This test reads
every module's syntax tree and fails on a memoizing decorator (`functools.lru_cache`, `cache`),
on a module- or class-level dict, list, set (or other container) that the module mutates, and on
a `global` statement; `ALLOWED` would name an exception, with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "precis"

# "module:name" → why it may stay.
ALLOWED: dict[str, str] = {
    "precis.stores.migrations:MIGRATIONS": (
        "the schema's migrations in order, which `@migration` registers as the module is "
        "imported and nothing adds to after: a constant written as decorators, no cache"
    ),
}

_DECORATORS = frozenset({"lru_cache", "cache", "cached"})
_CONTAINER_CALLS = frozenset(
    {
        "dict",
        "list",
        "set",
        "bytearray",
        "defaultdict",
        "OrderedDict",
        "deque",
        "Counter",
        "WeakKeyDictionary",
        "WeakValueDictionary",
        "WeakSet",
        "ChainMap",
    }
)
_MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "add",
        "clear",
        "discard",
        "extend",
        "extendleft",
        "insert",
        "pop",
        "popitem",
        "popleft",
        "remove",
        "setdefault",
        "update",
        "__setitem__",
        "__delitem__",
    }
)


def _name(node: ast.expr) -> str:
    """The last name of a (dotted) expression, called or not: `functools.lru_cache(…)` →
    `lru_cache`."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    return isinstance(value, ast.Call) and _name(value.func) in _CONTAINER_CALLS


def _containers(body: list[ast.stmt]) -> dict[str, int]:
    """Names bound to a mutable container by the statements of one scope, with their lines."""
    found: dict[str, int] = {}
    for statement in body:
        if isinstance(statement, ast.Assign) and _is_container(statement.value):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign) and _is_container(statement.value):
            targets = [statement.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = statement.lineno
    return found


def _mutated(node: ast.expr) -> str:
    """The name a mutation reaches through: `NAME[…]`, `Class.NAME[…]`, `cls.NAME[…]`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def offences(path: Path, root: Path = SRC) -> list[str]:
    """What in one module of the package at `root` keeps state outside any object:
    `module:name (line): what`."""
    tree = ast.parse(path.read_text(), str(path))
    module = path.relative_to(root.parent).with_suffix("").as_posix().replace("/", ".")
    shared = _containers(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            shared.update(_containers(node.body))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                if _name(decorator) in _DECORATORS:
                    found.append(f"{module}:{node.name} ({node.lineno}): @{_name(decorator)}")
        if isinstance(node, ast.Global):
            found.extend(f"{module}:{n} ({node.lineno}): global" for n in node.names)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            if isinstance(target, ast.Subscript) and _mutated(target.value) in shared:
                name = _mutated(target.value)
                line = target.lineno
                found.append(f"{module}:{name} ({shared[name]}): set or deleted at {line}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
            and _mutated(node.func.value) in shared
        ):
            name = _mutated(node.func.value)
            found.append(f"{module}:{name} ({shared[name]}): .{node.func.attr}() at {node.lineno}")
    return [f for f in found if f.split(" ", 1)[0] not in ALLOWED]


def test_no_module_level_mutable_cache_in_precis() -> None:
    modules = sorted(SRC.rglob("*.py"))
    assert len(modules) > 100
    found = [offence for path in modules for offence in offences(path)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from functools import lru_cache\n@lru_cache(maxsize=8)\ndef f(x): return x\n",
        "import functools\n@functools.cache\ndef f(x): return x\n",
        "_SEEN: dict[str, int] = {}\ndef f(k):\n    _SEEN[k] = 1\n",
        "_SEEN = {}\ndef f(k):\n    _SEEN.setdefault(k, 1)\n",
        "_LIST = []\ndef f(k):\n    _LIST.append(k)\n",
        "class C:\n    _memo = {}\n    def f(self, k):\n        C._memo[k] = 1\n",
        "_N = 0\ndef f():\n    global _N\n    _N += 1\n",
    ],
)
def test_the_check_finds_each_kind_of_cache(source: str, tmp_path: Path) -> None:
    probe = tmp_path / "precis" / "probe.py"
    probe.parent.mkdir()
    probe.write_text(source)
    assert offences(probe, probe.parent) != []


def test_constants_and_patterns_pass(tmp_path: Path) -> None:
    probe = tmp_path / "precis" / "constants.py"
    probe.parent.mkdir()
    probe.write_text(
        "import re\nfrom typing import Final\n"
        "_RE: Final = re.compile('a')\nLABELS = {'a': 1}\nNAMES = frozenset({'x'})\n"
        "def f(k):\n    local = {}\n    local[k] = LABELS[k]\n    return local\n"
    )
    assert offences(probe, probe.parent) == []
