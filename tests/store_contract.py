"""The ConversationStore contract: plain test functions over a `store` fixture, run per backend."""

from __future__ import annotations

import io
import json
import operator
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from precis.core.errors import IdempotencyConflict, InvalidInput
from precis.core.messages import KIND_SUMMARY, Message, ToolCall
from precis.stores import (
    CompactionEvent,
    ContextSnapshot,
    ConversationNotFound,
    ConversationStore,
    ImportLineError,
    Sample,
    StoreError,
    UnknownMessage,
    VersionConflict,
    export_jsonl,
    import_jsonl,
)
from precis.stores.base import ContextTail

CID = "conv-1"


def user(text: str, **kw: Any) -> Message:
    return Message(role="user", content=text, **kw)


def assistant(text: str, **kw: Any) -> Message:
    return Message(role="assistant", content=text, **kw)


def fill(store: ConversationStore, n: int, cid: str = CID, prefix: str = "m") -> list[Message]:
    """Append n alternating user/assistant messages, one per call as an agent would."""
    out: list[Message] = []
    for i in range(n):
        make = user if i % 2 == 0 else assistant
        out += store.append(cid, [make(f"{prefix}{i}")])
    return out


def event(trigger: str = "manual", summary_id: str = "") -> CompactionEvent:
    return CompactionEvent(
        trigger=trigger,
        mode="sliding_window",
        stats={"messages_count_before": 10, "context_tokens_after": 42},
        summary_id=summary_id,
        at="2025-01-01T00:00:00.000Z",
    )


def compact(
    store: ConversationStore,
    cid: str,
    keep: int,
    *,
    snapshot: ContextSnapshot | None = None,
    summary_id: str = "",
) -> ContextSnapshot:
    """Replace all but the last `keep` in-context messages with a summary, as the engine does."""
    snap = snapshot or store.context(cid)
    sid = summary_id or f"sum_v{snap.version + 1}"
    summary = Message(role="user", kind=KIND_SUMMARY, id=sid, content=f"summary {sid}")
    kept = [m.id for m in snap.messages[len(snap.messages) - keep :]] if keep else []
    return store.commit_compaction(
        cid,
        expected_version=snap.version,
        snapshot_last_seq=snap.last_seq,
        summary=summary,
        context_ids=[sid, *kept],
        event=event(summary_id=sid),
    )


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


# --- conversations ----------------------------------------------------------------------------


def test_create_is_idempotent_and_exists(store: ConversationStore) -> None:
    assert not store.exists(CID)
    store.create(CID, system_prompt="first")
    store.create(CID, system_prompt="second")
    assert store.exists(CID)
    assert store.system_prompt(CID) == ("first", False)
    assert store.count(CID) == 0
    store.create("conv-0")
    assert store.conversations() == ["conv-0", CID]


def test_unknown_conversation_raises_naming_it(store: ConversationStore) -> None:
    calls = [
        lambda: store.context("nope"),
        lambda: store.history("nope"),
        lambda: store.get("nope", []),
        lambda: store.count("nope"),
        lambda: store.events("nope"),
        lambda: store.system_prompt("nope"),
        lambda: store.set_system_prompt("nope", "x"),
        lambda: store.recall("nope", "x"),
        lambda: store.samples("nope"),
        lambda: store.latest_sample("nope"),
        lambda: store.add_sample("nope", Sample("append", "t", 1, None)),
        lambda: compact(
            store, "nope", 0, snapshot=ContextSnapshot([], 0, 0, compacted=False), summary_id="s"
        ),
    ]
    for call in calls:
        with pytest.raises(ConversationNotFound, match="nope"):
            call()
    assert not store.exists("nope")


def test_system_prompt_set_clears_stale(store: ConversationStore) -> None:
    store.create(CID, system_prompt="v1")
    fill(store, 4)
    compact(store, CID, keep=1)
    assert store.system_prompt(CID) == ("v1", True)
    store.set_system_prompt(CID, "v2")
    assert store.system_prompt(CID) == ("v2", False)


# --- append -----------------------------------------------------------------------------------


