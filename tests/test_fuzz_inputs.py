"""Random odd messages at the service and at import: a 4xx or exit 1 with one line, never a 5xx or
a traceback, and the conversation reads afterwards."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from run_cli import run_precis

from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.stores.sqlite import SQLiteStore

ODD_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "C")),
    max_size=40,
)
JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | ODD_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ODD_TEXT, inner, max_size=4),
    max_leaves=30,
)


def deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "tool", "system", "wizard", ""]) | JSONISH,
        "content": ODD_TEXT | JSONISH | st.builds(deep, st.integers(60, 400)),
        "tool_calls": JSONISH,
        "tool_call_id": ODD_TEXT | JSONISH,
        "name": JSONISH,
    },
)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(
            SQLiteStore(Path(tmp) / "precis.db"), settings=CompactionSettings(context_window=2000)
        )
        with TestClient(app, raise_server_exceptions=False) as c:
            c.post("/v1/conversations", json={"id": "f"})
            yield c


@pytest.mark.property
@given(messages=st.lists(MESSAGES, min_size=1, max_size=3))
def test_the_service_answers_odd_messages_with_a_4xx_or_stores_them(
    client: TestClient, messages: list[dict[str, Any]]
) -> None:
    body = json.dumps({"messages": messages}, allow_nan=True)
    answer = client.post(
        "/v1/conversations/f/messages", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code in (201, 400, 413, 422), answer.text
    assert len(answer.json()["detail"].splitlines()) == 1 if answer.status_code != 201 else True
    for path in ("/history", "/context", "/prompt"):
        assert client.get("/v1/conversations/f" + path).status_code == 200


@pytest.mark.property
@given(messages=st.lists(MESSAGES, min_size=1, max_size=3))
def test_import_takes_odd_lines_whole_or_not_at_all(messages: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        run_precis(home, "chat", "-p", "hello")
        before = run_precis(home, "history", "--json").stdout
        dump = Path(tmp) / "odd.jsonl"
        dump.write_text("\n".join(json.dumps(m, allow_nan=True) for m in messages) + "\n")
        result = run_precis(home, "import", str(dump), check=False)
        assert result.returncode in (0, 1), result.stderr
        after = run_precis(home, "history", "--json").stdout
        if result.returncode == 1:
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert after == before
        else:
            assert len(json.loads(after)) == len(json.loads(before)) + len(messages)
