"""Compaction settings: one explicit object, letta's behaviour by default, loadable from files."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import tomllib
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from precis.core.errors import InvalidSetting, SettingsError
from precis.core.tokens import letta_threshold
from precis.core.types import MERGE_POLICIES, SUMMARY_STYLES, MergePolicy, SummaryStyle
from precis.summarize.packaging import default_clip_chars
from precis.summarize.transcript import DEFAULT_TOOL_RESULT_CHARS

# The ceiling of every count setting (tokens, characters, lines, turns): a billion is past any
# model's window, and every store's integer columns hold it.
MAX_SETTING_COUNT = 1_000_000_000
# Retrying a failed summary or a lost commit more often than this only delays the error.
MAX_RETRIES = 100
# The longest wait a timeout may ask for: a week (the OS's own timeouts overflow far above it).
MAX_SECONDS = 7 * 24 * 3600.0
# Where the default policy compacts when no soft watermark is set: later than letta's 80 %, so
# that, landing at the low watermark, each compaction frees more and they come less often
# (letta's own threshold where it is later, in windows over about 109k).
DEFAULT_SOFT_WATERMARK = 0.85
# The system_alert JSON around a summary ("Note: N messages … hidden …", time, stats), in tokens.
SUMMARY_WRAPPER_TOKENS = 64


# Where settings come from, weakest first: defaults, HOME/precis.toml, CWD/precis.toml,
# PRECIS_<FIELD> environment variables, explicit overrides (command-line options).
SETTINGS_FILE = "precis.toml"
ENV_PREFIX = "PRECIS_"
SOURCE_DEFAULT = "default"
COMPACTION_TABLE = "compaction"
HOOKS_TABLE = "hooks"
# [hooks] keys in precis.toml and the fields they set.
HOOK_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "pre_compact": "pre_compact_hooks",
        "post_compact": "post_compact_hooks",
        "timeout": "hook_timeout",
    }
)
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})
NONE_WORD = "none"


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """How and when to compact one conversation.

    `clip_chars=None` scales the summary budget to the window (max(200, window*4*0.1) chars), so
    a disobedient model cannot refill a small window. `reserved_tokens=0` keeps letta's exact
    planner; a positive value reserves that much room. `reserve_floor` also reserves what every
    request carries besides the messages (system prompt, tool definitions) plus room for the
    summary itself, so the kept tail really fits and compaction stops sawing every few turns.

    `soft_watermark` (a fraction of the window) triggers a compaction; unset, it is 85 % of the
    window (or letta's threshold where that is later), and letta's threshold under letta's
    policy. `hard_watermark` triggers an immediate truncation without a model call. A
    compaction aims at `low_watermark` (a fraction of the window, default 40 %): it masks old
    tool outputs, or summarizes, or drops, down to there, so that each one frees real room;
    `low_watermark=None` is letta's policy (its sliding window, which keeps just under the
    threshold). `turn_limit` compacts after that many turns since the last compaction. With
    `background_compaction` (the default) an async session (the integrations, the service) makes
    that summary behind the turn, which waits for it only over the hard watermark; a sync
    `Session` always compacts within the call. Tool outputs longer than `tool_output_max_chars`
    are shown as head+tail lines (None: never shortened);
    `mask_after_turns` masks tool outputs older than that many turns before summarizing.
    Hooks are shell commands run before/after a compaction, each within `hook_timeout` seconds.
    `guard` appends the task and the users' red lines verbatim to a summary that dropped them;
    without it such a summary fails verification and the next fallback runs.
    A summarizer that fails is asked again up to `summary_retries` times (not when it ran out of
    `summary_timeout` or said the request is too big), then the extractive brief stands in.
    """

    context_window: int | None = None
    sliding_window_percentage: float | None = None
    reserved_tokens: int = 0
    reserve_floor: bool = False
    user_boundary_fallback: bool = False
    clip_chars: int | None = None
    tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS
    summary_timeout: float | None = 300.0
    summary_retries: int = 2
    commit_retries: int = 1
    soft_watermark: float | None = None
    hard_watermark: float = 0.95
    low_watermark: float | None = 0.4
    background_compaction: bool = True
    turn_limit: int | None = None
    tool_output_max_chars: int | None = 20000
    tool_output_head_lines: int = 40
    tool_output_tail_lines: int = 20
    mask_after_turns: int | None = None
    summary_style: SummaryStyle = "letta"
    merge_policy: MergePolicy = "regenerate"
    pin_task: bool = True
    guard: bool = True
    pre_compact_hooks: tuple[str, ...] = ()
    post_compact_hooks: tuple[str, ...] = ()
    hook_timeout: float = 30.0

    def __post_init__(self) -> None:
        _count("context_window", self.context_window, 1, "must be positive")
        _count("reserved_tokens", self.reserved_tokens, 0, "must be >= 0")
        _count("clip_chars", self.clip_chars, 1, "must be >= 1")
        _count("tool_result_chars", self.tool_result_chars, 0, "must be >= 0")
        _positive_seconds("summary_timeout", self.summary_timeout)
        _count("summary_retries", self.summary_retries, 0, "must be >= 0", MAX_RETRIES)
        _count("commit_retries", self.commit_retries, 0, "must be >= 0", MAX_RETRIES)
        hard = self.hard_watermark
        if not 0 < hard <= 1:
            raise InvalidSetting("hard_watermark", f"must be in (0, 1], got {hard}")
        soft = self.soft_watermark
        if soft is not None and not 0 < soft < hard:
            raise InvalidSetting(
                "soft_watermark", f"must be between 0 and hard_watermark ({hard}), got {soft}"
            )
        low = self.low_watermark
        if low is not None and not (
            isinstance(low, int | float) and not isinstance(low, bool) and 0 < low < hard
        ):
            raise InvalidSetting(
                "low_watermark", f"must be between 0 and hard_watermark ({hard}), got {low!r}"
            )
        _count("turn_limit", self.turn_limit, 1, "must be positive")
        _count("tool_output_max_chars", self.tool_output_max_chars, 1, "must be positive")
        _count("tool_output_head_lines", self.tool_output_head_lines, 1, "must be positive")
        _count("tool_output_tail_lines", self.tool_output_tail_lines, 1, "must be positive")
        _count("mask_after_turns", self.mask_after_turns, 1, "must be positive")
        _one_of("summary_style", self.summary_style, SUMMARY_STYLES)
        _one_of("merge_policy", self.merge_policy, MERGE_POLICIES)
        _commands("pre_compact_hooks", self.pre_compact_hooks)
        _commands("post_compact_hooks", self.post_compact_hooks)
        _positive_seconds("hook_timeout", self.hook_timeout)

    @property
    def effective_clip_chars(self) -> int:
        return (
            self.clip_chars
            if self.clip_chars is not None
            else default_clip_chars(self.context_window)
        )

    def planner_reserve(self, floor_tokens: int) -> int:
        """Tokens the sliding planner must leave free besides the kept tail."""
        if not self.reserve_floor:
            return self.reserved_tokens
        summary = self.effective_clip_chars // 4 + SUMMARY_WRAPPER_TOKENS
        return self.reserved_tokens + floor_tokens + summary

    @property
    def threshold(self) -> int | None:
        """Tokens above which to compact: floor(soft * W); unset, letta's W - min(16384, …)
        under letta's policy, else the later of that and `DEFAULT_SOFT_WATERMARK` (never past
        the hard watermark)."""
        window = self.context_window
        if window is None:
            return None
        if self.soft_watermark is not None:
            return math.floor(self.soft_watermark * window)
        letta = letta_threshold(window)
        if self.low_watermark is None or letta is None:
            return letta
        later = max(letta, math.floor(DEFAULT_SOFT_WATERMARK * window))
        return min(later, math.floor(self.hard_watermark * window))

    @property
    def target(self) -> int | None:
        """Tokens a compaction aims to leave: floor(low * W), never above the threshold; the
        threshold itself under letta's policy (`low_watermark=None`). None without a window."""
        threshold = self.threshold
        if threshold is None or self.low_watermark is None or self.context_window is None:
            return threshold
        return min(threshold, math.floor(self.low_watermark * self.context_window))

    def target_reserve(self, floor_tokens: int) -> int:
        """What stays beside the kept tail when planning to the target: the system prompt and
        tools, and room for the summary (its clip at four characters a token, and its wrapper)."""
        return floor_tokens + self.effective_clip_chars // 3 + SUMMARY_WRAPPER_TOKENS

    @property
    def hard_limit(self) -> int | None:
        """Tokens above which to truncate at once, without a model call: floor(hard * W)."""
        if self.context_window is None:
            return None
        return math.floor(self.hard_watermark * self.context_window)


