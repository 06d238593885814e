"""Every rule of the corpus's dev half, stated once by the user early in a long run, is still in
the context after 20 compactions, whatever its wording (#30: "Use pnpm, not npm." was gone at
step 57, "npm is forbidden in this repo." at step 99)."""

from __future__ import annotations

import pytest
from constraint_corpus import load

from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.base import LocalSummarizer
from precis.summarize.extractive import ExtractiveSummarizer
from precis.summarize.mock import MockSummarizer


@pytest.mark.parametrize(
    "summarizer", [MockSummarizer(), ExtractiveSummarizer()], ids=["mock", "extractive"]
)
def test_every_rule_survives_twenty_compactions(summarizer: LocalSummarizer) -> None:
    rules = [item for item in load("dev") if item.label == "constraint"]
    settings = CompactionSettings(context_window=24_000)
    session = Session(MemoryStore(), "rules", None, summarizer, settings)
    session.append({"role": "user", "content": "Migrate the checkout service to pnpm."})
    for item in rules:
        session.append(
            {"role": "user", "content": item.text},
            {"role": "assistant", "content": "Understood."},
        )
    compactions = 0
    for step in range(4000):
        session.append(
            {"role": "user", "content": f"Step {step}: go on with packages/web, line {step}."},
            {"role": "assistant", "content": f"Step {step} done; the lockfile is at v{step}. " * 8},
        )
        if session.maybe_compact():
            compactions += 1
            if compactions == 20:
                break
    assert compactions == 20
    context = "\n".join(m.content for m in session.context())
    lost = [span for item in rules for span in item.spans if " ".join(span.split()) not in context]
    assert lost == [], lost
