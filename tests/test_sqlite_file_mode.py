"""A SQLite database holds every conversation verbatim: a new one is readable by its owner only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from run_cli import run_precis

from precis.session import Session
from precis.stores.sqlite import SQLiteStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_sqlite_database_and_its_wal_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "home" / "precis.db"
    old = os.umask(0o022)  # the usual umask, which gave 0644 before
    try:
        store = SQLiteStore(path)
    finally:
        os.umask(old)
    try:
        Session(store, "c").append({"role": "user", "content": "the deploy key is in vault"})
        files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert all(f.exists() for f in files)  # WAL keeps both beside the open database
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
    finally:
        store.close()


def test_the_cli_creates_a_private_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run_precis(home, "chat", "-p", "the deploy key is in vault")
    assert mode(home / "precis.db") == 0o600


def test_an_existing_sqlite_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    SQLiteStore(path).close()
    path.chmod(0o640)  # the owner's own choice, e.g. a group that reads it
    SQLiteStore(path).close()
    assert mode(path) == 0o640
