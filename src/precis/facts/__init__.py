"""Facts: what a summary must keep, found by rule, once per message.

The model (`Fact`, `Ledger`, the kinds of `precis.core.types.FactKind`), the collector that reads
a span, the facts the guard demands of a summary (`extract_facts`), the one presence test
(`missing_facts`, `retention`), and the language a span is written in. Depends on `precis.core`
only; the guard, the extractive brief and `precis eval` all read facts from here.
"""

from __future__ import annotations

from precis.facts.collect import (
    Collector,
    ErrorEntry,
    Facts,
    SummaryReader,
    read_ahead,
)
from precis.facts.extract import extract_facts, remember_ledger, stored_ledger
from precis.facts.gist import Note
from precis.facts.kept import KeptFacts
from precis.facts.language import (
    earlier_summary_text,
    is_chinese,
    raw_summary_text,
    span_language,
)
from precis.facts.model import KINDS, PRIORITY, Fact, Ledger, carry, dedupe
from precis.facts.records import Record, read_record
from precis.facts.rules import constraint_sentences
from precis.facts.scan import (
    prepare,
    scan,
)
from precis.facts.tally import W_ARGS, W_CARRIED, W_OUTPUT, W_SPOKEN, W_USER, Tally, TermEntry
from precis.facts.terms import basename, error_key, project_root
from precis.facts.text import (
    by_strength,
    compact,
    forbids,
    head,
    is_trivial,
    one_line,
    shorten,
)
from precis.facts.verify import (
    context_text,
    fact_present,
    fold,
    folded_text,
    folded_text_parts,
    missing_facts,
    missing_from_folded,
    presence_test,
    present,
    retention,
)

__all__ = [
    "KINDS",
    "PRIORITY",
    "W_ARGS",
    "W_CARRIED",
    "W_OUTPUT",
    "W_SPOKEN",
    "W_USER",
    "Collector",
    "ErrorEntry",
    "Fact",
    "Facts",
    "KeptFacts",
    "Ledger",
    "Note",
    "Record",
    "SummaryReader",
    "Tally",
    "TermEntry",
    "basename",
    "by_strength",
    "carry",
    "compact",
    "constraint_sentences",
    "context_text",
    "dedupe",
    "earlier_summary_text",
    "error_key",
    "extract_facts",
    "fact_present",
    "fold",
    "folded_text",
    "folded_text_parts",
    "forbids",
    "head",
    "is_chinese",
    "is_trivial",
    "missing_facts",
    "missing_from_folded",
    "one_line",
    "prepare",
    "presence_test",
    "present",
    "project_root",
    "raw_summary_text",
    "read_ahead",
    "read_record",
    "remember_ledger",
    "retention",
    "scan",
    "shorten",
    "span_language",
    "stored_ledger",
]