def test_append_creates_conversation_and_assigns_id_seq_created_at(
    store: ConversationStore,
) -> None:
    first = store.append(CID, [user("a"), assistant("b")])
    second = store.append(CID, [user("c")])
    stored = first + second
    assert store.exists(CID)
    assert all(m.id.startswith("msg_") for m in stored)
    assert len(set(ids(stored))) == 3
    assert ids(stored) == sorted(ids(stored)), "generated ids sort in append order"
    assert all(m.created_at and m.created_at.endswith("Z") for m in stored)
    assert [m.content for m in stored] == ["a", "b", "c"]
    assert store.history(CID) == stored
    assert store.count(CID) == 3
    assert store.context(CID).last_seq == 3


def test_append_keeps_given_id_and_created_at(store: ConversationStore) -> None:
    (m,) = store.append(CID, [user("x", id="given-1", created_at="2020-01-02T03:04:05Z")])
    assert m.id == "given-1"
    assert m.created_at == "2020-01-02T03:04:05Z"
    assert store.get(CID, ["given-1"]) == [m]


def test_append_rejects_duplicate_id_and_writes_nothing(store: ConversationStore) -> None:
    store.append(CID, [user("x", id="dup")])
    with pytest.raises(StoreError, match="dup"):
        store.append(CID, [user("y"), user("z", id="dup")])
    with pytest.raises(StoreError, match="twice"):
        store.append(CID, [user("y", id="twice"), user("z", id="twice")])
    assert store.count(CID) == 1
    # The same id is fine in another conversation.
    store.append("other", [user("x", id="dup")])


def test_append_round_trips_every_field(store: ConversationStore) -> None:
    call = ToolCall("call_1", "read_file", '{"path": "/etc/hosts"}')
    messages = [
        Message(role="system", content="sys", openai_extra={"role": "developer"}),
        Message(
            role="assistant",
            content="",
            tool_calls=(call,),
            reasoning="thinking…",
            metadata={"usage": {"tokens": 12}, "tags": ["a", "b"]},
        ),
        Message(role="tool", content="127.0.0.1 localhost", tool_call_id="call_1"),
        Message(role="user", content="pin me", pinned=True, kind="marker", images=2),
    ]
    stored = store.append(CID, messages)
    assert store.history(CID) == stored
    assert stored[1].tool_calls == (call,)
    assert stored[1].metadata == {"usage": {"tokens": 12}, "tags": ["a", "b"]}
    assert stored[3].pinned and stored[3].kind == "marker" and stored[3].images == 2
    assert [m.to_openai() for m in store.history(CID)] == [m.to_openai() for m in messages]


def test_append_rejects_metadata_that_is_not_json(store: ConversationStore) -> None:
    with pytest.raises(StoreError, match="metadata"):
        store.append(CID, [user("x", metadata={"bad": object()})])
    assert not store.exists(CID) or store.count(CID) == 0


def test_concurrent_appends_from_threads(store: ConversationStore) -> None:
    def worker(n: int) -> None:
        for i in range(25):
            store.append(CID, [user(f"t{n}-{i}")])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history = store.history(CID)
    assert len(history) == store.count(CID) == 100
    assert len(set(ids(history))) == 100
    for n in range(4):
        mine = [m.content for m in history if m.content.startswith(f"t{n}-")]
        assert mine == [f"t{n}-{i}" for i in range(25)]


def test_append_check_runs_on_the_tail_and_its_refusal_writes_nothing(
    store: ConversationStore,
) -> None:
    seen: list[ContextTail] = []

    def first_of_new(tail: ContextTail) -> list[Message]:
        seen.append(tail)
        return [user("stored instead")]

    assert store.append(CID, [user("given")], check=first_of_new)[0].content == "stored instead"
    # A new conversation's tail: nothing yet, never compacted, no system prompt.
    assert seen == [ContextTail([], 0, [], 0, 0, False, "", False)]
    fill(store, 3)
    seen.clear()

    def refuse(tail: ContextTail) -> list[Message]:
        seen.append(tail)
        raise InvalidInput("refused on the tail")

    with pytest.raises(InvalidInput, match="refused on the tail"):
        store.append(CID, [user("never stored")], check=refuse)
    assert seen == [store.tail(CID)] and store.count(CID) == 4
    compact(store, CID, keep=2)
    before = store.tail(CID)
    seen.clear()

    def keep(tail: ContextTail) -> list[Message]:
        seen.append(tail)
        return [user("after")]

    (added,) = store.append(CID, [user("after")], check=keep)
    assert seen == [before]  # compacted: the tail of the in_context list
    assert store.context(CID).messages[-1] == added


