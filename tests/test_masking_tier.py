"""The cheap tier first: a compaction masks old tool outputs (a one-line stub naming the message
id; the original stays stored and recallable) and writes a summary only when masking cannot
reach the low watermark."""

from __future__ import annotations

from dataclasses import replace

from precis.core.messages import KIND_MARKER, Message, ToolCall
from precis.core.tokens import LettaEstimator
from precis.core.validity import check
from precis.engine.masking import MASKED_KEY, is_mask_marker
from precis.engine.settings import CompactionSettings
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.base import LocalSummarizer, SummaryRequest


class CountingSummarizer(LocalSummarizer):
    """A short fixed summary that counts its calls: the tier that ran shows in them."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def name(self) -> str:
        return "counting"

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        return "the work so far"


def agent_turns(start: int, n: int) -> list[Message]:
    """Turns of a user asking, a tool call with a long output, and an answer."""
    out: list[Message] = []
    for i in range(start, start + n):
        call = ToolCall(f"c{i}", "read_file", f'{{"path": "src/mod_{i}.py"}}')
        listing = "\n".join(f"line {j} of module {i}: value_{i}_{j} = {j * i}" for j in range(40))
        out += [
            Message(role="user", content=f"look at module {i}", id=f"u{i}"),
            Message(role="assistant", content="", id=f"a{i}", tool_calls=(call,)),
            Message(role="tool", content=listing, id=f"t{i}", tool_call_id=f"c{i}"),
            Message(role="assistant", content=f"module {i} is read", id=f"r{i}"),
        ]
    return out


def session_of(summarizer: CountingSummarizer, **settings: object) -> tuple[Session, MemoryStore]:
    store = MemoryStore()
    chosen = CompactionSettings(context_window=4000, pin_task=False, **settings)  # type: ignore[arg-type]
    return Session(store, "c", LettaEstimator(), summarizer, chosen), store


def test_old_tool_outputs_are_masked_before_anything_is_summarized() -> None:
    summarizer = CountingSummarizer()
    session, store = session_of(summarizer)
    session.append(*agent_turns(0, 9))
    before = session.tokens()
    assert before > session.settings.threshold  # type: ignore[operator]
    stats = session.compact()
    assert stats.mode == "mask" and summarizer.calls == 0
    assert stats.context_tokens_after <= session.settings.target  # type: ignore[operator]
    assert session.tokens() == stats.context_tokens_after
    # Every message stays in the context (ids), the newest turn's output as it was.
    ids = [m.id for m in session.context()]
    assert all(f"t{i}" in ids and f"u{i}" in ids for i in range(9))
    view = session.view()
    assert check(view) == []
    stubs = {m.id: m.content for m in view if m.metadata.get("masked")}
    assert "t8" not in stubs and len(stubs) == stats.summarized >= 1
    for message_id, stub in stubs.items():
        assert "\n" not in stub and message_id in stub and "read_file" in stub
    # The original stays stored: recall finds what only a masked output said.
    masked = sorted(stubs)[0]
    i = masked[1:]
    hits = session.recall(f"value_{i}_33")
    assert hits and hits[0].id == masked
    (event,) = store.events("c")
    assert event.mode == "mask" and event.stats["mode"] == "mask"


def test_the_masking_marker_never_piles_up() -> None:
    summarizer = CountingSummarizer()
    session, _ = session_of(summarizer)
    session.append(*agent_turns(0, 9))
    first = session.compact()
    session.append(*agent_turns(9, 6))
    second = session.compact()
    assert (first.mode, second.mode) == ("mask", "mask") and summarizer.calls == 0
    markers = [m for m in session.context() if m.kind == KIND_MARKER]
    assert len(markers) == 1 and is_mask_marker(markers[0])
    masked = sum(1 for m in session.view() if m.metadata.get("masked"))
    assert markers[0].metadata[MASKED_KEY] == masked == first.summarized + second.summarized


def test_a_summary_is_written_when_masking_cannot_reach_the_target() -> None:
    summarizer = CountingSummarizer()
    session, _ = session_of(summarizer)
    chat = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "x" * 400)
        for i in range(40)
    ]
    session.append(*chat)
    stats = session.compact()
    assert stats.mode == "sliding_window" and summarizer.calls == 1


def test_lettas_policy_never_masks() -> None:
    summarizer = CountingSummarizer()
    session, _ = session_of(summarizer, low_watermark=None)
    session.append(*agent_turns(0, 9))
    stats = session.compact()
    assert stats.mode == "sliding_window" and summarizer.calls == 1
    assert not any(m.metadata.get("masked") for m in session.view())


def test_instructions_ask_for_a_summary() -> None:
    summarizer = CountingSummarizer()
    session, _ = session_of(summarizer)
    session.append(*agent_turns(0, 9))
    stats = session.compact(instructions="keep the module numbers")
    assert stats.mode == "sliding_window" and summarizer.calls == 1


def test_a_mode_asked_for_by_name_is_that_mode() -> None:
    summarizer = CountingSummarizer()
    session, _ = session_of(summarizer)
    session.append(*agent_turns(0, 9))
    stats = session.compact("sliding_window")
    assert stats.mode == "sliding_window" and summarizer.calls == 1


def test_a_later_summary_carries_the_facts_of_the_outputs_masked_before_it() -> None:
    """A masked output's error reaches the next summary's ledger through the marker, though the
    summary itself only saw its stub."""
    summarizer = CountingSummarizer()
    session, _ = session_of(summarizer)
    turns = agent_turns(0, 9)
    error = "ModuleNotFoundError: No module named 'zeta_quark'"
    turns[2] = replace(turns[2], content=f"Traceback (most recent call last):\n{error}\n")
    session.append(*turns)
    assert session.compact().mode == "mask"
    assert error not in "".join(m.content for m in session.view())
    session.append(*agent_turns(9, 12))
    assert session.compact("sliding_window").mode == "sliding_window"
    (summary,) = [m for m in session.context() if m.kind == "summary"]
    assert "zeta_quark" in str(summary.metadata.get("ledger"))
