"""What a tool call's arguments name: paths it reads or writes, identifiers it passes, and the
code names in what it writes or says (a body, a sub-agent's prompt, a commit's message)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from precis.facts.patterns import BODY_KEYS, ID_KEY_RE, ID_VALUE_RE, PATH_KEYS, PROSE_KEYS
from precis.facts.tally import W_ARGS, W_OUTPUT, W_SPOKEN
from precis.facts.terms import clean_path, message_symbols, scalars, symbols_in, terms_in


@dataclass(frozen=True, slots=True)
class ArgTerm:
    """A term a call's argument names; `gate` says how the collector files it.

    "id" and "term-id" are identifiers; "path" is a path argument (read unless the call writes
    it, and the file a viewer now has open); "term-path" a path mentioned in an argument.
    """

    gate: str
    key: str
    label: str
    weight: int
    kind: str = "path"


def arg_terms(data: Any) -> tuple[ArgTerm, ...]:
    """Paths read and identifiers named in a call's arguments; file bodies count as output."""
    out: list[ArgTerm] = []
    for key, value in scalars(data):
        lkey = key.lower()
        if ID_KEY_RE.search(lkey) and ID_VALUE_RE.match(value) and "/" not in value:
            out.append(ArgTerm("id", value, f"{key}={value}", W_ARGS, "arg"))
        if lkey in PATH_KEYS:
            path = clean_path(value.strip())
            if path is not None:
                out.append(ArgTerm("path", path, path, W_ARGS))
            continue
        body = lkey in BODY_KEYS
        for kind, term, label in terms_in(value, prose=body):
            if kind != "path":
                out.append(ArgTerm("term-id", term, label, W_OUTPUT if body else W_ARGS, kind))
            else:
                out.append(ArgTerm("term-path", term, label, W_OUTPUT if body else W_SPOKEN))
    return tuple(out)


def code_symbols(data: Any, command: str = "") -> tuple[ArgTerm, ...]:
    """Code names in the bodies a call writes, in the words it sends (a sub-agent's prompt) and
    in the message a command carries: what the agent writes names what the work is about, so
    each counts as a use."""
    written = [
        found
        for key, value in scalars(data)
        if key.lower() in BODY_KEYS or key.lower() in PROSE_KEYS
        for found in symbols_in(value, code=key.lower() in BODY_KEYS)
    ]
    said = message_symbols(command)
    return tuple(ArgTerm("term-id", t, label, W_SPOKEN, k) for k, t, label in (*written, *said))
