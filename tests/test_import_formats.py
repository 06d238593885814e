"""`precis import` reads OpenAI JSONL, the repo's trajectories, Claude Code session logs and
Anthropic messages (images kept as content parts, or refused by name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_cli import run_precis

from precis.core.errors import ImportLineError
from precis.stores.formats import detect
from precis.stores.jsonl import parse_jsonl

DATA = Path(__file__).resolve().parent / "data"
TRAJECTORIES = sorted((DATA / "trajectories").glob("*.jsonl"))
CLAUDE_CODE = DATA / "imports" / "claude_code_session.jsonl"
ANTHROPIC = DATA / "imports" / "anthropic_messages.jsonl"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _numbered(path: Path) -> list[tuple[int, dict[str, object]]]:
    return [(i, json.loads(line)) for i, line in enumerate(_lines(path), 1) if line.strip()]


@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda p: p.stem[:40])
def test_every_trajectory_of_the_repo_imports_whole(path: Path) -> None:
    records = [json.loads(line) for line in _lines(path) if line.strip()]
    messages = parse_jsonl(_lines(path), "auto")
    assert len(messages) == len(records)
    calls = [c for r in records for c in r.get("tool_calls") or []]
    assert [(c.id, c.name, c.arguments) for m in messages for c in m.tool_calls] == [
        (c["id"], c["name"], c["arguments"]) for c in calls
    ]
    assert [m.content for m in messages] == [r["content"] for r in records]


def test_a_trajectory_is_told_apart_from_openai_jsonl() -> None:
    with_calls = next(p for p in TRAJECTORIES if "SWE-agent" in p.name)
    assert detect(_numbered(with_calls)) == "trajectory"
    assert detect([(1, {"role": "user", "content": "hi"})]) == "openai"
    assert detect(_numbered(CLAUDE_CODE)) == "claude-code"
    assert detect(_numbered(ANTHROPIC)) == "anthropic"
    # Read as plain OpenAI JSONL, a flat tool call is refused by line.
    with pytest.raises(ImportLineError, match=r"line \d+: tool_calls\[0\] has no function"):
        parse_jsonl(_lines(with_calls), "openai")


def test_a_claude_code_session_log_imports_its_conversation() -> None:
    messages = parse_jsonl(_lines(CLAUDE_CODE), "auto")
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    first, reply, failed = messages[0], messages[1], messages[2]
    assert "do not touch vendor/" in first.content
    # The reply logged over three lines (one message id) is one message: thinking, text, call.
    assert reply.reasoning == "Run the test first to see the failure."
    assert reply.content == "I'll run the checkout test to see the failure."
    [call] = reply.tool_calls
    assert call.id == "toolu_01" and call.name == "Bash"
    assert json.loads(call.arguments)["command"] == "pytest tests/test_checkout.py -q"
    assert failed.tool_call_id == "toolu_01" and failed.metadata == {"is_error": True}
    assert "assert 1999 == 2000" in failed.content
    assert "0.9995" in messages[4].content
    assert messages[-1].content.endswith("vendor/ is untouched.")


def test_a_claude_code_entry_without_its_message_is_named_by_line() -> None:
    lines = _lines(CLAUDE_CODE)
    lines[3] = json.dumps({"type": "assistant", "uuid": "x"}) + "\n"
    with pytest.raises(ImportLineError, match="line 4: a user or assistant entry without"):
        parse_jsonl(lines, "claude-code")


def test_anthropic_messages_keep_their_images_as_content_parts() -> None:
    messages = parse_jsonl(_lines(ANTHROPIC), "auto")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
    screenshot, later = messages[0], messages[-1]
    assert screenshot.images == 1 and later.images == 1
    parts = screenshot.to_openai()["content"]
    assert parts[0] == {"type": "text", "text": "What does this error screenshot say?"}
    assert parts[1]["type"] == "image_url"
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    # The order of text and image is kept, and a URL image stays a URL.
    assert [p["type"] for p in later.to_openai()["content"]] == ["image_url", "text"]
    assert later.to_openai()["content"][0]["image_url"]["url"] == "https://example.com/quota.png"
    assert messages[2].tool_call_id == "toolu_9"


def test_an_image_that_cannot_be_kept_is_refused_by_line() -> None:
    lines = _lines(ANTHROPIC)
    file_image = {"type": "image", "source": {"type": "file", "file_id": "file_011"}}
    lines.append(json.dumps({"role": "user", "content": [file_image]}) + "\n")
    with pytest.raises(ImportLineError, match="line 6: block 0: image source 'file' cannot be"):
        parse_jsonl(lines, "anthropic")


def test_the_cli_imports_each_format_and_exports_openai_jsonl(home: Path) -> None:
    trajectory = next(p for p in TRAJECTORIES if "mini-swe-agent" in p.name)
    cases = [(trajectory, "auto", 22), (CLAUDE_CODE, "claude-code", 6), (ANTHROPIC, "auto", 5)]
    for i, (path, form, count) in enumerate(cases):
        conversation = f"c{i}"
        done = run_precis(
            home, "--conversation", conversation, "import", "--format", form, str(path)
        )
        assert f"imported {count} messages into {conversation!r}" in done.stdout
        exported = run_precis(home, "--conversation", conversation, "export").stdout.splitlines()
        assert len(exported) == count
    # The images came through the store into the OpenAI export.
    first = json.loads(run_precis(home, "--conversation", "c2", "export").stdout.splitlines()[0])
    assert first["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    wrong = run_precis(home, "import", "--format", "yaml", str(ANTHROPIC), check=False)
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == (
        "precis: error: --format 'yaml': expected one of auto, openai, trajectory, claude-code, "
        "anthropic"
    )