def _count(key: str, value: int | None, low: int, rule: str, high: int = MAX_SETTING_COUNT) -> None:
    """Refuse an int below its floor or above a sane ceiling (None means unset), naming the key,
    so a mistyped window is refused up front, not after something was written with it."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidSetting(key, f"must be an integer, got {value!r}")
    if value < low:
        raise InvalidSetting(key, f"{rule}, got {value}")
    if value > high:
        raise InvalidSetting(key, f"must be at most {high:,}, got {value:,}")


def _positive_seconds(key: str, value: float | None) -> None:
    """Refuse a duration that is not a positive number of seconds up to a week."""
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidSetting(key, f"must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise InvalidSetting(
            key, f"must be a positive number of seconds up to {MAX_SECONDS:,g}, got {value}"
        )


def _one_of(key: str, value: str, choices: tuple[str, ...]) -> None:
    """Reject a word the engine does not know, listing the ones it does."""
    if value not in choices:
        raise InvalidSetting(key, f"must be one of {', '.join(choices)}, got {value!r}")


def _commands(key: str, value: tuple[str, ...]) -> None:
    """Hooks must be a tuple of non-empty command strings (a tuple keeps settings hashable)."""
    if not isinstance(value, tuple) or not all(isinstance(c, str) and c.strip() for c in value):
        raise InvalidSetting(key, f"must be a tuple of non-empty commands, got {value!r}")


# --- Loading: precis.toml files, PRECIS_* variables and explicit overrides -----------------------


@dataclass(frozen=True, slots=True)
class LoadedSettings:
    """The effective settings and, per field, where its value came from (for `precis config`);
    `warnings` are lines a face shows once (untrusted hooks left out, a mistyped variable)."""

    settings: CompactionSettings
    sources: dict[str, str]
    warnings: tuple[str, ...] = ()


# Hooks run shell commands: from a project's precis.toml only once the user trusts that file.
HOOK_FIELDS = ("pre_compact_hooks", "post_compact_hooks")
# Under the home: one `sha256:HEX PATH` line per project file the user trusts.
TRUST_FILE = "trusted"


def file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def is_trusted(path: Path, home: Path) -> bool:
    """Whether the user trusted this file as it is now (a changed file needs trust again)."""
    record = home / TRUST_FILE
    if not record.is_file():
        return False
    line = f"{file_digest(path)} {path.resolve()}"
    return line in record.read_text(encoding="utf-8").splitlines()


def trust(path: Path, home: Path) -> str:
    """Record that the user trusts this file's current contents; returns the recorded line."""
    line = f"{file_digest(path)} {path.resolve()}"
    if not is_trusted(path, home):
        home.mkdir(parents=True, exist_ok=True)
        with (home / TRUST_FILE).open("a", encoding="utf-8") as record:
            record.write(line + "\n")
    return line


