"""Loading settings, the CLI's job: precis.toml files (a project's hooks only once the user
trusts the file), PRECIS_* variables and command-line options, merged over the defaults into
the plain `CompactionSettings` the library takes, each field with where its value came from."""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from precis.core.errors import InvalidSetting, SettingsError
from precis.engine.settings import CompactionSettings

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
