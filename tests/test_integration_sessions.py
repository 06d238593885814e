"""`Sessions`: one precis conversation per framework thread, named safely, one session each."""

from __future__ import annotations

import re

import pytest

from precis.core.errors import InvalidInput
from precis.integrations import Sessions
from precis.server.models import CONVERSATION_ID_PATTERN
from precis.stores import MemoryStore

HOSTILE = ["../..", "a\x00b", "x" * 10_000, "user:42", " padded ", "ü-nicode", "-lead", "\ud800"]


def test_a_plain_thread_id_is_the_conversation_id_after_the_prefix() -> None:
    assert Sessions(MemoryStore()).conversation_id("user-42") == "user-42"
    assert Sessions(MemoryStore(), prefix="lc-").conversation_id("user.42_a") == "lc-user.42_a"
    longest = Sessions(MemoryStore(), prefix="p" * 64)
    assert longest.conversation_id("u" * 64) == "p" * 64 + "u" * 64


@pytest.mark.parametrize("prefix", ["", "billing:"])
def test_any_other_thread_id_is_named_by_a_digest_the_service_accepts(prefix: str) -> None:
    sessions = Sessions(MemoryStore(), prefix=prefix)
    names = [sessions.conversation_id(t) for t in HOSTILE]
    assert len(set(names)) == len(HOSTILE)
    for name in names:
        assert re.fullmatch(CONVERSATION_ID_PATTERN, name), name
        assert name.startswith(prefix) and "sha256:" in name
    # A verbatim name never holds the digest's colon after the prefix: no thread can take
    # another's conversation by naming itself like a digest.
    assert sessions.conversation_id("sha256-" + "0" * 40) != names[0]


@pytest.mark.parametrize("thread", ["", None, 42])
def test_an_empty_or_non_text_thread_id_is_refused(thread: object) -> None:
    with pytest.raises(InvalidInput, match="thread id"):
        Sessions(MemoryStore()).conversation_id(thread)  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["../", "-x", "a b", "p" * 65])
def test_a_prefix_that_cannot_make_safe_ids_is_refused(prefix: str) -> None:
    with pytest.raises(InvalidInput, match="prefix"):
        Sessions(MemoryStore(), prefix=prefix)


def test_each_thread_keeps_one_session_with_the_settings_and_compiler_given() -> None:
    def compile_prompt(text: str, context: list[object]) -> str:
        return text + "!"

    sessions = Sessions(MemoryStore(), compile_system_prompt=compile_prompt)
    alpha = sessions.session("alpha")
    assert sessions.session("alpha") is alpha
    assert sessions.session("bravo") is not alpha
    assert alpha.conversation_id == "alpha" and alpha._compile is compile_prompt


def test_max_open_keeps_the_threads_used_last_and_refuses_nonsense() -> None:
    sessions = Sessions(MemoryStore(), max_open=2)
    alpha, bravo = sessions.session("alpha"), sessions.session("bravo")
    assert sessions.session("alpha") is alpha  # alpha is now the one used last
    sessions.session("charlie")
    assert sessions.session("alpha") is alpha and sessions.session("bravo") is not bravo
    with pytest.raises(InvalidInput, match="max_open"):
        Sessions(MemoryStore(), max_open=0)