@dataclass(frozen=True, slots=True)
class _Kind:
    """What a field accepts, derived from its annotation so new fields load without a table."""

    base: type
    optional: bool


@dataclass(frozen=True, slots=True)
class _Layer:
    """One source's values, each with its source for `precis config` and its label for errors."""

    values: dict[str, Any]
    sources: dict[str, str]
    labels: dict[str, str]


def load_settings(
    *,
    home: Path,
    cwd: Path,
    env: Mapping[str, str],
    overrides: Mapping[str, Any] | None = None,
    other_variables: Iterable[str] = (),
) -> LoadedSettings:
    """Merge defaults < HOME/precis.toml < CWD/precis.toml < PRECIS_* < overrides, validated.

    Hooks in the project's file (CWD) count only if the user trusted it (`trust`); a PRECIS_*
    variable that is neither a setting nor in `other_variables` is named in a warning.
    """
    kinds = _kinds()
    layers: list[_Layer] = []
    warnings: list[str] = []
    seen: set[Path] = set()
    for directory in (home, cwd):
        path = directory / SETTINGS_FILE
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        if path.is_file():
            layer = _file_layer(path, kinds)
            hooks = [name for name in HOOK_FIELDS if layer.values.get(name)]
            if directory is cwd and hooks and not is_trusted(path, home):
                for name in hooks:
                    del layer.values[name], layer.sources[name]
                warnings.append(
                    f"{path}: hooks left out: this project file is not trusted "
                    f"(run `precis trust {path}` after reading it)"
                )
            layers.append(layer)
    layers.append(_env_layer(env, kinds))
    warnings += _unknown_variables(env, kinds, other_variables)
    layers.append(_override_layer(overrides or {}, kinds))

    values: dict[str, Any] = {}
    sources = {name: SOURCE_DEFAULT for name in kinds}
    labels = {name: name for name in kinds}
    for layer in layers:
        values.update(layer.values)
        labels.update(layer.labels)
        sources.update(layer.sources)
    try:
        settings = CompactionSettings(**values)
    except InvalidSetting as exc:
        raise SettingsError(f"{labels[exc.key]}: {exc.reason}") from None
    return LoadedSettings(settings, sources, tuple(warnings))


