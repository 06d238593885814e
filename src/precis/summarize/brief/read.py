"""Reading an earlier brief back: its sections, carried into the collector of the next one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from precis.facts import (
    W_CARRIED,
    Collector,
    ErrorEntry,
    Note,
    Record,
    by_strength,
    error_key,
)
from precis.facts.rules import constraint_sentences
from precis.summarize.brief.labels import (
    CONSTRAINTS,
    COUNT_RE,
    DECISIONS,
    DONE,
    ERRORS,
    FILES,
    FINDINGS,
    HEADING_RE,
    HEADING_ROOT_RE,
    HEADING_TO_SECTION,
    HINTS,
    IDENTIFIERS,
    LABELS,
    LAYOUTS,
    MODIFIED,
    NOTES,
    OPEN,
    PHASE,
    PHASE_LINE_RE,
    READ,
    RECORDS,
    REQUESTS,
    SECTION_KEYS,
    STYLE_EXTRA,
    TASK,
    TOOLS,
    WORK,
)
from precis.summarize.guard import DEFAULT_HEADING, DEFAULT_HEADING_ZH
from precis.summarize.guard import LABELS as GUARD_LABELS

# The guard's "Retained facts" section: each kind's label line, and where its bullets go.
_GUARD_HEADINGS: Final = frozenset({DEFAULT_HEADING.lower(), DEFAULT_HEADING_ZH})
_GUARD_KINDS: Final[Mapping[str, str]] = {
    "constraint": CONSTRAINTS,
    "task": TASK,
    "file_modified": MODIFIED,
    "identifier": IDENTIFIERS,
    "error": ERRORS,
    "file_read": READ,
    "request": REQUESTS,
    "state": WORK,
}
_GUARD_LABELS: Final[Mapping[str, str]] = {
    label: _GUARD_KINDS[kind]
    for table in GUARD_LABELS.values()
    for kind, label in table.items()
    if kind in _GUARD_KINDS
}


def parse_brief(text: str) -> dict[str, list[str]]:
    """The sections of a brief this summarizer wrote earlier; empty for any other text.

    The guard's "Retained facts" section is read too, each kind's bullets into its section.
    """
    sections: dict[str, list[str]] = {}
    current: str | None = None
    guarded = False
    for line in text.splitlines():
        phase = PHASE_LINE_RE.match(line.strip())
        if phase is not None:
            sections.setdefault(PHASE, []).append(phase.group(1))
            continue
        if guarded and line.strip() in _GUARD_LABELS:
            current = _GUARD_LABELS[line.strip()]
            continue
        heading = HEADING_RE.match(line)
        if heading is not None and heading.group(1).strip().lower() in _GUARD_HEADINGS:
            guarded, current = True, None
            continue
        if heading is not None:
            title = heading.group(1)
            root = HEADING_ROOT_RE.search(title)
            if root is not None:
                title = title[: root.start()]
            known = HEADING_TO_SECTION.get(title.strip().lower())
            if known is not None:  # any other "## …" line is content, e.g. a task's title
                current, guarded = known, False
                if root is not None:
                    sections.setdefault("root", []).append(root.group(1))
                continue
        stripped = line.strip()
        if current is None or not stripped:
            continue
        if stripped.startswith("- "):
            stripped = stripped[2:]
        if LAYOUTS.get(current) == "inline":
            sections.setdefault(current, []).extend(s for s in stripped.split(", ") if s)
        else:
            sections.setdefault(current, []).append(stripped)
    return sections


def read_brief(collector: Collector, text: str) -> bool:
    """Carry an earlier brief's sections into `collector`; False when `text` has none of them.

    Its phases are carried either way; an unstructured text is left to the collector.
    """
    facts = collector.facts
    sections = parse_brief(text)
    facts.phases.extend(p for p in sections.get(PHASE, []) if p not in facts.phases)
    if not any(key in sections for key in SECTION_KEYS):
        return False
    roots = sections.get("root", [])
    root = roots[0] if roots else ""
    if sections.get(TASK) and not facts.task:
        facts.task = " ".join(sections[TASK])
        facts.task_keep = tuple(by_strength(constraint_sentences(facts.task)))
    for sentence in sections.get(CONSTRAINTS, []):
        facts.constraints.setdefault(sentence.lower(), sentence)
    facts.carried_requests.extend(sections.get(REQUESTS, []))
    for key, tally in ((MODIFIED, facts.modified), (READ, facts.read)):
        for path in sections.get(key, []):
            full = path if not root or path.startswith(("/", "~", ".")) else root + path
            tally.add(full, full, W_CARRIED)
    for label in sections.get(IDENTIFIERS, []):
        facts.identifiers.add(label.split("=", 1)[-1], label, W_CARRIED, "carried")
    for line in sections.get(ERRORS, []):
        facts.errors.setdefault(error_key(line), ErrorEntry(line, 1, -1, -1, carried=True))
    for line in sections.get(TOOLS, []):
        for name, count in COUNT_RE.findall(line):
            if count:
                facts.tool_counts[name] = facts.tool_counts.get(name, 0) + int(count)
    # Pending calls and unanswered requests are re-derived from the new span, not carried.
    stale = tuple(
        f"{labels[k]}: " for labels in LABELS.values() for k in ("awaiting", "unanswered")
    )
    facts.carried_open.extend(t for t in sections.get(OPEN, []) if not t.startswith(stale))
    facts.progress.carried.extend(sections.get(WORK, []))
    facts.notes.extend(Note(line) for line in sections.get(NOTES, []))
    facts.carried_hints.extend(sections.get(HINTS, []))
    for line in sections.get(RECORDS, []):
        key, colon, rest = line.partition(": ")
        if colon and rest:
            facts.records[key] = Record(key, rest, rest)
    facts.user_texts.extend(sections.get(TASK, []))
    _read_style_sections(collector, sections, root)
    return True


def _read_style_sections(
    collector: Collector, sections: Mapping[str, list[str]], root: str
) -> None:
    """Carry a brief's or notes' own sections; grouped files and identifiers are re-ranked."""
    facts = collector.facts
    facts.carried_done.extend(sections.get(DONE, []))
    facts.carried_decisions.extend(sections.get(DECISIONS, []))
    for path in sections.get(FILES, []):
        full = path if not root or path.startswith(("/", "~", ".")) else root + path
        facts.read.add(full, full, W_CARRIED)
    for line in sections.get(FINDINGS, []):
        label, colon, rest = line.partition(": ")
        kind = next(
            (k for k in ("files", "identifiers") for t in STYLE_EXTRA.values() if t[k] == label),
            None,
        )
        if not colon or kind is None:
            facts.carried_findings.append(line)
        elif kind == "files":
            for path in rest.split(", "):
                facts.read.add(path, path, W_CARRIED)
        else:
            for ident in rest.split(", "):
                facts.identifiers.add(ident.split("=", 1)[-1], ident, W_CARRIED, "carried")