def test_idempotency_key_stores_once_and_refuses_another_body(store: ConversationStore) -> None:
    checked: list[ContextTail] = []

    def check(tail: ContextTail) -> list[Message]:
        checked.append(tail)
        return [user("a"), assistant("b")]

    first = store.append(CID, [user("a"), assistant("b")], check=check, idempotency_key="k-1")
    again = store.append(CID, [user("a"), assistant("b")], check=check, idempotency_key="k-1")
    assert again == first and len(checked) == 1  # a replay runs no check
    assert store.count(CID) == 2
    with pytest.raises(IdempotencyConflict, match=r"'k-1'.*different append"):
        store.append(CID, [user("other")], idempotency_key="k-1")
    assert store.count(CID) == 2
    # A key is per conversation; a new key is a new append; a bad key is refused unwritten.
    assert store.append("other", [user("a"), assistant("b")], idempotency_key="k-1") != first
    store.append(CID, [user("a"), assistant("b")], idempotency_key="k-2")
    for bad in ("", "x" * 256, "tab\there"):
        with pytest.raises(InvalidInput, match="idempotency key"):
            store.append(CID, [user("c")], idempotency_key=bad)
    assert store.count(CID) == 4
    # The replay answers with the messages as they are now (a pin since shows).
    store.set_pinned(CID, first[0].id, True)
    replay = store.append(CID, [user("a"), assistant("b")], idempotency_key="k-1")
    assert [m.id for m in replay] == [m.id for m in first] and replay[0].pinned


def test_concurrent_duplicate_keys_store_once(store: ConversationStore) -> None:
    store.create(CID)
    barrier = threading.Barrier(4)
    answers: list[list[str]] = []

    def worker() -> None:
        barrier.wait()
        stored = store.append(CID, [user("only once")], idempotency_key="same")
        answers.append([m.id for m in stored])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.count(CID) == 1
    assert answers == [[store.history(CID)[0].id]] * 4


# --- context, history, get --------------------------------------------------------------------


def test_never_compacted_context_is_history(store: ConversationStore) -> None:
    stored = fill(store, 6)
    snap = store.context(CID)
    assert snap.messages == stored == store.history(CID)
    assert (snap.version, snap.last_seq, snap.compacted) == (0, 6, False)


def test_history_pages(store: ConversationStore) -> None:
    stored = fill(store, 10)
    assert store.history(CID, offset=3, limit=4) == stored[3:7]
    assert store.history(CID, offset=8) == stored[8:]
    assert store.history(CID, offset=20) == []
    assert store.history(CID, limit=0) == []
    with pytest.raises(StoreError):
        store.history(CID, offset=-1)


def test_get_keeps_asked_order_and_rejects_unknown(store: ConversationStore) -> None:
    stored = fill(store, 5)
    assert store.get(CID, [stored[3].id, stored[0].id]) == [stored[3], stored[0]]
    with pytest.raises(UnknownMessage, match="missing-id"):
        store.get(CID, [stored[0].id, "missing-id"])


# --- compaction -------------------------------------------------------------------------------


def test_pin_overlay_shows_in_every_read(store: ConversationStore) -> None:
    first, second = fill(store, 2)
    store.set_pinned(CID, first.id, True)
    assert [m.pinned for m in store.context(CID).messages] == [True, False]
    assert [m.pinned for m in store.history(CID)] == [True, False]
    assert store.get(CID, [first.id])[0].pinned
    compact(store, CID, keep=1)
    store.set_pinned(CID, second.id, True)
    store.set_pinned(CID, first.id, False)
    assert [m.pinned for m in store.history(CID) if m.id in {first.id, second.id}] == [False, True]
    assert store.context(CID).messages[-1].pinned
    with pytest.raises(UnknownMessage):
        store.set_pinned(CID, "nope", True)


