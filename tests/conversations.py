"""Hypothesis strategies for random tool-using conversations that obey the validity rules."""

from __future__ import annotations

from hypothesis import strategies as st

from precis.core.messages import Message, ToolCall


@st.composite
def tool_conversations(draw: st.DrawFn, *, min_size: int = 0, max_turns: int = 25) -> list[Message]:
    """A valid conversation: user turns, assistant replies, parallel tool calls and results,
    sometimes a system prompt first and sometimes a final call still awaiting its result."""
    out: list[Message] = []
    serial = 0

    def add(**kw: object) -> None:
        nonlocal serial
        out.append(Message(id=f"m{serial:04d}", **kw))  # type: ignore[arg-type]
        serial += 1

    if draw(st.booleans()):
        add(role="system", content="You are a careful agent.")
    turns = draw(st.integers(min_value=min_size, max_value=max_turns))
    calls = 0
    for _ in range(turns):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "user+assistant"]))
        pinned = draw(st.integers(0, 9)) == 0
        if kind in {"user", "user+assistant"}:
            add(role="user", content="u" * draw(st.integers(1, 400)), pinned=pinned)
        if kind in {"assistant", "user+assistant"}:
            add(role="assistant", content="a" * draw(st.integers(0, 400)))
        if kind == "tools":
            n = draw(st.integers(1, 3))
            ids = [f"call_{calls + k}" for k in range(n)]
            calls += n
            add(
                role="assistant",
                content="",
                tool_calls=tuple(ToolCall(i, "run", '{"cmd":"ls"}') for i in ids),
                pinned=pinned,
            )
            for i in ids:
                add(role="tool", content="t" * draw(st.integers(0, 2000)), tool_call_id=i)
    if draw(st.booleans()):
        add(role="assistant", content="", tool_calls=(ToolCall(f"call_{calls}", "run", "{}"),))
    return out
