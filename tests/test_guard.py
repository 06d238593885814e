"""The guard: facts found by rule, kept within the clip, and carried across compactions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conformance import TRAJECTORY_FILES, trajectory_messages
from hypothesis import given
from hypothesis import strategies as st

from precis.core.jscompat import utf16_len
from precis.core.memo import Memo
from precis.core.messages import Message, ToolCall
from precis.summarize.guard import (
    KINDS,
    PRIORITY,
    Fact,
    Ledger,
    apply_guard,
    carry,
    extract_facts,
    fact_present,
    missing_facts,
    retention,
)

ZH_RULE = "不许动 legacy/ 目录，只加新模块。"
NPM_RULE = "Never use npm, only pnpm."


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def conversation() -> list[Message]:
    """A short bilingual session: rules, a read, an edit, a failing test and its fix, a commit."""
    return [
        Message(
            role="user",
            id="u1",
            content=(
                f"给 billing 服务加一个 CSV 导出功能。{ZH_RULE}\n{NPM_RULE} "
                "The test database listens on port 5433."
            ),
        ),
        Message(
            role="assistant",
            id="a1",
            tool_calls=(call("c1", "read_file", path="src/billing/export.py"),),
        ),
        Message(role="tool", id="t1", tool_call_id="c1", content="def export(rows): ..."),
        Message(
            role="assistant",
            id="a2",
            tool_calls=(
                call("c2", "write_file", path="src/billing/csv_export.py", content="import csv"),
            ),
        ),
        Message(role="tool", id="t2", tool_call_id="c2", content="File created successfully."),
        Message(role="assistant", id="a3", tool_calls=(call("c3", "bash", command="pytest -q"),)),
        Message(
            role="tool",
            id="t3",
            tool_call_id="c3",
            content="FAILED tests/test_csv.py::test_export - KeyError: 'amount'\n1 failed",
        ),
        Message(
            role="assistant",
            id="a4",
            content="The column is called total, not amount; renaming the key fixes it.",
        ),
        Message(
            role="assistant",
            id="a5",
            tool_calls=(call("c4", "bash", command="git commit -am 'csv export'"),),
        ),
        Message(
            role="tool",
            id="t4",
            tool_call_id="c4",
            content="[main 3f2a9c1] csv export\n 1 file changed",
        ),
        Message(role="user", id="u2", content="Must we keep the old endpoint?"),
        Message(role="assistant", id="a6", content="Yes, it stays."),
        Message(
            role="user", id="u3", content="好的。别改测试数据。然后把导出加到 README 里面去吧。"
        ),
        Message(role="user", id="u4", content="Remember: deploy window is Friday", pinned=True),
    ]


def texts(facts: list[Fact], kind: str) -> list[str]:
    return [f.text for f in facts if f.kind == kind]


def test_extraction_finds_every_kind_in_a_bilingual_session() -> None:
    facts = extract_facts(conversation())
    constraints = texts(facts, "constraint")
    assert ZH_RULE in constraints
    assert NPM_RULE in constraints
    assert "别改测试数据。" in constraints
    assert not any("old endpoint" in c for c in constraints)  # a question sets no rule
    assert texts(facts, "task")[0].startswith("给 billing 服务加一个 CSV 导出功能")
    assert texts(facts, "file_modified") == ["src/billing/csv_export.py"]
    assert "src/billing/export.py" in texts(facts, "file_read")
    assert "src/billing/csv_export.py" not in texts(facts, "file_read")
    identifiers = texts(facts, "identifier")
    assert "5433" in identifiers
    assert "3f2a9c1" in identifiers
    errors = [f for f in facts if f.kind == "error"]
    assert any("KeyError: 'amount'" in e.text for e in errors)
    assert any("renaming the key fixes it" in e.note for e in errors)
    assert texts(facts, "pinned") == ["Remember: deploy window is Friday"]
    assert any("README" in r for r in texts(facts, "request"))
    # Sources name the message that first gave the fact; the order is the priority order.
    assert next(f for f in facts if f.text == NPM_RULE).source_id == "u1"
    assert next(f for f in facts if f.kind == "file_modified").source_id == "a2"
    ranks = [PRIORITY[f.kind] for f in facts]
    assert ranks == sorted(ranks)
    assert extract_facts(conversation()) == facts  # deterministic


def test_a_given_task_leads_and_its_rules_count() -> None:
    facts = extract_facts(conversation(), task="Ship CSV export. Do not touch the API.")
    assert texts(facts, "task") == ["Ship CSV export. Do not touch the API."]
    assert "Do not touch the API." in texts(facts, "constraint")
    assert next(f for f in facts if f.kind == "task").source_id == "task"


def test_presence_ignores_case_spacing_and_a_leading_dot_slash() -> None:
    path = Fact("file_modified", "./src/a.py", "x")
    assert fact_present(path, "edited src/a.py today")
    assert not fact_present(path, "edited a.py today")  # the basename is not the path
    assert not fact_present(path, "edited src/a.pyc")
    rule = Fact("constraint", "Never   use npm.", "x")
    assert fact_present(rule, "rules: NEVER use\nnpm.")
    port = Fact("identifier", "5433", "x")
    assert fact_present(port, "db on port 5433")
    assert not fact_present(port, "id 154330")
    ticket = Fact("identifier", "#12", "x")
    assert fact_present(ticket, "see PR 12")
    assert not fact_present(ticket, "see #123")
    assert missing_facts([path, rule], "never use npm.") == [path]


def test_a_useless_summary_still_keeps_every_red_line_and_the_task() -> None:
    facts = extract_facts(conversation())
    result = apply_guard("ok", Ledger(tuple(facts)), clip_chars=2000)
    assert utf16_len(result.text) <= 2000
    for fact in facts:
        if fact.kind in {"constraint", "task"}:
            assert fact_present(fact, result.text), fact
    assert result.text.startswith("ok\n\n## ")
    assert not result.dropped
    assert retention(facts, result.text)["overall"] == 1.0


def test_the_heading_follows_the_summary_language() -> None:
    facts = extract_facts(conversation())
    zh = apply_guard(
        "用户要求给账单服务增加导出功能，已经完成了大部分的实现工作。",
        Ledger(tuple(facts)),
        clip_chars=3000,
    )
    assert "## 保留的事实" in zh.text
    assert "约束：" in zh.text
    en = apply_guard(
        "The user asked for a CSV export; most of it is done now.",
        Ledger(tuple(facts)),
        clip_chars=3000,
    )
    assert "## Retained facts" in en.text
    assert "Constraints:" in en.text


def test_nothing_is_appended_when_the_summary_kept_everything() -> None:
    facts = (Fact("constraint", "never use npm", "u1"), Fact("identifier", "5433", "u1"))
    result = apply_guard("Never use npm. DB on 5433.", Ledger(facts), clip_chars=100)
    assert result == type(result)("Never use npm. DB on 5433.", (), ())


def test_priority_decides_what_fits_when_space_is_short() -> None:
    facts = tuple(
        Fact(kind, f"{kind[:4]}-fact-{i:02d}-" + "x" * 20, f"m{i}")
        for i, kind in enumerate(reversed(KINDS))
    )
    summary = "s" * 400
    clip = 300
    result = apply_guard(summary, Ledger(facts), clip_chars=clip)
    assert utf16_len(result.text) <= clip
    assert result.appended and result.dropped
    kept_kinds = [f.kind for f in result.appended]
    dropped_kinds = [f.kind for f in result.dropped]
    assert kept_kinds == list(KINDS[: len(kept_kinds)])
    assert max(PRIORITY[k] for k in kept_kinds) < min(PRIORITY[k] for k in dropped_kinds)
    # The body was cut (and marked), but kept at about a third of the clip.
    body = result.text.split("\n\n## ")[0]
    assert body.endswith("…")
    assert utf16_len(body) >= int(0.35 * clip) - 1


def test_within_a_kind_the_newest_errors_and_files_are_kept_first() -> None:
    # Three errors and three files read, oldest first as the ledger has them: room for one of
    # each kind keeps the newest (an old error is most often one already fixed); the rules keep
    # their own order, the first stated first.
    facts = (
        Fact("constraint", "never use npm", "u1"),
        Fact("constraint", "only pnpm here", "u1"),
        *(Fact("error", f"ValueError: bad row {i}" + "." * 40, f"t{i}") for i in range(3)),
        *(Fact("file_read", f"src/mod_{i}.py" + "_" * 40, f"t{i}") for i in range(3)),
    )
    result = apply_guard("s" * 400, Ledger(facts), clip_chars=260)
    errors = [f.text for f in result.appended if f.kind == "error"]
    assert errors and errors[0].startswith("ValueError: bad row 2")
    assert [f.text for f in result.appended if f.kind == "constraint"] == [
        "never use npm",
        "only pnpm here",
    ]
    dropped = [f.text for f in result.dropped if f.kind == "error"]
    assert dropped and all(not t.startswith("ValueError: bad row 2") for t in dropped)


def test_the_body_is_cut_before_any_fact_is_dropped() -> None:
    facts = (Fact("constraint", "never use npm", "u1"), Fact("task", "ship the export", "u1"))
    result = apply_guard("word " * 100, Ledger(facts), clip_chars=200)
    assert utf16_len(result.text) <= 200
    assert not result.dropped
    assert all(fact_present(f, result.text) for f in facts)
    assert "…" in result.text


@pytest.mark.parametrize("path", TRAJECTORY_FILES, ids=lambda p: p.stem[:40])
def test_the_guard_never_passes_the_clip_on_real_trajectories(path: Path) -> None:
    messages = trajectory_messages(path)
    ledger = Ledger(tuple(extract_facts(messages)))
    assert ledger.facts
    for clip in (200, 350, 700, 1200, 2000, 4000):
        for summary in ("ok", "Summary. " * (clip // 5), "摘要：" * clip):
            result = apply_guard(summary, ledger, clip_chars=clip)
            assert utf16_len(result.text) <= clip
            appended = {id(f) for f in result.appended}
            assert not any(id(f) in appended for f in result.dropped)
            lost = missing_facts(ledger.facts, result.text)
            assert {(f.kind, f.text) for f in lost} <= {(f.kind, f.text) for f in result.dropped}


def test_ledger_json_round_trip_and_merge() -> None:
    facts = extract_facts(conversation())
    ledger = Ledger(tuple(facts))
    data = json.loads(json.dumps(ledger.to_json(), ensure_ascii=False))
    assert Ledger.from_json(data) == ledger
    noted = Ledger((Fact("error", "boom", "7", note="fixed"), *facts))
    assert [list(d.items()) for d in noted.to_json()] == [
        list(f.to_json().items()) for f in noted.facts
    ]
    assert Ledger.from_json([{"kind": "nope", "text": "x"}, 3, {"kind": "task"}]) == Ledger()
    older = Ledger((Fact("task", "a", "1"), Fact("constraint", "b", "1")))
    newer = Ledger((Fact("constraint", "b", "9"), Fact("identifier", "c", "9")))
    merged = older.merge(newer)
    assert [(f.text, f.source_id) for f in merged.facts] == [("a", "1"), ("b", "1"), ("c", "9")]
    assert carry(None, newer.facts) == newer
    assert carry(older, newer.facts) == merged


def test_the_first_rounds_red_lines_survive_ten_compactions() -> None:
    clip = 1500
    ledger: Ledger | None = None
    first: list[Fact] = []
    summary_message: Message | None = None
    for round_no in range(10):
        span: list[Message] = [summary_message] if summary_message is not None else []
        if round_no == 0:
            span += conversation()
        else:
            span += [
                Message(
                    role="user",
                    id=f"r{round_no}",
                    content=f"Round {round_no}: tidy module_{round_no}.py",
                ),
                Message(
                    role="assistant",
                    id=f"r{round_no}a",
                    tool_calls=(
                        call(f"k{round_no}", "edit_file", path=f"src/module_{round_no}.py"),
                    ),
                ),
                Message(role="tool", id=f"r{round_no}t", tool_call_id=f"k{round_no}", content="ok"),
            ]
        new = extract_facts(span)
        if round_no == 0:
            first = [f for f in new if f.kind in {"constraint", "task"}]
        ledger = carry(ledger, new)
        result = apply_guard("ok", ledger, clip_chars=clip)
        assert utf16_len(result.text) <= clip
        summary_message = Message(
            role="user",
            id=f"s{round_no}",
            kind="summary",
            content=result.text,
            metadata={"ledger": ledger.to_json()},
        )
    assert ledger is not None and first
    final = summary_message.content if summary_message is not None else ""
    for fact in first:
        assert fact_present(fact, final), fact
    assert fact_present(Fact("file_modified", "src/module_9.py", ""), final)
    # The ledger stored on the summary is found again by extraction, so carry is not the only way.
    again = extract_facts([summary_message] if summary_message is not None else [])
    assert {(f.kind, f.text) for f in first} <= {(f.kind, f.text) for f in again}


@pytest.mark.property
@given(
    facts=st.lists(
        st.builds(
            Fact,
            st.sampled_from(KINDS),
            st.text(alphabet="ab é𝄞/.", min_size=1, max_size=8),
            st.just("s"),
            st.sampled_from(("", "fix 𝄞")),
        ),
        max_size=8,
    ),
    language=st.sampled_from(("en", "zh")),
    heading=st.sampled_from(("Retained facts", "保留的事实", "h𝄞")),
)
def test_the_section_is_measured_as_rendered(
    facts: list[Fact], language: str, heading: str
) -> None:
    """The guard sizes its section piece by piece instead of rendering it; same length."""
    from precis.summarize import guard

    labels = guard._LABELS[language]
    rendered = guard._render([(f, guard._lines(f)[0]) for f in facts], heading, labels)
    sized = Memo()[guard._SIZED]
    assert guard._section_units(facts, heading, labels, sized) == utf16_len(rendered)


def test_the_guard_does_not_cut_the_body_only_to_put_back_what_the_cut_took() -> None:
    rules = [f"Never run step {i} of the migration by hand; script it, rule {i}." for i in range(5)]
    summary = "## Constraints\n" + "\n".join(f"- {r}" for r in rules)
    task = "Ship the export. " + "It must stream rows from the reports table to CSV files. " * 4
    ledger = Ledger(
        (*(Fact("constraint", r, "u1") for r in rules), Fact("task", task.strip(), "u1"))
    )
    result = apply_guard(summary, ledger, clip_chars=utf16_len(summary) + 20)
    # The task cannot fit beside the rules; cutting them would only have put them back.
    assert result.text == summary
    assert [f.kind for f in result.dropped] == ["task"] and not result.appended
    # With room for it, the task is appended as before.
    roomy = apply_guard(summary, ledger, clip_chars=utf16_len(summary) + 400)
    assert [f.kind for f in roomy.appended] == ["task"] and roomy.text.startswith(summary)
