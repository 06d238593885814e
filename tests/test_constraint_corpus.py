"""The rule finder on the hand-written corpus: it finds the rules people state, in every form,
and not the lines that only carry the words; and a megabyte of hostile text is no rule."""

from __future__ import annotations

from constraint_corpus import load, score

from precis.facts import constraint_sentences


def test_the_rule_finder_reaches_095_precision_and_recall_on_the_dev_half() -> None:
    items = load("dev")
    positives = sum(item.label == "constraint" for item in items)
    assert positives >= 150 and len(items) - positives >= 150
    result = score(items, constraint_sentences)
    print(result.line("dev"))
    assert result.precision >= 0.95, result.false
    assert result.recall >= 0.95, result.missed


def test_the_motivating_rules_are_found_and_the_listing_and_schema_lines_are_not() -> None:
    assert constraint_sentences("Use pnpm, not npm.") == ["Use pnpm, not npm."]
    assert constraint_sentences("npm is forbidden in this repo.") == [
        "npm is forbidden in this repo."
    ]
    assert constraint_sentences("1234: msg = '{} must be a positive integer'.format(") == []
    assert constraint_sentences("path (string) [required]: the path to the file to open") == []


def test_a_megabyte_of_hostile_text_is_no_rule() -> None:
    """Many rule words and clause starts with no sentence end (run without a clock: each body
    must finish, and no paragraph without stops is taken for a rule)."""
    bodies = [
        "use " + "a, " * 350_000,
        "never only must " * 70_000,
        "you " * 250_000,
        "不要" * 500_000,
        ("- keep " + "a " * 400 + "\n") * 1_300,
    ]
    for body in bodies:
        assert len(body) >= 500_000
        assert constraint_sentences(body) == [], body[:20]
