"""A command that fails creates no conversation, and a Ctrl-C says truly what is stored.

Interrupts are raised deterministically from a patched step, in-process through the CLI's own
app (typer's CliRunner), against the real SQLite file under the home.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from run_cli import run_precis

from precis.cli.config import CreatedOnFirstWrite
from precis.core.errors import InvalidMessage
from precis.providers.mock import MockProvider
from precis.session import Session
from precis.stores.base import ConversationStore
from precis.stores.sqlite import SQLiteStore

MESSAGES = 40


def conversations(home: Path) -> list[str]:
    store = SQLiteStore(home / "precis.db")
    try:
        return store.conversations()
    finally:
        store.close()


def write_jsonl(path: Path, count: int = MESSAGES) -> Path:
    lines = [
        json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}"})
        for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def history(home: Path, conversation: str) -> list[dict[str, Any]]:
    out = run_precis(home, "-c", conversation, "history", "--json").stdout
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home whose database holds one conversation, 'default'."""
    home = tmp_path / "home"
    run_precis(home, "chat", "-p", "Our staging database listens on port 5433.")
    return home


def _interrupt(*_: Any, **__: Any) -> Any:
    raise KeyboardInterrupt


def test_an_interrupt_after_the_import_committed_says_what_is_stored(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = write_jsonl(tmp_path / "dump.jsonl")
    # Right after the append's transaction committed, before the session goes on.
    append = SQLiteStore.append

    def committed_then_interrupted(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        append(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(SQLiteStore, "append", committed_then_interrupted)
    result = run_precis(home, "-c", "imported", "import", str(dump), check=False)
    monkeypatch.undo()
    assert result.returncode == 130, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"precis: interrupted; the import had committed: {MESSAGES} of the file's {MESSAGES} "
        "messages are in 'imported' (importing the file again would add them twice)"
    ]
    assert [row["content"] for row in history(home, "imported")] == [
        f"line {i}" for i in range(MESSAGES)
    ]


def test_an_interrupt_before_the_import_committed_leaves_the_store_as_it_was(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = write_jsonl(tmp_path / "dump.jsonl")
    before = history(home, "default")
    monkeypatch.setattr(SQLiteStore, "append", _interrupt)
    result = run_precis(home, "import", str(dump), check=False)
    monkeypatch.undo()
    assert result.returncode == 130
    assert result.stderr.strip().splitlines() == [
        "precis: interrupted; the store is as it was before this step"
    ]
    assert history(home, "default") == before
    assert conversations(home) == ["default"]


def _bad_file(tmp_path: Path) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n[not json\n', encoding="utf-8")
    return str(path)


NO_SERVER = ["--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
FAILING = {
    "compact a new conversation": lambda tmp: ["compact"],
    "import a file with a bad line": lambda tmp: ["import", _bad_file(tmp)],
    "import a file that is not there": lambda tmp: ["import", str(tmp / "missing.jsonl")],
    "chat without a model name": lambda tmp: ["--provider", "openai", "chat", "-p", "hi"],
    "chat with a model that is not there": lambda tmp: [*NO_SERVER, "chat", "-p", "hi"],
}


@pytest.mark.parametrize("case", list(FAILING))
def test_a_failed_command_creates_no_conversation(home: Path, tmp_path: Path, case: str) -> None:
    result = run_precis(home, "-c", "new", *FAILING[case](tmp_path), check=False)
    assert result.returncode in (1, 2), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert conversations(home) == ["default"]
    missing = run_precis(home, "-c", "new", "history", check=False)
    assert missing.returncode == 1 and "conversation 'new' not found" in missing.stderr


def test_a_chat_turn_interrupted_before_the_model_answered_creates_nothing(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MockProvider, "complete", _interrupt)
    result = run_precis(home, "-c", "new", "chat", "-p", "hi", check=False)
    monkeypatch.undo()
    assert result.returncode == 130
    assert conversations(home) == ["default"]


def test_commands_that_succeed_create_their_conversation(home: Path, tmp_path: Path) -> None:
    run_precis(home, "-c", "talked", "chat", "-p", "Deploy on Friday.")
    run_precis(home, "-c", "imported", "import", str(write_jsonl(tmp_path / "dump.jsonl")))
    assert conversations(home) == ["default", "imported", "talked"]
    assert [row["content"] for row in history(home, "talked")] == [
        "Deploy on Friday.",
        "Noted: Deploy on Friday.",
    ]
    assert len(history(home, "imported")) == MESSAGES
    assert run_precis(home, "-c", "talked", "compact").returncode == 0


def test_a_refused_first_append_creates_no_conversation(tmp_path: Path) -> None:
    # The store's own check refuses the orphan tool result inside the append's transaction, so
    # the conversation the append would have created is not there either.
    store = SQLiteStore(tmp_path / "precis.db")
    try:
        session = Session(cast("ConversationStore", CreatedOnFirstWrite(store, "new")), "new")
        assert session.context() == [] and session.history() == []
        orphan = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
        with pytest.raises(InvalidMessage):
            session.append({"role": "user", "content": "hi"}, orphan)
        assert store.conversations() == []
        session.append({"role": "user", "content": "hi"})
        assert store.conversations() == ["new"] and len(session.history()) == 1
    finally:
        store.close()
