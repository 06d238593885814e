"""The user's words are kept whole: a red line as one sentence, CJK punctuation inside it
included, and the task, character for character through repeated compactions."""

from __future__ import annotations

import pytest

from precis.core.messages import KIND_SUMMARY
from precis.engine.settings import CompactionSettings
from precis.facts import constraint_sentences, stored_ledger
from precis.session import Session
from precis.stores.memory import MemoryStore
from precis.summarize.mock import MockSummarizer

RED = "不要用 npm 安装任何东西，只用 pnpm；never touch the legacy/ directory."
TASK = (
    "把 checkout 服务迁移到 pnpm workspace：先改 packages/api，"
    "再改 packages/web；完成后跑一遍 e2e。"
)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (f"还有一条规矩。{RED}", [RED]),
        (
            "Use pnpm, e.g. pnpm add; never run npm. Thanks!",
            ["Use pnpm, e.g. pnpm add; never run npm."],
        ),
        ("不要改测试；只改实现！其余随意。", ["不要改测试；只改实现！"]),
        ("Don't push.\nNever force-push main.", ["Don't push.", "Never force-push main."]),
    ],
)
def test_a_rule_is_one_sentence_across_semicolons_and_abbreviations(
    text: str, sentences: list[str]
) -> None:
    assert constraint_sentences(text) == sentences


def test_a_sentence_that_reports_rather_than_rules_is_no_red_line() -> None:
    reported = (
        "Please remember that the container is exposed to the internet, so use what you like. "
        "If you have any suggestions on where to begin, it's always appreciated. "
        "This could help to avoid confusion. "
        "As expected, it works when you don't use the tuple syntax in the match."
    )
    assert constraint_sentences(reported) == []
    ruled = "Remember to run the tests. Always run make lint. Avoid touching legacy/."
    assert constraint_sentences(ruled) == [
        "Remember to run the tests.",
        "Always run make lint.",
        "Avoid touching legacy/.",
    ]


@pytest.mark.parametrize("pin_task", [True, False])
def test_the_red_line_and_the_task_survive_ten_mock_compactions_verbatim(pin_task: bool) -> None:
    settings = CompactionSettings(context_window=2000, pin_task=pin_task)
    session = Session(MemoryStore(), "red", None, MockSummarizer(), settings)
    if not pin_task:
        session.set_task(TASK)
    session.append(
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": "好的，我先看 packages/api。"},
        {"role": "user", "content": f"还有一条规矩。{RED}"},
        {"role": "assistant", "content": "明白。"},
    )
    compactions = 0
    for step in range(400):
        session.append(
            {
                "role": "user",
                "content": f"第 {step} 步：继续处理 packages/web，看 lockfile 第 {step} 行。",
            },
            {"role": "assistant", "content": f"第 {step} 步完成，lockfile 更新到 v{step}。"},
        )
        if not session.maybe_compact():
            continue
        compactions += 1
        context = session.context()
        (summary,) = [m for m in context if m.kind == KIND_SUMMARY]
        assert RED in summary.metadata["summary"], (compactions, summary.metadata["summary"])
        rules = [f.text for f in stored_ledger(summary).facts if f.kind == "constraint"]
        assert RED in rules and not any(r != RED and r in RED for r in rules), rules
        assert any(m.pinned and m.content == TASK for m in context)
        if compactions == 10:
            break
    assert compactions == 10