def test_pin_bumps_the_version_so_a_compaction_planned_before_it_fails(
    store: ConversationStore,
) -> None:
    stored = fill(store, 6)
    snap = store.context(CID)
    store.set_pinned(CID, stored[1].id, True)  # between a compaction's snapshot and its commit
    assert store.context(CID).version == snap.version + 1
    with pytest.raises(VersionConflict):
        compact(store, CID, keep=2, snapshot=snap)
    assert store.count(CID) == 6 and store.events(CID) == []
    after = compact(store, CID, keep=2)  # planned again, on the pinned context
    assert after.version == snap.version + 2 and after.compacted
    store.set_pinned(CID, stored[5].id, False)  # an unpin too
    assert store.context(CID).version == after.version + 1
    # Samples count compactions, not versions: the chart places each event at its sample.
    sample = store.add_sample(CID, Sample("compaction", "t", 1, None))
    assert sample is not None and sample.version == 1


def test_commit_compaction_replaces_list_and_records_everything(store: ConversationStore) -> None:
    store.create(CID, system_prompt="prompt")
    stored = fill(store, 10)
    snap = compact(store, CID, keep=3)
    assert snap.version == 1 and snap.compacted
    assert ids(snap.messages) == ["sum_v1", *ids(stored[-3:])]
    assert snap.messages[0].kind == KIND_SUMMARY
    assert snap.messages[0].created_at is not None
    assert snap.last_seq == 11
    assert store.context(CID) == snap
    assert store.system_prompt(CID) == ("prompt", True)
    (ev,) = store.events(CID)
    assert ev == event(summary_id="sum_v1")
    history = store.history(CID)
    assert ids(history) == [*ids(stored), "sum_v1"], "history keeps every original"


def test_compaction_keeps_messages_appended_after_the_snapshot(store: ConversationStore) -> None:
    stored = fill(store, 6)
    snap = store.context(CID)
    late = fill(store, 2, prefix="late")  # arrives while the summarizer runs
    new = compact(store, CID, keep=2, snapshot=snap)
    assert ids(new.messages) == ["sum_v1", *ids(stored[-2:]), *ids(late)]
    assert new.last_seq == 9


def test_compaction_does_not_duplicate_late_ids_already_kept(store: ConversationStore) -> None:
    fill(store, 4)
    snap = store.context(CID)
    (late,) = store.append(CID, [user("late")])
    summary = Message(role="user", kind=KIND_SUMMARY, id="s1", content="sum")
    new = store.commit_compaction(
        CID,
        expected_version=0,
        snapshot_last_seq=snap.last_seq,
        summary=summary,
        context_ids=["s1", late.id],
        event=event(summary_id="s1"),
    )
    assert ids(new.messages) == ["s1", late.id]


def test_appends_after_compaction_go_into_context(store: ConversationStore) -> None:
    fill(store, 6)
    compact(store, CID, keep=2)
    more = fill(store, 3, prefix="after")
    snap = store.context(CID)
    assert ids(snap.messages)[-3:] == ids(more)
    assert len(snap.messages) == 1 + 2 + 3
    assert snap.last_seq == 10
    assert store.count(CID) == 10


def test_second_compaction_folds_the_first(store: ConversationStore) -> None:
    fill(store, 6)
    compact(store, CID, keep=2)
    fill(store, 4, prefix="b")
    snap = compact(store, CID, keep=1)
    assert snap.version == 2
    assert ids(snap.messages)[0] == "sum_v2"
    assert len(snap.messages) == 2
    assert [e.summary_id for e in store.events(CID)] == ["sum_v1", "sum_v2"]
    assert store.count(CID) == 12


def test_version_conflict_changes_nothing(store: ConversationStore) -> None:
    fill(store, 8)
    stale = store.context(CID)
    compact(store, CID, keep=2)  # the concurrent compaction that wins
    before = (store.history(CID), store.context(CID), store.events(CID))
    with pytest.raises(VersionConflict, match="expected context version 0, found 1"):
        compact(store, CID, keep=4, snapshot=stale, summary_id="loser")
    assert (store.history(CID), store.context(CID), store.events(CID)) == before
    with pytest.raises(UnknownMessage):
        store.get(CID, ["loser"])


