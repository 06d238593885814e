"""Exceptions that precis raises or recognises across its parts."""

from __future__ import annotations


class ContextOverflow(Exception):
    """The model said the request exceeds its context window; always counts as overflow."""


class SummarizerError(Exception):
    """The summarizer answered with nothing usable, so the caller may retry or fall back."""


class CompactionError(Exception):
    """A compaction could not produce an acceptable context; the store was left unchanged."""


class CompactionVetoed(CompactionError):
    """A pre-compact hook refused this compaction; nothing was written."""