def _unknown_variables(
    env: Mapping[str, str], kinds: Mapping[str, _Kind], others: Iterable[str]
) -> list[str]:
    """A line per PRECIS_* variable nobody reads: usually a typo, which would pass unnoticed."""
    known = {env_name(name) for name in kinds} | set(others)
    return [
        f"{variable} is not a precis setting and is ignored{_suggest(variable, known)}"
        for variable in sorted(env)
        if variable.startswith(ENV_PREFIX) and variable not in known
    ]


def env_name(field_name: str) -> str:
    """The environment variable that sets a field: PRECIS_<FIELD_UPPER>."""
    return ENV_PREFIX + field_name.upper()


def option_name(field_name: str) -> str:
    """The command-line option that overrides a field: --field-name."""
    return "--" + field_name.replace("_", "-")


def _kinds() -> dict[str, _Kind]:
    """Each field's accepted type, read from the dataclass annotations."""
    hints = get_type_hints(CompactionSettings)
    kinds: dict[str, _Kind] = {}
    for f in fields(CompactionSettings):
        hint = hints[f.name]
        optional = False
        if get_origin(hint) in (Union, types.UnionType):
            args = [a for a in get_args(hint) if a is not type(None)]
            optional = len(args) < len(get_args(hint))
            hint = args[0]
        origin = get_origin(hint)
        base = str if origin is Literal else tuple if origin is tuple else hint
        kinds[f.name] = _Kind(base, optional)
    return kinds


def _file_layer(path: Path, kinds: Mapping[str, _Kind]) -> _Layer:
    """Read one precis.toml: [compaction] fields and [hooks] pre_compact/post_compact/timeout."""
    where = str(path)
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{where}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{where}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise SettingsError(f"{where}: cannot read: {exc.strerror or exc}") from None
    for table in data:
        if table not in (COMPACTION_TABLE, HOOKS_TABLE):
            raise SettingsError(
                f"{where}: unknown table [{table}]; expected [{COMPACTION_TABLE}] or "
                f"[{HOOKS_TABLE}]"
            )
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    keymaps = ((COMPACTION_TABLE, {k: k for k in kinds}), (HOOKS_TABLE, dict(HOOK_KEYS)))
    for table, keymap in keymaps:
        section = data.get(table, {})
        if not isinstance(section, dict):
            raise SettingsError(f"{where}: [{table}] must be a table, got {section!r}")
        for key, raw in section.items():
            label = f"{where}: [{table}] {key}"
            if key not in keymap:
                raise SettingsError(f"{label}: unknown setting{_suggest(key, keymap)}")
            name = keymap[key]
            if name in values:
                raise SettingsError(f"{label}: {name} is already set in {labels[name]}")
            values[name] = _checked(raw, kinds[name], label)
            labels[name] = label
    return _Layer(values, dict.fromkeys(values, where), labels)