def test_unknown_context_id_writes_nothing(store: ConversationStore) -> None:
    store.create(CID, system_prompt="p")
    fill(store, 4)
    before = (store.history(CID), store.context(CID), store.events(CID))
    summary = Message(role="user", kind=KIND_SUMMARY, id="s1", content="sum")
    with pytest.raises(UnknownMessage, match="ghost"):
        store.commit_compaction(
            CID,
            expected_version=0,
            snapshot_last_seq=4,
            summary=summary,
            context_ids=["s1", "ghost"],
            event=event(summary_id="s1"),
        )
    assert (store.history(CID), store.context(CID), store.events(CID)) == before
    assert store.system_prompt(CID) == ("p", False)


def test_compaction_rejects_bad_summary_ids(store: ConversationStore) -> None:
    stored = fill(store, 4)
    snap = store.context(CID)

    def commit(summary_id: str, context_ids: list[str], event_id: str = "") -> None:
        store.commit_compaction(
            CID,
            expected_version=0,
            snapshot_last_seq=snap.last_seq,
            summary=Message(role="user", kind=KIND_SUMMARY, id=summary_id, content="s"),
            context_ids=context_ids,
            event=event(summary_id=event_id),
        )

    with pytest.raises(StoreError, match="preassigned id"):
        commit("", [])
    with pytest.raises(StoreError, match="already exists"):
        commit(stored[0].id, [stored[0].id])
    with pytest.raises(StoreError, match="twice"):
        commit("s1", ["s1", stored[1].id, stored[1].id])
    with pytest.raises(StoreError, match="other"):
        commit("s1", ["s1"], event_id="other")
    assert store.count(CID) == 4 and store.context(CID).version == 0


# --- recall -----------------------------------------------------------------------------------


def test_recall_finds_an_evicted_message(store: ConversationStore) -> None:
    (port,) = store.append(CID, [user("our database port is 5433")])
    fill(store, 8)
    snap = compact(store, CID, keep=2)
    assert port.id not in ids(snap.messages)
    hits = store.recall(CID, "5433")
    assert [h.id for h in hits] == [port.id]
    (hit,) = hits
    assert (hit.role, hit.seq) == ("user", 1)
    assert "5433" in hit.snippet
    assert hit.score > 0


def test_recall_searches_summaries_and_tool_calls(store: ConversationStore) -> None:
    call = ToolCall("c1", "grep_repository", '{"pattern": "TODO"}')
    (asked,) = store.append(CID, [assistant("", tool_calls=(call,))])
    store.append(CID, [Message(role="tool", content="none", tool_call_id="c1")])
    fill(store, 4)
    compact(store, CID, keep=1)
    assert [h.id for h in store.recall(CID, "grep_repository")] == [asked.id]
    assert [h.id for h in store.recall(CID, "sum_v1")] == ["sum_v1"]


def test_recall_chinese(store: ConversationStore) -> None:
    (fact,) = store.append(CID, [user("数据库端口是 5433")])
    store.append(CID, [assistant("好的，我记住了。")])
    for query in ("端口", "数据库", "5433", "端口是"):
        hits = store.recall(CID, query)
        assert fact.id in [h.id for h in hits], query
        assert hits[0].id == fact.id, query


def test_recall_ranks_best_first_and_is_case_insensitive(store: ConversationStore) -> None:
    store.append(CID, [user("the port is open")])
    (both,) = store.append(CID, [user("Database PORT: the database port is 5433")])
    store.append(CID, [user("nothing relevant here")])
    hits = store.recall(CID, "database port")
    assert hits[0].id == both.id
    assert len(hits) == 2
    assert hits[0].score >= hits[1].score
    assert store.recall(CID, "DATABASE")[0].id == both.id


def test_recall_limit_and_snippet_window(store: ConversationStore) -> None:
    long_text = "x" * 600 + " needle here " + "y" * 600
    (long,) = store.append(CID, [user(long_text)])
    for i in range(15):
        store.append(CID, [user(f"needle {i}")])
    assert len(store.recall(CID, "needle", limit=5)) == 5
    assert store.recall(CID, "needle", limit=0) == []
    (hit,) = [h for h in store.recall(CID, "needle", limit=20) if h.id == long.id]
    assert len(hit.snippet) <= 200
    assert "needle" in hit.snippet


