"""Bad input gets one clear answer and leaves the store as it was, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from run_cli import run_precis

from precis.core.errors import InvalidInput, InvalidMessage, MessageTooLarge
from precis.core.messages import MAX_MESSAGE_CHARS, MAX_NESTING, Message
from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.server.keys import scoped
from precis.session import AsyncSession, Session
from precis.stores.base import ConversationStore
from precis.stores.memory import MemoryStore
from precis.stores.sqlite import SQLiteStore

BASE = "/v1/conversations/c"


@pytest.fixture
def client(sql_store: ConversationStore) -> Iterator[TestClient]:
    app = create_app(sql_store, settings=CompactionSettings(context_window=4000))
    with TestClient(app) as c:
        assert c.post("/v1/conversations", json={"id": "c"}).status_code == 201
        first = [{"role": "user", "content": "Ship the CSV export."}]
        assert c.post(f"{BASE}/messages", json={"messages": first}).status_code == 201
        yield c


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth - 1):
        value = {"deeper": value}
    return value


def snapshot(client: TestClient) -> tuple[Any, Any, Any]:
    return (
        client.get(f"{BASE}/history").json(),
        client.get(f"{BASE}/context").json(),
        client.get(f"{BASE}/prompt").json(),
    )


def call(call_id: str, name: str = "ls") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 260, 900])
def test_deep_nesting_is_refused_before_anything_is_stored(client: TestClient, depth: int) -> None:
    before = snapshot(client)
    body = {"messages": [{"role": "user", "content": "hi", "extra": nested(depth)}]}
    answer = client.post(f"{BASE}/messages", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == f"messages[0]: nested deeper than {MAX_NESTING} levels"
    assert snapshot(client) == before  # and the conversation still reads


def test_nesting_up_to_the_limit_is_kept_exactly(client: TestClient) -> None:
    deep = nested(MAX_NESTING - 2)  # the message object and its "extra" key are two levels
    body = {"messages": [{"role": "user", "content": "hi", "extra": deep}]}
    assert client.post(f"{BASE}/messages", json=body).status_code == 201
    assert client.get(f"{BASE}/history").json()["messages"][-1]["extra"] == deep


@pytest.mark.parametrize(
    ("messages", "detail"),
    [
        (
            [{"role": "assistant", "content": "", "tool_calls": [call("x"), call("x")]}],
            "messages[0].tool_calls: duplicate_tool_call_id",
        ),
        (
            [
                {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
                {"role": "tool", "tool_call_id": "a", "content": "ok"},
                {"role": "user", "content": "and now?"},
            ],
            "messages[0].tool_calls: missing_tool_result",
        ),
    ],
)
def test_broken_tool_pairs_are_refused_on_the_way_in(
    client: TestClient, messages: list[dict[str, Any]], detail: str
) -> None:
    before = snapshot(client)
    answer = client.post(f"{BASE}/messages", json={"messages": messages})
    assert answer.status_code == 422 and answer.json()["detail"].startswith(detail), answer.text
    assert snapshot(client) == before


def test_a_call_pending_at_the_end_is_allowed_and_then_answered(client: TestClient) -> None:
    pending = [{"role": "assistant", "content": "", "tool_calls": [call("p")]}]
    assert client.post(f"{BASE}/messages", json={"messages": pending}).status_code == 201
    # The conversation may not move on before the result comes...
    moved = client.post(f"{BASE}/messages", json={"messages": [{"role": "user", "content": "?"}]})
    assert moved.status_code == 422 and "missing_tool_result" in moved.json()["detail"]
    # ...and the result, when it comes, is taken.
    result = [{"role": "tool", "tool_call_id": "p", "content": "done"}]
    assert client.post(f"{BASE}/messages", json={"messages": result}).status_code == 201


def test_the_library_refuses_the_same_way() -> None:
    session = Session(MemoryStore(), "c")
    session.append({"role": "user", "content": "go"})
    with pytest.raises(InvalidMessage) as caught:
        session.append(
            Message.from_openai({"role": "assistant", "content": "", "tool_calls": [call("x")]}),
            {"role": "user", "content": "skipped the result"},
        )
    assert caught.value.field == "tool_calls" and "missing_tool_result" in caught.value.reason
    assert len(session.history()) == 1


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (json.dumps({"role": "user", "content": "x", "extra": nested(900)}), "nested deeper"),
        (
            json.dumps({"role": "assistant", "content": "", "tool_calls": [call("d"), call("d")]}),
            "duplicate_tool_call_id",
        ),
    ],
)
def test_import_refuses_a_bad_line_naming_it(tmp_path: Path, line: str, reason: str) -> None:
    home = tmp_path / "home"
    run_precis(home, "chat", "-p", "Ship the CSV export.")
    history = run_precis(home, "history", "--json").stdout
    dump = tmp_path / "bad.jsonl"
    dump.write_text(json.dumps({"role": "user", "content": "fine"}) + "\n" + line + "\n")
    result = run_precis(home, "import", str(dump), check=False)
    assert result.returncode == 1
    (text,) = result.stderr.strip().splitlines()
    assert "line 2" in text and reason in text
    assert run_precis(home, "history", "--json").stdout == history


# --- project files run no code unasked ----------------------------------------------------------


def _project_with_a_hook(tmp_path: Path) -> tuple[Path, Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "ran"
    (project / "precis.toml").write_text(f'[hooks]\npre_compact = "touch {marker}"\n')
    for n in range(12):
        run_precis(home, "chat", "-p", f"turn {n}: " + "work " * 60, cwd=project)
    return home, project, marker


def test_an_untrusted_project_file_runs_no_hook(tmp_path: Path) -> None:
    home, project, marker = _project_with_a_hook(tmp_path)
    result = run_precis(home, "compact", cwd=project)
    assert not marker.exists()
    assert "hooks left out: this project file is not trusted" in result.stderr
    assert "precis trust" in result.stderr


def test_trust_lets_the_hooks_run_until_the_file_changes(tmp_path: Path) -> None:
    home, project, marker = _project_with_a_hook(tmp_path)
    trusted = run_precis(home, "trust", cwd=project)
    assert trusted.stdout.startswith("trusted sha256:")
    run_precis(home, "compact", cwd=project)
    assert marker.exists()
    marker.unlink()
    settings = project / "precis.toml"
    settings.write_text(settings.read_text() + "timeout = 5\n")  # changed: trust again first
    for n in range(6):
        run_precis(home, "chat", "-p", f"more {n}: " + "work " * 60, cwd=project)
    result = run_precis(home, "compact", cwd=project)
    assert not marker.exists() and "not trusted" in result.stderr


def test_hooks_in_the_home_file_stay_trusted(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    home.mkdir()
    marker = tmp_path / "ran"
    (home / "precis.toml").write_text(f'[hooks]\npre_compact = "touch {marker}"\n')
    for n in range(12):
        run_precis(home, "chat", "-p", f"turn {n}: " + "work " * 60, cwd=project)
    result = run_precis(home, "compact", cwd=project)
    assert marker.exists() and "not trusted" not in result.stderr


def test_a_mistyped_variable_is_named_with_the_closest_setting(tmp_path: Path) -> None:
    result = run_precis(tmp_path, "config", env={"PRECIS_SUMARY_TIMEOUT": "5"})
    assert (
        "precis: warning: PRECIS_SUMARY_TIMEOUT is not a precis setting and is ignored "
        "(did you mean PRECIS_SUMMARY_TIMEOUT?)"
    ) in result.stderr


# --- one size limit; a message too big for the window is shown head+tail ---------------------


def test_one_message_limit_at_every_way_in(tmp_path: Path, client: TestClient) -> None:
    huge = "x" * (MAX_MESSAGE_CHARS + 1)
    with pytest.raises(MessageTooLarge):
        Message(role="user", content=huge)
    answer = client.post(f"{BASE}/messages", json={"messages": [{"role": "user", "content": huge}]})
    assert answer.status_code == 413
    assert answer.json()["detail"] == (
        f"messages[0].content: {MAX_MESSAGE_CHARS + 1} characters, "
        f"over the limit of {MAX_MESSAGE_CHARS}"
    )
    home = tmp_path / "home"
    run_precis(home, "chat", "-p", "Ship the CSV export.")
    history = run_precis(home, "history", "--json").stdout
    dump = tmp_path / "huge.jsonl"
    dump.write_text(json.dumps({"role": "user", "content": huge}) + "\n")
    result = run_precis(home, "import", str(dump), check=False)
    assert (
        result.returncode == 1 and "line 1" in result.stderr and "over the limit" in result.stderr
    )
    assert run_precis(home, "history", "--json").stdout == history


def test_a_message_bigger_than_the_window_is_shown_head_and_tail(tmp_path: Path) -> None:
    pasted = "\n".join(f"log line {i}: " + "y" * 80 for i in range(9000))  # ~0.8 M characters
    session = Session(
        SQLiteStore(tmp_path / "precis.db"), "c", settings=CompactionSettings(context_window=8000)
    )
    session.append({"role": "user", "content": "Find why the build fails."})
    session.append({"role": "assistant", "content": "Paste the log, please."})
    (stored,) = session.append({"role": "user", "content": pasted})
    assert session.tokens() <= 8000  # the view fits before any compaction
    shown = next(m for m in session.view() if m.id == stored.id)
    assert shown.content.startswith("log line 0:") and "log line 8999:" in shown.content
    assert session.history()[-1].content == pasted  # the original is kept whole
    assert session.recall("8999")[0].id == stored.id


# --- the small ones ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allow"),
    [("/v1/conversations", "GET, POST"), (f"{BASE}/messages", "POST"), (BASE, "GET")],
)
def test_405_names_the_methods_allowed(client: TestClient, path: str, allow: str) -> None:
    answer = client.delete(path)
    assert answer.status_code == 405 and answer.headers["allow"] == allow


def test_the_schema_asks_for_a_role_in_every_message(client: TestClient) -> None:
    items = client.get("/openapi.json").json()["components"]["schemas"]["AppendMessages"]
    assert items["properties"]["messages"]["items"]["required"] == ["role"]


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "a NUL \x00 here"},
        {"role": "user", "content": "fine", "extra": {"score": float("nan")}},
        {"role": "user", "content": "fine", "extra": ["nul \x00 inside"]},
    ],
)
def test_nul_and_nan_are_refused_alike_on_both_stores(
    client: TestClient, message: dict[str, Any]
) -> None:
    before = snapshot(client)
    body = json.dumps({"messages": [message]}, allow_nan=True)
    answer = client.post(
        f"{BASE}/messages", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    assert snapshot(client) == before


def test_import_refuses_nan(tmp_path: Path) -> None:
    dump = tmp_path / "nan.jsonl"
    dump.write_text('{"role": "user", "content": "x", "score": NaN}\n')
    result = run_precis(tmp_path / "home", "import", str(dump), check=False)
    assert result.returncode == 1 and "not a JSON number" in result.stderr


# Ids every face refuses (a NUL cannot even be passed as an argument: the library's own list).
REFUSED_IDS = ["", "../..", "x" * 129, "x" * 10_000, "abc\n", "-flag", "a b"]


@pytest.mark.parametrize("conversation", [*REFUSED_IDS, "a/b"])
def test_the_cli_takes_only_ids_the_service_can_open(tmp_path: Path, conversation: str) -> None:
    result = run_precis(tmp_path, "-c", conversation, "chat", "-p", "hi", check=False)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "precis.db").exists()


@pytest.mark.parametrize("conversation", [*REFUSED_IDS, "a\x00b", "t/a/b", "/a", "a/", None])
@pytest.mark.parametrize("face", [Session, AsyncSession])
def test_the_library_takes_only_ids_the_service_can_open(
    any_store: ConversationStore, face: type[Session | AsyncSession], conversation: Any
) -> None:
    # The one rule the CLI and the service hold ("a/b" is a tenant's conversation: see below).
    with pytest.raises(InvalidInput, match=r"^conversation id ") as caught:
        face(any_store, conversation)
    line = str(caught.value)
    assert "\n" not in line and len(line) < 200
    if isinstance(conversation, str):
        assert repr(conversation[:40]) in line
    assert any_store.conversations() == []


def test_the_library_opens_a_tenants_conversation_as_the_service_stores_it(
    any_store: ConversationStore,
) -> None:
    # The service keeps tenant "team-a"'s conversation "c" as "team-a/c"; the library opens it.
    Session(any_store, scoped("team-a", "c")).append({"role": "user", "content": "hi"})
    assert any_store.conversations() == ["team-a/c"]


def test_reads_never_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    missing = run_precis(home, "-c", "typo", "history", check=False)
    assert missing.returncode == 1 and "no precis database" in missing.stderr
    assert not home.exists()
    run_precis(home, "chat", "-p", "hello")
    typo = run_precis(home, "-c", "typo", "history", check=False)
    assert typo.returncode == 1 and "conversation 'typo' not found" in typo.stderr
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'x.db'}"
    elsewhere = run_precis(home, "--store", url, "history", check=False)
    assert elsewhere.returncode == 1 and not (tmp_path / "no").exists()
    assert [c for c in SQLiteStore(home / "precis.db").conversations()] == ["default"]


def test_a_home_that_is_a_file_is_one_clear_line(tmp_path: Path) -> None:
    afile = tmp_path / "passwd"
    afile.write_text("root:x:0:0\n")
    result = run_precis(afile, "chat", "-p", "hi", check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"precis: error: --home / PRECIS_HOME '{afile}': not a directory"
    ]


def test_an_imported_conversation_keeps_its_own_task_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for text in ("Ship the CSV export.", "Add a header row.", "Quote the commas."):
        run_precis(home, "chat", "-p", text)
    dump = run_precis(home, "export").stdout
    imported = run_precis(home, "-c", "copy", "import", "-", stdin=dump)
    assert imported.stdout.strip() == "imported 6 messages into 'copy'"
    run_precis(home, "-c", "copy", "chat", "-p", "And now the footer.")
    shown = json.loads(run_precis(home, "-c", "copy", "context", "--json").stdout)
    users = [m["content"] for m in shown if m["role"] == "user"]
    # The copy's task is its own first request, pinned first; the new turn comes last.
    assert users == [
        "Ship the CSV export.",
        "Add a header row.",
        "Quote the commas.",
        "And now the footer.",
    ]
    assert shown[0]["pinned"] and not shown[-2]["pinned"]


def test_a_read_leaves_a_foreign_or_empty_database_file_untouched(tmp_path: Path) -> None:
    import sqlite3

    foreign, empty = tmp_path / "app.db", tmp_path / "empty.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    empty.touch()
    before = {p: p.read_bytes() for p in (foreign, empty)}
    for path in (foreign, empty):
        result = run_precis(tmp_path, "--store", f"sqlite:///{path}", "history", check=False)
        assert result.returncode == 1 and "no precis database" in result.stderr
    assert {p: p.read_bytes() for p in (foreign, empty)} == before  # byte for byte


@pytest.fixture
def read_only_home(tmp_path: Path) -> Iterator[Path]:
    """A home with one conversation that this process may not write: chmod, and as root (whom
    modes do not stop) the immutable flag; skipped where neither holds."""
    import os
    import shutil
    import subprocess

    home = tmp_path / "home"
    run_precis(home, "chat", "-p", "Keep the port at 5433.")
    run_precis(home, "chat", "-p", "And log every retry.")
    files = [home / "precis.db", home]
    flagged = False
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        done = chattr and subprocess.run([chattr, "+i", *map(str, files)], capture_output=True)
        if not done or done.returncode != 0:
            pytest.skip(
                "running as root where chattr +i is unavailable: cannot make a home read-only"
            )
        flagged = True
    else:
        (home / "precis.db").chmod(0o444)
        home.chmod(0o555)
    try:
        yield home
    finally:
        if flagged:
            subprocess.run(["chattr", "-i", *map(str, files)], check=True)
        home.chmod(0o755)
        (home / "precis.db").chmod(0o644)


def test_a_read_only_home_serves_reads_and_names_itself_on_writes(read_only_home: Path) -> None:
    home = read_only_home
    before = sorted((p.name, p.read_bytes()) for p in home.iterdir())
    history = run_precis(home, "history", "--json")
    assert [m["content"] for m in json.loads(history.stdout) if m["role"] == "user"] == [
        "Keep the port at 5433.",
        "And log every retry.",
    ]
    assert "5433" in run_precis(home, "recall", "port").stdout
    assert run_precis(home, "export").stdout.count("\n") == 4
    for write in (("chat", "-p", "one more"), ("compact",), ("-c", "new", "chat", "-p", "hi")):
        result = run_precis(home, *write, check=False)
        assert result.returncode == 1, write
        assert len(result.stderr.strip().splitlines()) == 1 and "read-only" in result.stderr
    assert sorted((p.name, p.read_bytes()) for p in home.iterdir()) == before


def test_the_service_reads_a_read_only_database_and_refuses_writes(read_only_home: Path) -> None:
    from precis.stores import open_store

    store = open_store(None, home=read_only_home, read_only_ok=True)
    try:
        with TestClient(create_app(store, settings=CompactionSettings())) as http:
            read = http.get("/v1/conversations/default/history")
            assert read.status_code == 200 and len(read.json()["messages"]) == 4
            write = http.post(
                "/v1/conversations/default/messages",
                json={"messages": [{"role": "user", "content": "more"}]},
            )
            assert write.status_code == 403 and "read-only" in write.json()["detail"]
    finally:
        store.close()


def test_stats_and_display_count_the_same_context_alike(tmp_path: Path) -> None:
    for i in range(12):
        run_precis(
            tmp_path,
            "--context-window",
            "2000",
            "chat",
            "-p",
            f"Step {i}: refactor module_{i}.py, keep the port at 5433 and rerun the tests.",
        )
    compacted = run_precis(tmp_path, "--context-window", "2000", "compact").stdout
    stats = json.loads(compacted.splitlines()[0])
    shown = run_precis(tmp_path, "context").stdout
    header = next(line for line in shown.splitlines() if "context:" in line)
    assert (
        f"{stats['messages_count_after']} messages, ~{stats['context_tokens_after']} tokens"
        in header
    )
