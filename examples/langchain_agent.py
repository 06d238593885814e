"""A LangChain v1 agent kept inside a 2,000-token window by precis. No API key: a fake model.

pip install 'precis-context[langchain]'
python examples/langchain_agent.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from precis import CompactionSettings, Session
from precis.integrations import Sessions
from precis.integrations.langchain import PrecisMiddleware
from precis.stores import open_store


class FakeToolModel(GenericFakeChatModel):
    """LangChain's fake chat model; it takes the agent's tools as they are."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def replies() -> Iterator[AIMessage]:
    for step in range(1, 1000):
        call = {"name": "check_table", "args": {"n": step}, "id": f"call_{step}"}
        yield AIMessage(content=f"Checking table {step}.", tool_calls=[call])
        yield AIMessage(content=f"Table {step} is fine.")


@tool
def check_table(n: int) -> str:
    """Check one table of the billing database."""
    return f"table_{n}: 1,204 rows, checksum ok, owner billing (audit-{n:04d})"


def main() -> None:
    store = open_store(None, home=Path(tempfile.mkdtemp()))  # SQLite in a throwaway folder
    sessions = Sessions(store, settings=CompactionSettings(context_window=2000))
    agent = create_agent(
        FakeToolModel(messages=replies()),
        [check_table],
        system_prompt="You audit the billing database.",
        middleware=[PrecisMiddleware(sessions, history_tools=True)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "billing-audit"}}  # one conversation per thread
    agent.invoke({"messages": [HumanMessage("Audit every billing table.")]}, config)
    for n in range(30):
        state = agent.invoke({"messages": [HumanMessage(f"Next table ({n}).")]}, config)
    session = Session(store, sessions.conversation_id("billing-audit"))
    print(f"state holds {len(state['messages'])} messages; the model saw the compacted view")
    print(f"compactions: {len(session.events())}")
    print("recall audit-0003:", [hit.snippet for hit in session.recall("audit-0003")][:1])


if __name__ == "__main__":
    main()
