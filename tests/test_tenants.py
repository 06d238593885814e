"""Keys bound to tenants: each tenant sees, changes and finds only its own conversations."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from live_server import serving
from run_cli import run_precis

from precis.cli.commands.serve import service_keys
from precis.core.errors import InvalidSetting
from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.server.keys import ApiKeys
from precis.stores.base import ConversationStore

KEY_A = "key-of-team-a-0123456789"
KEY_B = "key-of-team-b-0123456789"
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"Authorization": f"Bearer {KEY_B}"}
TURNS = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: port 5433 " + "x" * 300}
    for i in range(20)
]


@pytest.fixture
def client(sql_store: ConversationStore) -> Iterator[TestClient]:
    keys = ApiKeys.from_pairs(f"team-a={KEY_A},team-b={KEY_B}")
    app = create_app(sql_store, settings=CompactionSettings(context_window=2000), api_keys=keys)
    with TestClient(app) as c:
        yield c


def test_a_tenant_sees_only_its_own_conversations(
    client: TestClient, sql_store: ConversationStore
) -> None:
    assert client.post("/v1/conversations", json={"id": "c1"}, headers=A).status_code == 201
    added = client.post("/v1/conversations/c1/messages", json={"messages": TURNS}, headers=A)
    assert added.status_code == 201
    assert client.post("/v1/conversations/c1/compact", json={}, headers=A).status_code == 200
    base = "/v1/conversations/c1"
    for path in ("", "/context", "/prompt", "/history", "/events", "/recall?q=5433"):
        assert client.get(base + path, headers=A).status_code == 200, path
        refused = client.get(base + path, headers=B)
        assert refused.status_code == 404, path
        assert refused.json()["detail"] == "conversation 'c1' not found"
    for path, body in (("/messages", {"messages": TURNS[:1]}), ("/compact", {})):
        assert client.post(base + path, json=body, headers=B).status_code == 404
    assert client.get("/v1/conversations", headers=B).json() == {"conversations": []}
    assert client.get("/v1/conversations", headers=A).json() == {"conversations": [{"id": "c1"}]}
    # B may use the same name for its own conversation; the two never meet.
    assert client.post("/v1/conversations", json={"id": "c1"}, headers=B).status_code == 201
    assert client.get(base + "/history", headers=B).json()["total"] == 0
    assert client.get(base + "/history", headers=A).json()["total"] == 21
    assert sorted(sql_store.conversations()) == ["team-a/c1", "team-b/c1"]


def test_a_wrong_key_is_refused(client: TestClient) -> None:
    wrong = {"Authorization": "Bearer key-of-nobody-0123456789"}
    assert client.get("/v1/conversations", headers=wrong).status_code == 401
    assert client.get("/v1/conversations").status_code == 401


@pytest.mark.parametrize("key", ["short", " " * 20, ""])
def test_a_weak_key_is_refused_at_start(key: str) -> None:
    with pytest.raises(InvalidSetting, match="at least 16 characters"):
        ApiKeys.from_pairs(f"team-a={key}")
    if key:
        with pytest.raises(InvalidSetting):
            ApiKeys.single(key)


def test_serve_with_a_weak_key_exits_2(tmp_path: Path) -> None:
    result = run_precis(tmp_path, "serve", check=False, env={"PRECIS_API_KEY": "short"})
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "PRECIS_API_KEY" in line and "16 characters" in line


def test_keys_add_stores_only_a_digest_and_the_key_works(
    tmp_path: Path, sql_store: ConversationStore
) -> None:
    home = tmp_path / "home"
    key = run_precis(home, "keys", "add", "team-c").stdout.strip()
    saved = (home / "api-keys").read_text()
    assert key not in saved and saved.startswith("team-c sha256:")
    assert (home / "api-keys").stat().st_mode & 0o777 == 0o600
    keys = service_keys(home)
    assert keys.tenant(key) == (True, "team-c")
    app = create_app(sql_store, settings=CompactionSettings(context_window=2000), api_keys=keys)
    with TestClient(app) as c:
        auth = {"Authorization": f"Bearer {key}"}
        assert c.post("/v1/conversations", json={"id": "x"}, headers=auth).status_code == 201
    assert sql_store.conversations() == ["team-c/x"]
    bad = run_precis(home, "keys", "add", "no/slash", check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


SHARED_KEY = "the-shared-key-0123456789"
SHARED = {"Authorization": f"Bearer {SHARED_KEY}"}


def test_the_shared_key_sees_no_tenants_conversations(sql_store: ConversationStore) -> None:
    # As the README says: PRECIS_API_KEY's callers share the conversations made without a tenant
    # and see none of a tenant's; no key reads every tenant's data.
    keys = ApiKeys.single(SHARED_KEY).merged(ApiKeys.from_pairs(f"team-a={KEY_A}"))
    app = create_app(sql_store, settings=CompactionSettings(context_window=2000), api_keys=keys)
    with TestClient(app) as client:
        assert client.post("/v1/conversations", json={"id": "c1"}, headers=A).status_code == 201
        assert client.post("/v1/conversations/c1/messages", json={"messages": TURNS[:2]}, headers=A)
        assert (
            client.post("/v1/conversations", json={"id": "own"}, headers=SHARED).status_code == 201
        )
        assert client.get("/v1/conversations", headers=SHARED).json() == {
            "conversations": [{"id": "own"}]
        }
        assert client.get("/v1/conversations", headers=A).json() == {
            "conversations": [{"id": "c1"}]
        }
        for path in ("/v1/conversations/c1/history", "/v1/conversations/team-a%2Fc1/history"):
            assert client.get(path, headers=SHARED).status_code in (404, 422), path
        assert client.get("/v1/conversations/own/history", headers=A).status_code == 404
        page = client.get("/ui/", headers=SHARED)
        assert page.status_code == 200 and "/ui/c/own" in page.text and "c1" not in page.text
    assert sorted(sql_store.conversations()) == ["own", "team-a/c1"]
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "callers share the conversations made without a tenant, and see no tenant's." in readme
    assert "no key reads every tenant's data" in readme


# Three writers at once on one real server: two tenants using the same conversation name, and a
# second conversation of one of them. Each message carries its writer's secret.
WRITERS = (("team-a", KEY_A, "c1"), ("team-b", KEY_B, "c1"), ("team-a", KEY_A, "c2"))
ROUNDS = 12


def _secret(tenant: str, conversation: str) -> str:
    return f"secret-{tenant}-{conversation}-sk"


def test_two_tenants_appending_at_once_over_http_never_see_each_others_messages(
    sql_store: ConversationStore,
) -> None:
    keys = ApiKeys.from_pairs(f"team-a={KEY_A},team-b={KEY_B}")
    app = create_app(sql_store, settings=CompactionSettings(context_window=2000), api_keys=keys)
    barrier = threading.Barrier(len(WRITERS), timeout=60)
    secrets = {_secret(t, c) for t, _, c in WRITERS}

    def write(writer: tuple[str, str, str]) -> list[str]:
        """Append ROUNDS turns in step with the other writers; read the prompt and the context
        after each; return every foreign secret any answer held."""
        tenant, key, conversation = writer
        own = _secret(tenant, conversation)
        base = f"/v1/conversations/{conversation}"
        leaked: list[str] = []
        with httpx.Client(
            base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"}
        ) as client:
            for n in range(ROUNDS):
                barrier.wait()  # the writers' appends of round n go out together
                turn = [
                    {"role": "user", "content": f"round {n}: use {own} and port {5400 + n}"},
                    {"role": "assistant", "content": f"round {n} done with {own}. " + "y" * 200},
                ]
                added = client.post(base + "/messages", json={"messages": turn})
                assert added.status_code == 201, added.text
                if n % 4 == 3:  # and compactions, each over its own conversation only
                    compacted = client.post(base + "/compact", json={})
                    assert compacted.status_code == 200, compacted.text
                for path in ("/prompt", "/context", "/history?limit=500"):
                    answer = client.get(base + path)
                    assert answer.status_code == 200, (path, answer.text)
                    seen = json.dumps(answer.json())
                    assert own in seen, (tenant, conversation, path)
                    leaked += [s for s in secrets - {own} if s in seen]
        return leaked

    with serving(app) as url:
        for _, key, conversation in WRITERS:
            made = httpx.post(
                f"{url}/v1/conversations",
                json={"id": conversation},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert made.status_code == 201, made.text
        with ThreadPoolExecutor(len(WRITERS)) as pool:
            leaks = list(pool.map(write, WRITERS))
    assert leaks == [[], [], []]
    for tenant, _, conversation in WRITERS:
        stored = sql_store.history(f"{tenant}/{conversation}")
        said = [m.content for m in stored if m.kind == "message" and m.role == "user"]
        own = _secret(tenant, conversation)
        assert said == [f"round {n}: use {own} and port {5400 + n}" for n in range(ROUNDS)]
        assert any(m.kind == "summary" for m in stored), "no compaction ran"
        assert all(s not in (m.content or "") for m in stored for s in secrets - {own}), (
            f"{tenant}/{conversation}"
        )
    assert sorted(sql_store.conversations()) == ["team-a/c1", "team-a/c2", "team-b/c1"]
