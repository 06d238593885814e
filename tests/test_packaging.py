"""A clone builds a wheel named as the index knows it, that `twine check` passes, and the README
and the integrations tell users the install command that works."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "precis-context"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _wheel(tmp_path: Path) -> Path:
    """Build the wheel offline from a copy of the clone (nothing is written into the work tree)."""
    tree = tmp_path / "clone"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    out = tmp_path / "dist"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*command, "--no-index", "-w", str(out), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [wheel] = out.glob("*.whl")
    return wheel


def test_the_wheel_is_precis_context_and_passes_twine_check(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    assert wheel.name.startswith("precis_context-")
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "PASSED" in checked.stdout
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode("utf-8"))
    assert metadata["Name"] == DISTRIBUTION
    assert metadata["Description-Content-Type"] == "text/markdown"
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"agents", "pydantic-ai", "langchain", "otel"} <= extras
    # The import name stays `precis`, with its typing marker and the inspector's files.
    assert "precis/__init__.py" in names and "precis/py.typed" in names
    assert any(n.startswith("precis/server/ui/templates/") for n in names)
    assert "precis = precis.cli:main" in archive_entry_points(wheel)


def archive_entry_points(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        return archive.read(name).decode("utf-8")


def test_every_install_command_names_the_distribution_and_a_real_extra() -> None:
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    assert PYPROJECT["project"]["name"] == DISTRIBUTION
    texts = [ROOT / "README.md", *sorted((ROOT / "src" / "precis").rglob("*.py"))]
    texts += sorted((ROOT / "examples").glob("*.py"))
    found = 0
    for path in texts:
        text = path.read_text(encoding="utf-8")
        for command in re.findall(r"pip install '([^']+)'", text):
            found += 1
            name, _, extra = command.partition("[")
            assert name == DISTRIBUTION, f"{path.name}: pip install {command!r}"
            assert extra.rstrip("]") in extras, f"{path.name}: no extra {extra!r}"
        assert "pip install precis\n" not in text and "'precis[" not in text, path.name
    assert found >= 5
