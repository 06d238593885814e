"""An append does no fact work (#34 item 2): each message's facts, folded text and read-ahead are
found when a check or a compaction first asks for them. Doing that work at every append, as
precis used to, must give the same compactions and the same prompts."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precis import CompactionSettings, Session
from precis.core.messages import Message
from precis.eval import load_conversation
from precis.facts import folded_text_parts, prepare, read_ahead
from precis.session import drive
from precis.stores.memory import MemoryStore
from precis.summarize.extractive import ExtractiveSummarizer

# A store's ids are random, and clock times are the clock's; prompts name both (where an omitted
# part can be read back, when a summary was made).
IDS = re.compile(r"msg_[0-9a-f]+")
TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z")
TRAJECTORIES = sorted((Path(__file__).parent / "data" / "trajectories").glob("*.jsonl"))


class EagerSession(Session):
    """A session that scans, counts, folds and reads ahead each appended message at once, and
    asks the guard's facts of it, as every append did before the work was deferred."""

    def append(
        self, *items: Message | Mapping[str, Any], idempotency_key: str | None = None
    ) -> list[Message]:
        turn = self.store.tail(self.conversation_id).turn
        appended = super().append(*items, idempotency_key=idempotency_key)
        shown = self.view_alone(appended, drive(self._floor_tokens_steps()))
        for message in shown:
            prepare(message, self.memo)
            self.counter.count(message)
            folded_text_parts(message, self.memo)
        read_ahead(turn, shown, self.memo)
        if self.settings.guard:
            self.compactor.kept.observe_more(shown)
        return appended


class CountingIds:
    """Ids that count, for the store and the compactor of one replay: random ids are counted
    in tokens as they come, and so move where a view cuts."""

    def __init__(self) -> None:
        self.made = 0

    def new(self) -> str:
        self.made += 1
        return f"msg_{self.made:029x}"


def replay(face: type[Session], items: list[dict[str, Any]], window: int, guard: bool) -> str:
    """What the agent loop saw: every compaction's figures and every prompt it would send, as
    JSON with each message id named by the order it first appears in."""
    session = face(
        MemoryStore(),
        "c",
        summarizer=ExtractiveSummarizer(),
        settings=CompactionSettings(context_window=window, guard=guard),
    )
    ids = CountingIds()
    session.store._ids = session.compactor._ids = ids  # type: ignore[attr-defined,assignment]
    seen: list[Any] = []
    for i, item in enumerate(items):
        if i == 0 and item.get("role") == "system":
            session.set_system_prompt(item["content"])
            continue
        session.append(item)
        if i + 1 < len(items) and items[i + 1].get("role") == "tool":
            continue  # no model call between a call and its results
        seen.extend(stats.as_dict() for stats in session.maybe_compact())
        seen.append(session.prompt())
    names: dict[str, str] = {}
    text = TIMES.sub("(time)", json.dumps(seen))
    return IDS.sub(lambda m: names.setdefault(m.group(), f"id{len(names)}"), text)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    path=st.sampled_from(TRAJECTORIES),
    window=st.sampled_from([1500, 3000, 6000]),
    share=st.floats(0.2, 1.0),
    guard=st.booleans(),
)
def test_deferred_fact_work_gives_what_eager_fact_work_gave(
    path: Path, window: int, share: float, guard: bool
) -> None:
    items = load_conversation(path)
    items = items[: max(2, int(len(items) * share))]
    deferred = replay(Session, items, window, guard)
    eager = replay(EagerSession, items, window, guard)
    assert deferred == eager


def test_an_append_reads_no_facts() -> None:
    """What an append leaves in the session's memo: nothing but its view's (no scans)."""
    session = Session(MemoryStore(), "c", settings=CompactionSettings(context_window=4000))
    session.append({"role": "user", "content": "Never touch the billing module; use pnpm."})
    session.append({"role": "assistant", "content": "Understood: pnpm, billing left alone."})
    before = session.memo.entries()
    session.append({"role": "user", "content": "Fix the flaky test in src/api/users.py please."})
    assert session.memo.entries() == before