def test_recall_never_raises_on_query_syntax(store: ConversationStore) -> None:
    store.append(CID, [user('say "hello" (loudly) -- a*b: x AND y NEAR z 5433')])
    queries = [
        '"',
        '"hello',
        "*",
        "a*b",
        "(",
        "(loudly)",
        ")",
        ":",
        "a*b:",
        "-",
        "--",
        "AND",
        "x AND y",
        "NEAR",
        "NEAR(x y)",
        "OR",
        "NOT",
        "^",
        "col:5433",
        "'",
        "",
        "   ",
    ]
    for query in queries:
        hits = store.recall(CID, query)
        assert isinstance(hits, list), query
    assert store.recall(CID, "(loudly)")
    assert store.recall(CID, '"hello"')
    assert store.recall(CID, "AND")
    assert store.recall(CID, "") == []


def test_recall_stays_in_its_conversation(store: ConversationStore) -> None:
    store.append("a", [user("secret 5433 alpha")])
    store.append("b", [user("secret 5433 beta")])
    assert [h.snippet for h in store.recall("a", "5433")] == ["secret 5433 alpha"]
    assert [h.snippet for h in store.recall("b", "端口 5433")] == ["secret 5433 beta"]


# --- JSONL ------------------------------------------------------------------------------------

OPENAI_CONVERSATION: list[dict[str, Any]] = [
    {"role": "developer", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "read it"}], "name": "ann"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"a.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "print('端口')"},
    {"role": "assistant", "content": "done", "reasoning_content": "easy"},
]


def test_jsonl_round_trip(store: ConversationStore) -> None:
    imported = import_jsonl(store, CID, [json.dumps(d) + "\n" for d in OPENAI_CONVERSATION])
    assert imported == len(OPENAI_CONVERSATION)
    assert [m.to_openai() for m in store.history(CID)] == OPENAI_CONVERSATION
    out = io.StringIO()
    assert export_jsonl(store, CID, out) == len(OPENAI_CONVERSATION)
    lines = out.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == OPENAI_CONVERSATION
    import_jsonl(store, "copy", [*lines, ""])
    again = io.StringIO()
    export_jsonl(store, "copy", again)
    assert again.getvalue() == out.getvalue()


def test_jsonl_export_context_only(store: ConversationStore) -> None:
    fill(store, 6)
    snap = compact(store, CID, keep=2)
    out = io.StringIO()
    export_jsonl(store, CID, out, context_only=True)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [m.to_openai() for m in snap.messages]
    full = io.StringIO()
    assert export_jsonl(store, CID, full) == 7


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"role": "wizard", "content": "x"}', "unknown role"),
        ('{"role": "tool", "tool_call_id": "nope", "content": "x"}', "unknown tool_call_id"),
        ("[1, 2]", "expected an object"),
    ],
)
def test_jsonl_import_of_a_bad_line_names_it_and_imports_nothing(
    store: ConversationStore, bad: str, reason: str
) -> None:
    store.append(CID, [user("already here")])
    lines = [json.dumps({"role": "user", "content": "ok"}), "", bad, json.dumps({"role": "user"})]
    with pytest.raises(ImportLineError, match=f"line 3: .*{reason}") as info:
        import_jsonl(store, CID, lines)
    assert info.value.line == 3
    assert isinstance(info.value, StoreError)
    assert store.count(CID) == 1
    with pytest.raises(ImportLineError):
        import_jsonl(store, "fresh", lines)
    assert not store.exists("fresh")


# --- composition samples ----------------------------------------------------------------------


