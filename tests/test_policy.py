"""Compaction settings: their checks, loading from precis.toml and PRECIS_*, `precis config`."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from run_cli import Ran, run_precis

from precis.cli.loading import LoadedSettings, env_name, load_settings, trust
from precis.core.errors import InvalidSetting, SettingsError
from precis.core.tokens import letta_threshold
from precis.engine.settings import MAX_SECONDS, MAX_SETTING_COUNT, CompactionSettings


def write_toml(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "precis.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load(
    tmp_path: Path,
    *,
    home_toml: str | None = None,
    cwd_toml: str | None = None,
    env: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> LoadedSettings:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    if home_toml is not None:
        write_toml(home, home_toml)
    if cwd_toml is not None:
        write_toml(cwd, cwd_toml)
    return load_settings(home=home, cwd=cwd, env=env or {}, overrides=overrides)


# --- The settings object -----------------------------------------------------------------------


def test_threshold_is_letta_without_a_soft_watermark_and_floor_of_soft_times_w_with_one() -> None:
    lettas = CompactionSettings(context_window=8000, low_watermark=None)
    assert lettas.threshold == letta_threshold(8000) == 6400
    assert CompactionSettings(context_window=100_000, low_watermark=None).threshold == 83616
    # The default policy compacts at 85 % of the window, or at letta's threshold if later.
    assert CompactionSettings(context_window=8000).threshold == 6800
    assert CompactionSettings(context_window=100_000).threshold == 85_000
    assert CompactionSettings(context_window=200_000).threshold == 200_000 - 16384
    assert CompactionSettings(context_window=1000, hard_watermark=0.8).threshold == 800
    assert CompactionSettings(context_window=1001, soft_watermark=0.7).threshold == 700
    assert CompactionSettings(soft_watermark=0.7).threshold is None


def test_hard_limit_is_floor_of_hard_times_w() -> None:
    assert CompactionSettings(context_window=1001).hard_limit == 950
    assert CompactionSettings(context_window=1000, hard_watermark=1.0).hard_limit == 1000
    assert CompactionSettings().hard_limit is None


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"soft_watermark": 0.0}, "soft_watermark"),
        ({"soft_watermark": 0.95}, "soft_watermark"),
        ({"soft_watermark": 0.9, "hard_watermark": 0.8}, "soft_watermark"),
        ({"hard_watermark": 0.0}, "hard_watermark"),
        ({"hard_watermark": 1.01}, "hard_watermark"),
        ({"turn_limit": 0}, "turn_limit"),
        ({"tool_output_max_chars": 0}, "tool_output_max_chars"),
        ({"tool_output_head_lines": 0}, "tool_output_head_lines"),
        ({"tool_output_tail_lines": -1}, "tool_output_tail_lines"),
        ({"mask_after_turns": 0}, "mask_after_turns"),
        ({"summary_style": "haiku"}, "summary_style"),
        ({"merge_policy": "patch"}, "merge_policy"),
        ({"pre_compact_hooks": ("",)}, "pre_compact_hooks"),
        ({"post_compact_hooks": ["echo"]}, "post_compact_hooks"),
        ({"hook_timeout": 0.0}, "hook_timeout"),
        ({"hook_timeout": float("nan")}, "hook_timeout"),
        ({"context_window": 0}, "context_window"),
        ({"reserved_tokens": -1}, "reserved_tokens"),
        ({"clip_chars": 0}, "clip_chars"),
        ({"summary_timeout": -1.0}, "summary_timeout"),
        ({"commit_retries": -1}, "commit_retries"),
        ({"context_window": 10**22}, "context_window"),
        ({"context_window": MAX_SETTING_COUNT + 1}, "context_window"),
        ({"context_window": "8000"}, "context_window"),
        ({"reserved_tokens": 10**22}, "reserved_tokens"),
        ({"clip_chars": 10**22}, "clip_chars"),
        ({"tool_result_chars": 10**22}, "tool_result_chars"),
        ({"turn_limit": 10**22}, "turn_limit"),
        ({"tool_output_max_chars": 10**22}, "tool_output_max_chars"),
        ({"tool_output_head_lines": 10**22}, "tool_output_head_lines"),
        ({"tool_output_tail_lines": 10**22}, "tool_output_tail_lines"),
        ({"mask_after_turns": 10**22}, "mask_after_turns"),
        ({"commit_retries": 10**6}, "commit_retries"),
        ({"summary_retries": 101}, "summary_retries"),
        ({"summary_timeout": 1e300}, "summary_timeout"),
        ({"hook_timeout": float("inf")}, "hook_timeout"),
    ],
)
def test_invalid_values_raise_value_error_naming_the_key(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=rf"^{key}: ") as caught:
        CompactionSettings(**kwargs)
    assert isinstance(caught.value, InvalidSetting) and caught.value.key == key


def test_boundaries_that_are_allowed() -> None:
    CompactionSettings(soft_watermark=0.94, hard_watermark=0.95)
    CompactionSettings(soft_watermark=0.5, hard_watermark=1.0)
    CompactionSettings(tool_output_max_chars=None, commit_retries=0, summary_timeout=None)
    CompactionSettings(context_window=MAX_SETTING_COUNT, summary_timeout=MAX_SECONDS)


# --- Loading ------------------------------------------------------------------------------------


def test_nothing_configured_gives_the_defaults_from_default(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    assert loaded.settings == CompactionSettings()
    assert loaded.sources == {f.name: "default" for f in fields(CompactionSettings)}


def test_precedence_home_then_cwd_then_env_then_overrides(tmp_path: Path) -> None:
    home_toml = (
        "[compaction]\ncontext_window = 1000\nturn_limit = 5\nsummary_style = 'brief'\n"
        "clip_chars = 300\nreserve_floor = true\n"
    )
    cwd_toml = "[compaction]\ncontext_window = 2000\nturn_limit = 6\nsummary_style = 'notes'\n"
    env = {"PRECIS_CONTEXT_WINDOW": "3000", "PRECIS_TURN_LIMIT": "7", "PRECIS_PIN_TASK": "no"}
    loaded = load(
        tmp_path,
        home_toml=home_toml,
        cwd_toml=cwd_toml,
        env=env,
        overrides={"context_window": 4000},
    )
    s, src = loaded.settings, loaded.sources
    home_file = str(tmp_path / "home" / "precis.toml")
    cwd_file = str(tmp_path / "cwd" / "precis.toml")
    assert (s.context_window, src["context_window"]) == (4000, "option --context-window")
    assert (s.turn_limit, src["turn_limit"]) == (7, "env PRECIS_TURN_LIMIT")
    assert (s.pin_task, src["pin_task"]) == (False, "env PRECIS_PIN_TASK")
    assert (s.summary_style, src["summary_style"]) == ("notes", cwd_file)
    assert (s.clip_chars, src["clip_chars"]) == (300, home_file)
    assert (s.reserve_floor, src["reserve_floor"]) == (True, home_file)
    assert (s.hard_watermark, src["hard_watermark"]) == (0.95, "default")


def test_home_and_cwd_the_same_directory_is_read_once(tmp_path: Path) -> None:
    write_toml(tmp_path, "[compaction]\nturn_limit = 3\n")
    loaded = load_settings(home=tmp_path, cwd=tmp_path, env={})
    assert loaded.settings.turn_limit == 3
    assert loaded.sources["turn_limit"] == str(tmp_path / "precis.toml")


def test_hooks_table_fills_the_tuple_fields(tmp_path: Path) -> None:
    toml = (
        '[hooks]\npre_compact = "./check.sh --strict"\n'
        'post_compact = ["notify-send done", "echo ok"]\ntimeout = 5\n'
    )
    trust(write_toml(tmp_path / "cwd", toml), tmp_path / "home")  # a project's hooks need trust
    loaded = load(tmp_path, cwd_toml=toml)
    s = loaded.settings
    assert s.pre_compact_hooks == ("./check.sh --strict",)
    assert s.post_compact_hooks == ("notify-send done", "echo ok")
    assert s.hook_timeout == 5.0 and isinstance(s.hook_timeout, float)
    cwd_file = str(tmp_path / "cwd" / "precis.toml")
    assert loaded.sources["pre_compact_hooks"] == loaded.sources["hook_timeout"] == cwd_file


def test_hooks_from_the_environment(tmp_path: Path) -> None:
    env = {
        "PRECIS_PRE_COMPACT_HOOKS": "echo one",
        "PRECIS_POST_COMPACT_HOOKS": '["a", "b c"]',
        "PRECIS_HOOK_TIMEOUT": "2.5",
    }
    s = load(tmp_path, cwd_toml='[hooks]\npre_compact = "x"\n', env=env).settings
    assert s.pre_compact_hooks == ("echo one",)
    assert s.post_compact_hooks == ("a", "b c")
    assert s.hook_timeout == 2.5
    cleared = load(tmp_path, env={"PRECIS_PRE_COMPACT_HOOKS": "none"}).settings
    assert cleared.pre_compact_hooks == ()


def test_every_field_has_a_precis_variable_parsed_by_its_type(tmp_path: Path) -> None:
    env = {
        "PRECIS_SOFT_WATERMARK": "0.8",
        "PRECIS_TOOL_OUTPUT_MAX_CHARS": "none",
        "PRECIS_USER_BOUNDARY_FALLBACK": "yes",
        "PRECIS_RESERVE_FLOOR": "1",
        "PRECIS_MERGE_POLICY": "anchored",
        "PRECIS_SUMMARY_TIMEOUT": "none",
        "PRECIS_CLIP_CHARS": "",  # empty counts as unset
    }
    loaded = load(tmp_path, cwd_toml="[compaction]\nclip_chars = 99\n", env=env)
    s = loaded.settings
    assert s.soft_watermark == 0.8 and s.tool_output_max_chars is None
    assert s.user_boundary_fallback is True and s.reserve_floor is True
    assert s.merge_policy == "anchored" and s.summary_timeout is None
    assert s.clip_chars == 99
    assert loaded.sources["tool_output_max_chars"] == "env PRECIS_TOOL_OUTPUT_MAX_CHARS"
    assert {env_name(f.name) for f in fields(CompactionSettings)} >= {
        "PRECIS_CONTEXT_WINDOW",
        "PRECIS_SOFT_WATERMARK",
        "PRECIS_HOOK_TIMEOUT",
    }


def test_none_in_toml_unsets_an_optional_field(tmp_path: Path) -> None:
    toml = '[compaction]\ntool_output_max_chars = "none"\n'
    assert load(tmp_path, cwd_toml=toml).settings.tool_output_max_chars is None


def test_a_soft_watermark_in_home_can_be_fixed_by_the_cwd_file(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        home_toml="[compaction]\nsoft_watermark = 1.2\n",
        cwd_toml="[compaction]\nsoft_watermark = 0.8\n",
    )
    assert loaded.settings.soft_watermark == 0.8


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        (
            "[compaction]\nsoft_watermark = 1.2\n",
            "[compaction] soft_watermark: must be between 0 and hard_watermark (0.95), got 1.2",
        ),
        ("[compaction]\nhard_watermark = 0\n", "[compaction] hard_watermark: must be in (0, 1]"),
        ("[compaction]\nsoft_watermarks = 0.8\n", "[compaction] soft_watermarks: unknown setting"),
        ("[compaction]\ncontext_window = '8000'\n", "[compaction] context_window: expected an"),
        ("[compaction]\ncontext_window = 8000.5\n", "[compaction] context_window: expected an"),
        ("[compaction]\nturn_limit = true\n", "[compaction] turn_limit: expected an integer"),
        ("[compaction]\npin_task = 'yes'\n", "[compaction] pin_task: expected true or false"),
        ("[compaction]\nsummary_style = 'haiku'\n", "[compaction] summary_style: must be one of"),
        ("[compaction]\nturn_limit = 0\n", "[compaction] turn_limit: must be positive, got 0"),
        ("[hooks]\npre_compact = 3\n", "[hooks] pre_compact: expected a command"),
        ("[hooks]\npost_compact = ['ok', 1]\n", "[hooks] post_compact: expected a command"),
        ("[hooks]\ntimeout = -1\n", "[hooks] timeout: must be a positive number of seconds"),
        ("[hooks]\nretries = 2\n", "[hooks] retries: unknown setting"),
        ("[compactoin]\nturn_limit = 3\n", "unknown table [compactoin]"),
        ("compaction = 3\n", "[compaction] must be a table"),
        ("[compaction\nturn_limit = 3\n", "invalid TOML"),
        ("[compaction]\nturn_limit = 3\nturn_limit = 4\n", "invalid TOML"),
    ],
)
def test_bad_files_name_the_file_and_the_key(tmp_path: Path, toml: str, needle: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load(tmp_path, cwd_toml=toml)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'cwd' / 'precis.toml'}: "), message
    assert needle in message, message


def test_a_bad_home_file_names_the_home_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"home/precis.toml: \[compaction\] turn_limit"):
        load(tmp_path, home_toml="[compaction]\nturn_limit = -3\n", cwd_toml="")


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"did you mean soft_watermark\?"):
        load(tmp_path, cwd_toml="[compaction]\nsoft_watermak = 0.8\n")


def test_a_key_set_twice_in_one_file_is_an_error(tmp_path: Path) -> None:
    toml = "[compaction]\nhook_timeout = 3\n[hooks]\ntimeout = 4\n"
    with pytest.raises(SettingsError, match=r"\[hooks\] timeout: hook_timeout is already set"):
        load(tmp_path, cwd_toml=toml)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"PRECIS_SOFT_WATERMARK": "1.2"}, "PRECIS_SOFT_WATERMARK: must be between 0 and"),
        ({"PRECIS_SOFT_WATERMARK": "high"}, "PRECIS_SOFT_WATERMARK: expected a number"),
        ({"PRECIS_CONTEXT_WINDOW": "8k"}, "PRECIS_CONTEXT_WINDOW: expected an integer"),
        ({"PRECIS_HARD_WATERMARK": "none"}, "PRECIS_HARD_WATERMARK: expected a number"),
        ({"PRECIS_PIN_TASK": "maybe"}, "PRECIS_PIN_TASK: expected true/false"),
        ({"PRECIS_MERGE_POLICY": "patch"}, "PRECIS_MERGE_POLICY: must be one of"),
        ({"PRECIS_PRE_COMPACT_HOOKS": "[1, 2]"}, "PRECIS_PRE_COMPACT_HOOKS: expected a command"),
        ({"PRECIS_PRE_COMPACT_HOOKS": "[oops"}, "PRECIS_PRE_COMPACT_HOOKS: invalid JSON"),
    ],
)
def test_bad_environment_names_the_variable(
    tmp_path: Path, env: dict[str, str], needle: str
) -> None:
    with pytest.raises(SettingsError, match=r"^PRECIS_") as caught:
        load(tmp_path, env=env)
    assert needle in str(caught.value)


def test_bad_overrides_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"^option --context-window: must be positive"):
        load(tmp_path, overrides={"context_window": 0})
    with pytest.raises(SettingsError, match=r"^option --turn-limits: unknown setting"):
        load(tmp_path, overrides={"turn_limits": 3})


def test_other_precis_variables_are_ignored(tmp_path: Path) -> None:
    env = {"PRECIS_HOME": "/x", "PRECIS_STORE": "memory:", "PRECIS_MODEL": "m"}
    assert load(tmp_path, env=env).settings == CompactionSettings()


# --- `precis config` as a user runs it ----------------------------------------------------------


def run_config(home: Path, cwd: Path, *args: str, env: dict[str, str] | None = None) -> Ran:
    """Run `precis ARGS` in `cwd` with no PRECIS_* variables but PRECIS_HOME and `env`."""
    return run_precis(home, *args, cwd=cwd, env=env, clear_all=True, check=False)


def test_precis_config_json_shows_values_and_sources(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home_file = write_toml(home, "[compaction]\nturn_limit = 12\ncontext_window = 1000\n")
    cwd_file = write_toml(
        cwd,
        "[compaction]\nsoft_watermark = 0.8\ncontext_window = 4000\n"
        '[hooks]\npre_compact = "echo hi"\n',
    )
    trust(cwd_file, home)  # a project's hooks count once the user trusts the file
    result = run_config(home, cwd, "config", "--json", env={"PRECIS_HARD_WATERMARK": "0.9"})
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert set(rows) == {f.name for f in fields(CompactionSettings)}
    assert rows["context_window"] == {"value": 4000, "source": str(cwd_file)}
    assert rows["soft_watermark"] == {"value": 0.8, "source": str(cwd_file)}
    assert rows["turn_limit"] == {"value": 12, "source": str(home_file)}
    assert rows["hard_watermark"] == {"value": 0.9, "source": "env PRECIS_HARD_WATERMARK"}
    assert rows["pre_compact_hooks"] == {"value": ["echo hi"], "source": str(cwd_file)}
    assert rows["summary_style"] == {"value": "letta", "source": "default"}

    option = run_config(home, cwd, "--context-window", "9000", "config", "--json")
    assert json.loads(option.stdout)["context_window"] == {
        "value": 9000,
        "source": "option --context-window",
    }
    env = run_config(home, cwd, "config", "--json", env={"PRECIS_CONTEXT_WINDOW": "5000"})
    assert json.loads(env.stdout)["context_window"] == {
        "value": 5000,
        "source": "env PRECIS_CONTEXT_WINDOW",
    }


def test_precis_config_without_a_window_uses_the_cli_default(tmp_path: Path) -> None:
    result = run_config(tmp_path / "home", tmp_path, "config", "--json")
    assert json.loads(result.stdout)["context_window"] == {"value": 8000, "source": "default"}


def test_precis_config_table_lists_every_setting_and_its_source(tmp_path: Path) -> None:
    cwd_file = write_toml(tmp_path / "work", "[compaction]\nturn_limit = 12\n")
    result = run_config(tmp_path / "home", tmp_path / "work", "config")
    assert result.returncode == 0, result.stderr
    for f in fields(CompactionSettings):
        assert f.name in result.stdout
    flat = "".join(c for c in result.stdout if not c.isspace() and c != "│")
    assert "".join(str(cwd_file).split()) in flat  # a long path may fold across lines
    assert "summarize above 6800 tokens, truncate above 7600 tokens" in result.stdout


def test_a_bad_precis_toml_exits_2_naming_the_key(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    write_toml(cwd, "[compaction]\nsoft_watermark = 1.2\n")
    for args in (("config",), ("config", "--json"), ("context",)):
        result = run_config(tmp_path / "home", cwd, *args)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("precis: invalid setting: ")
        assert "precis.toml: [compaction] soft_watermark" in lines[0]
        assert result.stdout == ""


def test_a_bad_variable_exits_2_naming_it(tmp_path: Path) -> None:
    result = run_config(tmp_path, tmp_path, "config", env={"PRECIS_TURN_LIMIT": "often"})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "precis: invalid setting: PRECIS_TURN_LIMIT: expected an integer or \"none\", got 'often'"
    )


HUGE = str(10**22)


@pytest.mark.parametrize(
    ("where", "label"),
    [
        ("option", "option --context-window"),
        ("variable", "PRECIS_CONTEXT_WINDOW"),
        ("file", "precis.toml: [compaction] context_window"),
    ],
)
def test_a_huge_window_is_refused_before_a_turn_writes_anything(
    tmp_path: Path, where: str, label: str
) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    assert run_config(home, cwd, "chat", "-p", "the port is 5433").returncode == 0
    history = run_config(home, cwd, "history", "--json").stdout
    options = ["--context-window", HUGE] if where == "option" else []
    env = {"PRECIS_CONTEXT_WINDOW": HUGE} if where == "variable" else None
    if where == "file":
        write_toml(cwd, f"[compaction]\ncontext_window = {HUGE}\n")
    result = run_config(home, cwd, *options, "chat", "-p", "and again?", env=env)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("precis: invalid setting: ")
    assert line.endswith(
        f"{label}: must be at most 1,000,000,000, got 10,000,000,000,000,000,000,000"
    )
    (cwd / "precis.toml").unlink(missing_ok=True)
    assert run_config(home, cwd, "history", "--json").stdout == history


def test_the_service_refuses_a_huge_window_before_it_listens(tmp_path: Path) -> None:
    # As a subprocess: were the window accepted, the service would start and the run time out.
    result = run_precis(
        tmp_path / "home",
        "--context-window",
        HUGE,
        "serve",
        "--port",
        "0",
        check=False,
        subprocess=True,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "precis: invalid setting: option --context-window: must be at most 1,000,000,000, "
        "got 10,000,000,000,000,000,000,000"
    ]
    assert not (tmp_path / "home" / "precis.db").exists()