def _env_layer(env: Mapping[str, str], kinds: Mapping[str, _Kind]) -> _Layer:
    """PRECIS_<FIELD> variables, parsed by the field's type; an empty variable counts as unset."""
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for name, kind in kinds.items():
        variable = env_name(name)
        text = env.get(variable, "").strip()
        if text:
            values[name] = _parse_env(text, kind, variable)
            labels[name] = variable
    return _Layer(values, {name: f"env {label}" for name, label in labels.items()}, labels)


def _override_layer(overrides: Mapping[str, Any], kinds: Mapping[str, _Kind]) -> _Layer:
    """Explicit values (command-line options), type-checked like a file's."""
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for name, raw in overrides.items():
        label = f"option {option_name(name)}"
        if name not in kinds:
            raise SettingsError(f"{label}: unknown setting{_suggest(name, kinds)}")
        values[name] = _checked(raw, kinds[name], label)
        labels[name] = label
    return _Layer(values, dict(labels), labels)


def _checked(raw: Any, kind: _Kind, label: str) -> Any:
    """A TOML or Python value of the field's type; "none" (or None) unsets an optional field."""
    if kind.optional and (raw is None or (isinstance(raw, str) and raw.lower() == NONE_WORD)):
        return None
    if kind.base is bool:
        if isinstance(raw, bool):
            return raw
        raise SettingsError(f"{label}: expected true or false, got {raw!r}")
    if kind.base is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        raise SettingsError(f"{label}: expected an integer{_or_none(kind)}, got {raw!r}")
    if kind.base is float:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        raise SettingsError(f"{label}: expected a number{_or_none(kind)}, got {raw!r}")
    if kind.base is tuple:
        if isinstance(raw, str):
            return (raw,)
        if isinstance(raw, list | tuple) and all(isinstance(c, str) for c in raw):
            return tuple(raw)
        raise SettingsError(f"{label}: expected a command or a list of commands, got {raw!r}")
    if isinstance(raw, str):
        return raw
    raise SettingsError(f"{label}: expected a string, got {raw!r}")


def _parse_env(text: str, kind: _Kind, variable: str) -> Any:
    """An environment string as the field's type: numbers, true/false/yes/no/1/0, or "none"."""
    if kind.optional and text.lower() == NONE_WORD:
        return None
    if kind.base is bool:
        word = text.lower()
        if word in TRUE_WORDS | FALSE_WORDS:
            return word in TRUE_WORDS
        raise SettingsError(f"{variable}: expected true/false/yes/no/1/0, got {text!r}")
    if kind.base is int:
        try:
            return int(text)
        except ValueError:
            raise SettingsError(
                f"{variable}: expected an integer{_or_none(kind)}, got {text!r}"
            ) from None
    if kind.base is float:
        try:
            return float(text)
        except ValueError:
            raise SettingsError(
                f"{variable}: expected a number{_or_none(kind)}, got {text!r}"
            ) from None
    if kind.base is tuple:
        if text.lower() == NONE_WORD:
            return ()
        if not text.startswith("["):
            return (text,)
        try:
            commands = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SettingsError(f"{variable}: invalid JSON list: {exc}") from None
        return _checked(commands, kind, variable)
    return text


def _or_none(kind: _Kind) -> str:
    return ' or "none"' if kind.optional else ""


def _suggest(key: str, known: Iterable[str]) -> str:
    """A "did you mean" hint for a misspelt key, since typos are the usual cause."""
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
