"""How `precis` reports a failure: one line on stderr, an exit code chosen by the error's class."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from run_cli import Ran, run_precis

from precis.cli.errors import EXIT_FAILED, EXIT_USAGE, CliFailure, CliUsageError, outcome
from precis.core.errors import (
    CompactionError,
    CompactionVetoed,
    ContextOverflow,
    ConversationNotFound,
    HookVeto,
    ImportLineError,
    InvalidInput,
    InvalidMessage,
    InvalidSetting,
    ModelError,
    PlanningError,
    SettingsError,
    StoreError,
    SummarizerError,
    TokenizerUnavailable,
    VersionConflict,
)


def one_line(result: Ran) -> str:
    """The single stderr line of a failed run, which printed nothing on stdout."""
    assert result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("error", "code", "label"),
    [
        (StoreError("s"), EXIT_FAILED, "error"),
        (ConversationNotFound("c"), EXIT_FAILED, "error"),
        (VersionConflict("c", 1, 2), EXIT_FAILED, "error"),
        (ModelError("m"), EXIT_FAILED, "error"),
        (ContextOverflow("o"), EXIT_FAILED, "error"),
        (SummarizerError("s"), EXIT_FAILED, "error"),
        (CompactionError("c"), EXIT_FAILED, "cannot compact"),
        (PlanningError("p"), EXIT_FAILED, "cannot compact"),
        (CompactionVetoed("v"), EXIT_FAILED, "cannot compact"),
        (HookVeto("h"), EXIT_FAILED, "error"),
        (TokenizerUnavailable("t"), EXIT_FAILED, "error"),
        (CliFailure("f"), EXIT_FAILED, "error"),
        (FileNotFoundError(2, "No such file or directory"), EXIT_FAILED, "error"),
        (InvalidInput("i"), EXIT_USAGE, "invalid input"),
        (InvalidMessage(3, "no role", "role"), EXIT_USAGE, "invalid input"),
        (ImportLineError(4, "not JSON"), EXIT_USAGE, "invalid input"),  # InvalidInput comes first
        (InvalidSetting("turn_limit", "must be positive"), EXIT_USAGE, "invalid setting"),
        (SettingsError("PRECIS_TURN_LIMIT: bad"), EXIT_USAGE, "invalid setting"),
        (CliUsageError("u"), EXIT_USAGE, "error"),
        (typer.BadParameter("b"), EXIT_USAGE, "usage"),
    ],
)
def test_each_error_class_has_its_exit_code_and_label(
    error: Exception, code: int, label: str
) -> None:
    found = outcome(error)
    assert found is not None
    assert found[0] == code
    assert found[1].startswith(f"precis: {label}: ")
    assert "\n" not in found[1]


def test_errors_the_cli_does_not_expect_are_left_to_raise() -> None:
    # A bare ValueError or RuntimeError is a bug: its traceback is the report.
    for error in (ValueError("v"), RuntimeError("r"), KeyError("k"), typer.Exit(0)):
        assert outcome(error) is None
    assert outcome(BrokenPipeError()) is None  # typer quiets a closed stdout itself


def test_a_message_of_several_lines_is_reported_on_one() -> None:
    assert outcome(StoreError("first\nsecond")) == (EXIT_FAILED, "precis: error: first second")


def test_a_store_failure_exits_1_with_one_error_line(tmp_path: Path) -> None:
    result = run_precis(tmp_path, "--store", "bogus://nowhere", "context", check=False)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith("precis: error: unsupported store URL 'bogus://nowhere'")


def test_a_store_failure_from_the_console_entry_has_no_traceback(tmp_path: Path) -> None:
    result = run_precis(tmp_path, "--store", "bogus://", "history", check=False, subprocess=True)
    assert result.returncode == 1
    assert one_line(result).startswith("precis: error: unsupported store URL")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("compact", "--mode", "bogus"), "--mode"),
        (("--summarizer", "nope", "context"), "--summarizer"),
        (("--provider", "nope", "chat", "-p", "hi"), "--provider"),
        (("demo", "--scenario", "nope"), "--scenario"),
        (("eval", "conversation.jsonl", "-s", "magic"), "--strategy"),
    ],
)
def test_a_bad_choice_exits_2_with_one_usage_line(
    tmp_path: Path, args: tuple[str, ...], option: str
) -> None:
    result = run_precis(tmp_path, *args, check=False)
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith(f"precis: usage: Invalid value for '{option}'"), line
    assert "--help" in line


def test_a_bad_choice_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    result = run_precis(tmp_path, "context", env={"PRECIS_SUMMARIZER": "nope"}, check=False)
    assert result.returncode == 2
    assert "PRECIS_SUMMARIZER" in one_line(result)


def test_a_bad_choice_from_the_console_entry_has_no_traceback(tmp_path: Path) -> None:
    result = run_precis(tmp_path, "demo", "--scenario", "nope", check=False, subprocess=True)
    assert result.returncode == 2
    assert one_line(result).startswith("precis: usage: ")


def test_unknown_options_and_missing_arguments_are_usage_lines(tmp_path: Path) -> None:
    for args in (("--bogus", "context"), ("recall",), ("context", "--bogus")):
        result = run_precis(tmp_path, *args, check=False)
        assert result.returncode == 2
        assert one_line(result).startswith("precis: usage: ")


def test_no_arguments_still_shows_the_help(tmp_path: Path) -> None:
    result = run_precis(tmp_path, check=False)
    assert result.returncode == 2
    assert "Usage: precis" in result.stdout + result.stderr
    assert "compact" in result.stdout + result.stderr
