"""Fixtures shared by the test modules: the PostgreSQL server and throwaway schemas on it."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from precis.stores.base import ConversationStore

# Property tests: a modest run in `make test`, the thorough one in `make test-properties` (CI).
settings.register_profile("fast", max_examples=150, deadline=None)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("fast")  # --hypothesis-profile=thorough overrides it

# The PostgreSQL the suite runs on when PRECIS_DATABASE_URL is unset.
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The server to test on; skipped (loudly) only when no URL is set and none answers."""
    url = os.environ.get("PRECIS_DATABASE_URL")
    try:
        import psycopg
    except ImportError as exc:
        if url:
            pytest.fail(f"PRECIS_DATABASE_URL is set but psycopg is missing: {exc}")
        pytest.skip(f"POSTGRESQL TESTS SKIPPED: psycopg is not installed ({exc})")
    try:
        psycopg.connect(url or DEFAULT_DATABASE_URL, connect_timeout=5).close()
    except psycopg.Error as exc:
        if url:
            pytest.fail(f"PRECIS_DATABASE_URL is set but its server does not answer: {exc}")
        pytest.skip(
            "POSTGRESQL TESTS SKIPPED: PRECIS_DATABASE_URL is unset and no server answers at "
            f"{DEFAULT_DATABASE_URL} ({exc}); set PRECIS_DATABASE_URL to run them"
        )
    return url or DEFAULT_DATABASE_URL


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A throwaway schema per test, dropped with everything in it afterwards."""
    import psycopg
    from psycopg import sql

    name = f"precis_test_{secrets.token_hex(6)}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _backend(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> ConversationStore:
    """A fresh store of one kind: memory, a SQLite file, or a throwaway PostgreSQL schema."""
    if kind == "memory":
        from precis.stores.memory import MemoryStore

        return MemoryStore()
    if kind == "postgres":
        from precis.stores.postgres import PostgresStore

        url = request.getfixturevalue("postgres_url")
        return PostgresStore(url, schema=request.getfixturevalue("pg_schema"), max_size=2)
    from precis.stores.sqlite import SQLiteStore

    return SQLiteStore(tmp_path / "precis.db")


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    """A real SQL store of each kind: a SQLite file, and a throwaway PostgreSQL schema."""
    backend = _backend(request, tmp_path, request.param)
    yield backend
    backend.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    """Every backend, the memory store beside the SQL ones, for rules all three must share."""
    backend = _backend(request, tmp_path, request.param)
    yield backend
    backend.close()