def test_samples_number_turns_carry_the_version_and_grow(store: ConversationStore) -> None:
    fill(store, 4)
    assert store.latest_sample(CID) is None and store.samples(CID) == []
    first = Sample("append", "t1", 4, 1000, reserved=50, system=20, messages=80, tool_outputs=30)
    # Growing needs something to grow from: nothing is recorded before the first whole sample.
    assert store.add_sample(CID, first, grow=True) is None
    assert store.samples(CID) == []
    stored = store.add_sample(CID, first)
    assert stored is not None and (stored.turn, stored.version) == (1, 0)
    added = Sample("append", "t2", 2, 1000, reserved=50, system=25, pinned=5, messages=10)
    grown = store.add_sample(CID, added, grow=True)
    assert grown is not None
    assert (grown.turn, grown.in_context, grown.system, grown.pinned) == (2, 6, 25, 5)
    assert (grown.messages, grown.tool_outputs, grown.at) == (90, 30, "t2")
    compact(store, CID, keep=1)
    after = Sample("compaction", "t3", 3, 1000, reserved=50, system=25, summary=40, messages=5)
    stored_after = store.add_sample(CID, after)
    assert stored_after is not None and (stored_after.turn, stored_after.version) == (3, 1)
    every = store.samples(CID)
    assert [s.turn for s in every] == [1, 2, 3]
    assert every == [stored, grown, stored_after]
    assert store.samples(CID, since=2) == [stored_after]
    assert store.latest_sample(CID) == stored_after
    # The parts add up to the total, and the window holds total, reserve and free room.
    data = stored_after.as_dict()
    assert sum(data["parts"].values()) == data["total"] == 70
    assert data["total"] + data["reserved"] + data["free"] == 1000


def test_samples_stay_in_their_conversation_and_refuse_nonsense(store: ConversationStore) -> None:
    store.create("a")
    store.create("b")
    store.add_sample("a", Sample("append", "t", 1, None, messages=7))
    assert store.samples("b") == [] and store.latest_sample("b") is None
    bad = [
        (Sample("rewind", "t", 1, None), "kind"),  # type: ignore[arg-type]
        (Sample("append", "t", -1, None), "in_context"),
        (Sample("append", "t", 1, 0), "window"),
        (Sample("append", "t", 1, None, summary=-3), "summary"),
    ]
    for sample, named in bad:
        with pytest.raises(StoreError, match=named):
            store.add_sample("b", sample)
    assert store.samples("b") == []
    unwindowed = store.latest_sample("a")
    assert unwindowed is not None and (unwindowed.free, unwindowed.reserved_shown) == (0, 0)


def test_an_append_records_its_sample_in_its_own_call(store: ConversationStore) -> None:
    """`append(sample=)`: called with the stored messages and the system prompt only when
    there is a sample to grow, and what it returns grows the latest, as `add_sample` would."""
    calls: list[tuple[list[str], str]] = []

    def sample(stored: Sequence[Message], system_prompt: str) -> Sample | None:
        calls.append(([m.content for m in stored], system_prompt))
        return Sample("append", "t2", len(stored), 1000, system=9, messages=7)

    store.create(CID, system_prompt="be brief")
    store.append(CID, [user("a")], sample=sample)
    assert calls == [] and store.samples(CID) == []  # nothing to grow yet
    store.add_sample(CID, Sample("append", "t1", 1, 1000, system=4, messages=3))
    store.append(CID, [user("b"), assistant("c")], sample=sample)
    assert calls == [(["b", "c"], "be brief")]
    latest = store.latest_sample(CID)
    assert latest is not None
    assert (latest.turn, latest.in_context, latest.system, latest.messages) == (2, 3, 9, 10)
    store.append(CID, [user("d")], sample=lambda stored, prompt: None)
    assert store.latest_sample(CID) == latest  # None records nothing; the append stands
    assert [m.content for m in store.context(CID).messages] == ["a", "b", "c", "d"]


def test_a_context_read_since_an_earlier_one_is_the_whole_read(store: ConversationStore) -> None:
    """`context(since=)` gives what a whole read gives: after appends, after nothing, after a
    compaction and after a pin."""
    fill(store, 4)
    first = store.context(CID)
    assert store.context(CID, since=first) == first
    fill(store, 3, prefix="n")
    grown = store.context(CID, since=first)
    assert grown == store.context(CID)
    assert all(map(operator.is_, first.messages, grown.messages[:4]))  # read once
    compact(store, CID, keep=2)
    after = store.context(CID, since=grown)
    assert after == store.context(CID) and after.compacted
    fill(store, 2, prefix="p")
    assert store.context(CID, since=after) == store.context(CID)
    latest = store.context(CID)
    store.set_pinned(CID, latest.messages[-1].id, True)
    pinned = store.context(CID, since=latest)
    assert pinned == store.context(CID) and pinned.messages[-1].pinned
