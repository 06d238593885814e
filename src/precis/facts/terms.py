"""Terms in text: file paths, identifiers (URLs, ports, tickets, hashes …), errors, tool arguments.

Pure functions of their input; the collector calls them once per message (see `scan`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from precis.core.jscompat import utf16_len
from precis.core.memo import CALL_ENTRIES, Bounded
from precis.core.messages import parse_json
from precis.facts.patterns import (
    BACKTICK_RE,
    BUILD_OUTPUT_RE,
    CODE_LINE_RE,
    CODE_STRING_RE,
    DIGIT_RE,
    DIGITS_RE,
    EMAIL_RE,
    ERROR_CLASS_RE,
    ERROR_MARK_RE,
    ERROR_PREFIX_RE,
    ERROR_STRONG_RE,
    ERROR_TAG_RE,
    HEREDOC_RE,
    HOST_RE,
    JIRA_STOP,
    MAX_IDENTIFIER_UNITS,
    MAX_SYMBOL_UNITS,
    MOVE_RE,
    NON_ASCII_RE,
    NUMBER_AFTER_RE,
    NUMBER_PREFIX_RE,
    NUMBERED_LINE_RE,
    PATH_EXT_RE,
    PATH_KEYS,
    PATH_RE,
    PORT_AFTER_RE,
    PORT_WORDS,
    QUOTED_RE,
    REDIRECT_RE,
    SED_INPLACE_RE,
    SOURCE_DIRS,
    SUBTOKEN_SPLIT_RE,
    SUMMARY_ARG_KEYS,
    SYMBOL_RE,
    SYSTEM_DIRS,
    TEE_TOUCH_RE,
    TICKET_WORDS,
    TOKEN_ID_RE,
    TOKEN_STRIP,
    URL_PORT_RE,
    URL_RE,
    WARNING_LINE_RE,
    ZH_PORT_RE,
)
from precis.facts.text import one_line, shorten


def clean_path(raw: str, *, prose: bool = False) -> str | None:
    """A path candidate kept only when it looks like a file or directory, not prose like and/or.

    In prose a relative path needs a file extension; in tool arguments three segments will do.
    """
    path = raw.rstrip(".,;:)]}'\"`").rstrip("/")
    if path.startswith(("a/", "b/")) and path.count("/") >= 2:
        path = path[2:]  # a diff's a/ and b/ sides name the same file
    if not path or "//" in path or path.startswith(("/dev/", "/proc/")):
        return None
    if BUILD_OUTPUT_RE.search(path):
        return None
    if not any(ch.isalpha() for ch in path):
        return None
    segments = [s for s in path.split("/") if s]
    if not segments:
        return None
    has_ext = PATH_EXT_RE.search(segments[-1]) is not None
    if "/" not in path:
        return path if has_ext else None
    anchored = path.startswith(("/", "~/", "./", "../"))
    if anchored:
        return path if len(segments) >= 2 or has_ext else None
    return path if has_ext or (len(segments) >= 3 and not prose) else None


def paths_in(text: str, *, prose: bool = False) -> Iterator[str]:
    """Every file path mentioned in `text`, URLs aside."""
    for kind, key, _ in terms_in(text, prose=prose):
        if kind == "path":
            yield key


# (kind, key, label): what every finder here yields.
Term = tuple[str, str, str]


def _port(number: str) -> Iterator[Term]:
    if 0 < int(number) <= 65535:
        yield "port", f"port {number}", f"port {number}"


# A host name and a port: "crypto.example.io:4242" (a domain, not a file's "a.py:12").
_HOST_PORT_RE: Final = re.compile(
    r"(?P<host>[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:com|org|net|io|dev|app|edu|gov|co|ai|cloud|"
    r"local|internal|uk|de|fr|cn|jp|eu|us))"
    r":(?P<port>\d{2,5})"
)


def _token_identifiers(token: str, previous: str) -> Iterator[Term]:
    """`(kind, key, label)` for an identifier a whitespace token holds, given the word before."""
    if token.startswith(":"):
        bare = token[1:].rstrip(TOKEN_STRIP)
        if bare.isdigit() and 4 <= len(bare) <= 5:
            yield from _port(bare)
        return
    core = token.strip(TOKEN_STRIP)
    word = previous.lower().strip(TOKEN_STRIP + "=#")
    if word in PORT_WORDS and (after := PORT_AFTER_RE.fullmatch(core)) is not None:
        yield from _port(after.group(1))
        return
    if word in TICKET_WORDS and (number := NUMBER_AFTER_RE.fullmatch(core)) is not None:
        yield "pr", f"#{number.group(1)}", f"{TICKET_WORDS[word]} {number.group(1)}"
        return
    if core.isdigit():
        return  # a bare number (ASCII: the token is) is no identifier by itself
    at = _HOST_PORT_RE.fullmatch(core)
    if at is not None:  # "crypto.example.io:4242": the port, shown with the host it is on
        for kind, key, _ in _port(at.group("port")):
            yield kind, key, core
        return
    match = TOKEN_ID_RE.fullmatch(core)
    if match is None:
        # "s/1.2.3/1.2.4/", "version=2.0.1", "(#12)": look at the pieces between separators.
        pieces = SUBTOKEN_SPLIT_RE.split(core)
        if len(pieces) > 1:
            for piece in pieces:
                if piece and DIGIT_RE.search(piece) is not None:
                    yield from _token_identifiers(piece, "")
        return
    kind = match.lastgroup or ""
    if kind == "port" or kind == "hostport":
        yield from _port(match.group("port_n") or match.group("hostport_n"))
    elif kind == "pr":
        yield "pr", f"#{match.group('pr_n')}", f"PR {match.group('pr_n')}"
    elif kind == "jira" and match.group("jira_p") in JIRA_STOP:
        return
    elif kind == "hash" and previous.startswith("[") and token.endswith("]"):
        yield "commit", core, core  # git's "[branch abc1234] message" after a commit
    else:
        yield kind, core, core


def terms_in(text: str, *, prose: bool = True) -> Iterator[Term]:
    """`(kind, key, label)` for each path ("path") and identifier (URL, port, ticket, hash …)."""
    if "://" in text:
        for match in URL_RE.finditer(text):
            url = match.group(0).rstrip(".,;:!?")
            if utf16_len(url) <= MAX_IDENTIFIER_UNITS:
                yield "url", url, url
            port = URL_PORT_RE.match(url)
            if port is not None:
                yield from _port(port.group(1))
        text = URL_RE.sub(" ", text)
    if "端口" in text:
        for match in ZH_PORT_RE.finditer(text):
            yield from _port(match.group(1))
    yield from _token_terms(text, prose, Bounded(CALL_ENTRIES))


def _token_terms(
    text: str, prose: bool, memo: Bounded[tuple[str, str], tuple[Term, ...]] | None
) -> Iterator[Term]:
    """The terms of each whitespace token of `text`; `memo` (one per call, bounded) answers a
    token seen before after the same word, so a megabyte of "1.1 1.1 …" reads one token once."""
    previous = ""
    for raw in _tokens(text):
        if raw is _LINE:
            previous = ""  # "… resolve the issue\n3. Edit …": a list's number is no ticket
            continue
        for token in (raw,) if raw.isascii() else NON_ASCII_RE.split(raw):
            if not token:
                continue
            if token.isalpha():
                # "the port is 1100": the number is still the port's.
                if token not in _LINKING or previous.lower().strip(TOKEN_STRIP) not in PORT_WORDS:
                    previous = token
                continue
            if memo is None:
                yield from _terms_of_token(token, previous, prose)
            else:
                found = memo.get((token, previous))
                if found is None:
                    found = memo.put(
                        (token, previous), tuple(_terms_of_token(token, previous, prose))
                    )
                yield from found
            previous = token


def _terms_of_token(token: str, previous: str, prose: bool) -> Iterator[Term]:
    """The paths, e-mail addresses and identifiers one non-word token holds."""
    if "/" in token or "." in token:
        for match in PATH_RE.finditer(token):
            cleaned = clean_path(match.group(0), prose=prose)
            if cleaned is not None:
                yield "path", cleaned, cleaned
    if "@" in token:
        email = next((m.group(0) for m in EMAIL_RE.finditer(token) if m.group(1)), None)
        if email is not None:
            yield "email", email, email
    if DIGIT_RE.search(token) is not None:
        yield from _token_identifiers(token, previous)


_LINE = "\n"
# Words between a port's name and its number.
_LINKING = frozenset({"is", "was", "remains", "stays"})


def _tokens(text: str) -> Iterator[str]:
    """The text's whitespace tokens, with `_LINE` after each line: the word before a token is
    its context only on the same line."""
    if "\n" not in text:
        yield from text.split()
        return
    for line in text.split("\n"):
        yield from line.split()
        yield _LINE


_ELIDED = ("...", "…", "→", "⎿")


def symbols_in(text: str, *, code: bool = False) -> Iterator[Term]:
    """`("symbol", name, name)` for each code name a text writes: a `span` (no path), a
    snake_case, CamelCase or Dotted.Module name, a host name; in code the agent wrote, also
    quoted "x-header-names", "/routes/:id" and "dotted.span.names". Each once, in order."""
    seen: set[str] = set()
    if "`" in text and not code:
        for match in BACKTICK_RE.finditer(text):
            span = match.group(1).strip()
            words = span.split()
            if not span or len(words) > 4 or span in seen:
                continue
            if not any(c.isalpha() for c in span) and not (span.isdigit() and len(span) >= 2):
                continue
            if not (span[0].isalnum() or span[0] in ":@_.$<{/-") or any(m in span for m in _ELIDED):
                continue
            if len(words) == 1 and clean_path(span, prose=True) is not None:
                continue  # a file: paths are filed as paths
            seen.add(span)
            yield "symbol", span, span
    for match in SYMBOL_RE.finditer(text):
        name = match.group(0)
        if name not in seen and len(name) <= MAX_SYMBOL_UNITS:
            seen.add(name)
            yield "symbol", name, name
    if "." in text:
        for match in HOST_RE.finditer(text):
            host = match.group(0)
            if host not in seen:
                seen.add(host)
                yield "symbol", host, host
    if code:
        for match in CODE_STRING_RE.finditer(text):
            name = match.group(1)
            if name not in seen and len(name) <= MAX_SYMBOL_UNITS:
                seen.add(name)
                yield "symbol", name, name


def message_symbols(command: str) -> list[tuple[str, str, str]]:
    """Code names in the words a shell command carries (a commit's message, an echo): what the
    agent says it did, in a quoted text of a few words or more, not a flag's value."""
    if '"' not in command and "'" not in command:
        return []
    return [
        found
        for words in _quoted_texts(command)
        if len(words.split()) >= _MESSAGE_WORDS
        for found in symbols_in(words)
    ]


# A double- or single-quoted text in a command; one of five words or more is a message. A
# double quote's text runs to its closing quote, or stops unclosed (group 2 None) where an
# escape breaks or the command ends.
_QUOTED_WORDS_RE = re.compile(r'"((?:[^"\\]+|\\.)*)(")?|\'([^\']*)\'')
_SINGLE_QUOTED_RE = re.compile(r"'([^']*)'")
_MESSAGE_WORDS = 5


def _quoted_texts(command: str) -> Iterator[str]:
    """The quoted texts `"…"` (escapes kept) and `'…'` of a command, as a left-to-right scan
    for either finds them; an unclosed double quote is read once, not again from each double
    quote inside what it read (those are escaped, so none of them closes either)."""
    pos = 0
    while (match := _QUOTED_WORDS_RE.search(command, pos)) is not None:
        if match.group(3) is not None or match.group(2) is not None:
            yield match.group(1) if match.group(2) is not None else match.group(3)
            pos = match.end()
            continue
        # Unclosed: only a single-quoted text can start before where it stopped.
        quote = command.find("'", match.start() + 1, match.end())
        single = _SINGLE_QUOTED_RE.match(command, quote) if quote >= 0 else None
        if single is None:  # no single quote closes before the end either
            pos = match.end()
            continue
        yield single.group(1)
        pos = single.end()


def parse_arguments(arguments: str) -> Any:
    """The tool call's arguments as JSON data, or the raw text when they are not JSON."""
    try:
        return parse_json(arguments) if arguments else {}
    except ValueError:
        return arguments


def scalars(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """`(nearest key, text)` for every string or number inside JSON data."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield key, str(value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from scalars(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from scalars(v, key)


_ANCHOR_UNITS = 40
_EDIT_UNITS = 130
# An edit's (old text, new text) argument pairs, by the names editors give them.
_EDIT_PAIRS = (("old_str", "new_str"), ("old_string", "new_string"), ("search", "replace"))


def short_arguments(data: Any) -> str:
    """The one argument that says what a call did (its command, path or query), kept short;
    an edit by what it wrote that was not there before."""
    if isinstance(data, Mapping):
        edit = _edit_gist(data)
        if edit:
            return edit
        for key in SUMMARY_ARG_KEYS:
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return shorten(one_line(value), 60)
        # No command, path or query: the values it was called with ("MSP, EWR, 2024-05-25").
        values = [one_line(v) for _, v in scalars(data) if v.strip()]
        return shorten(", ".join(values), 60)
    return shorten(one_line(str(data)), 60)


def _edit_gist(data: Mapping[str, Any]) -> str:
    """ "path: +new lines" for an edit that replaces text: the lines its new text adds."""
    for old_key, new_key in _EDIT_PAIRS:
        old, new = data.get(old_key), data.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            before = {line.strip() for line in old.splitlines()}
            lines = (line.strip() for line in new.splitlines())
            added = [line for line in lines if line and line not in before]
            path = next((v for k, v in data.items() if k in PATH_KEYS and isinstance(v, str)), "")
            name = path.rsplit("/", 1)[-1]
            gist = one_line(" ".join(added)) if added else "-" + one_line(old)
            plain = f"{name}: +{gist}" if name else f"+{gist}"
            # Where it went: the line it was aimed at, when the line has room for it.
            anchor = _anchor(old, new)
            where = f"{name} [{anchor}]: +{gist}"
            if name and anchor and utf16_len(where) <= _EDIT_UNITS:
                return where
            return shorten(plain, 100)
    return ""


def _anchor(old: str, new: str) -> str:
    """The first line of the old text that the new one keeps (where the edit was aimed), if
    short."""
    kept = {line.strip() for line in new.splitlines()}
    anchor = next((ln.strip() for ln in old.splitlines() if ln.strip() in kept), "")
    return anchor if utf16_len(anchor) <= _ANCHOR_UNITS else ""


def shell_modified(command: str) -> list[str]:
    """Paths a shell command writes: `sed -i`, redirections, tee, touch, mv/cp targets."""
    command = HEREDOC_RE.sub(" ", command)
    bare = QUOTED_RE.sub(" ", command)
    found: list[str] = []
    for match in SED_INPLACE_RE.finditer(bare):
        found.extend(paths_in(match.group(0)))
    for pattern in (REDIRECT_RE, TEE_TOUCH_RE, MOVE_RE):
        for match in pattern.finditer(bare):
            found.extend(paths_in(match.group(1)))
    return [p for p in found if p != "/dev/null"]


def error_key(line: str) -> str:
    """Equal for errors that differ only in numbers, so repeats are counted, not listed."""
    return one_line(DIGITS_RE.sub("#", line.lower()))[:120]


def marked_lines(text: str, mark: re.Pattern[str]) -> Iterator[str]:
    """Each line of `text` holding `mark`, once, without splitting the whole text into lines.

    A line that is only a label ("ERROR:") comes with the line after it, which says what failed.
    """
    after = -1
    for match in mark.finditer(text):
        if match.start() < after:
            continue
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        after = len(text) if end < 0 else end
        if after - start <= 12 and after < len(text):
            following = text.find("\n", after + 1)
            after = len(text) if following < 0 else following
        yield text[start:after]


def error_names(text: str) -> tuple[str, ...]:
    """The exception and error class names a text mentions (KeyError, Ecto.NoResultsError),
    each once, in order: what a search of the history would look for."""
    if "Error" not in text and "Exception" not in text:
        return ()
    return tuple(dict.fromkeys(ERROR_CLASS_RE.findall(text)))


def unnumbered(text: str) -> str:
    """A file read's text without the line numbers a viewer put before each line."""
    return NUMBER_PREFIX_RE.sub(_without_number, text)


def _without_number(found: re.Match[str]) -> str:
    return "" if found.group(1) else found.group(0)


def error_lines(text: str) -> list[str]:
    """Error signatures in a tool output: the first two distinct and the last one."""
    seen: dict[str, str] = {}
    for line in marked_lines(text, ERROR_MARK_RE):
        stripped = line.strip()
        if len(stripped) < 4 or NUMBERED_LINE_RE.match(line) or CODE_LINE_RE.search(stripped):
            continue
        if WARNING_LINE_RE.match(stripped):
            continue
        hit = ERROR_STRONG_RE.search(stripped) is not None
        if not hit:
            cls = ERROR_CLASS_RE.search(stripped)
            hit = cls is not None and (
                cls.start() <= 4 or stripped[cls.end() : cls.end() + 1] in {":", ")"}
            )
        if hit:
            signature = one_line(ERROR_PREFIX_RE.sub("", ERROR_TAG_RE.sub("", stripped)))
            signature += _raised_at(text, line)
            seen.setdefault(error_key(signature), signature)
    lines = list(seen.values())
    chosen = lines if len(lines) <= 3 else [*lines[:2], lines[-1]]
    # pytest prints "E KeyError: x" and then "FAILED test - KeyError: x": keep the fuller one.
    return [a for a in chosen if not any(a != b and a in b for b in chosen)]


# A Python traceback's frame: `File "/app/x.py", line 5, in division`.
_FRAME_RE: Final = re.compile(
    r'^\s*File "(?P<path>/[^"<>]+)", line (?P<line>\d+)(?:, in (?P<fn>[\w.<>]+))?'
)
# How far above an error's line its innermost frame may stand (the frame, its code, a caret).
_FRAME_LINES: Final = 4
_LIBRARY_PARTS: Final = ("/site-packages/", "/dist-packages/", "/lib/python")


def _raised_at(text: str, line: str) -> str:
    """Where a traceback's error was raised: " (path, line N, in fn)" of the frame just above
    the error's line, when that frame is the project's code (not a library's); else ""."""
    if 'File "' not in text:
        return ""
    at = text.find(line)
    if at <= 0:
        return ""
    above = text[:at].rstrip("\n").split("\n")[-_FRAME_LINES:]
    for previous in reversed(above):
        frame = _FRAME_RE.match(previous)
        if frame is None:
            continue
        path = frame.group("path")
        if any(part in path for part in _LIBRARY_PARTS):
            return ""
        where = f"{path}, line {frame.group('line')}"
        return f" ({where}, in {frame.group('fn')})" if frame.group("fn") else f" ({where})"
    return ""


def project_root(paths: Iterable[str]) -> str:
    """The directory most absolute paths live under (a project checkout), or "" when none."""
    absolute = [p for p in paths if p.startswith("/")]
    if len(absolute) < 2:
        return ""
    counts: dict[str, int] = {}
    for path in absolute:
        prefix = ""
        for part in path.split("/")[1:-1]:
            if part in SOURCE_DIRS:
                break
            prefix += "/" + part
            counts[prefix] = counts.get(prefix, 0) + 1
    best = ""
    for prefix, count in counts.items():
        if count * 2 < len(absolute) or (prefix.count("/") == 1 and prefix[1:] in SYSTEM_DIRS):
            continue
        if prefix.count("/") > best.count("/"):
            best = prefix
    return best + "/" if best else ""


def basename(path: str) -> str:
    """The last segment of a path, a trailing slash aside."""
    return path.rstrip("/").rsplit("/", 1)[-1]
