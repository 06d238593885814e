"""A LlamaIndex FunctionAgent kept inside a 2,000-token window by precis. No API key: LlamaIndex's
MockFunctionCallingLLM, scripted.

python examples/llama_index_agent.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from precis import CompactionSettings
from precis.integrations import Sessions
from precis.integrations.llama_index import PrecisMemory, precis_tools
from precis.stores import open_store

CHECKED = [0]


def model(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Check one table per run, then say so once the check came back."""
    last = messages[-1]
    if last.role == MessageRole.TOOL:
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Done: {last.content}")
    CHECKED[0] += 1
    n = CHECKED[0]
    call = ToolCallBlock(tool_call_id=f"call_{n}", tool_name="check_table", tool_kwargs={"n": n})
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


def check_table(n: int) -> str:
    """Check one table of the billing database."""
    return f"table_{n}: 1,204 rows, checksum ok, owner billing (audit-{n:04d})"


async def main() -> None:
    store = open_store(None, home=Path(tempfile.mkdtemp()))  # SQLite in a throwaway folder
    # A FunctionAgent sends the run's own tool steps besides the memory: leave them room.
    sessions = Sessions(store, settings=CompactionSettings(context_window=1600))
    tools = [FunctionTool.from_defaults(check_table), *precis_tools()]
    agent = FunctionAgent(
        tools=tools,
        llm=MockFunctionCallingLLM(response_generator=model, is_chat_model=True),
        system_prompt="You audit the billing database.",
    )
    memory = PrecisMemory.from_defaults(  # one precis conversation per session_id
        sessions=sessions,
        session_id="billing-audit",
        system_prompt="You audit the billing database.",
        tools=tools,
    )
    for n in range(30):
        await agent.run(user_msg=f"Check the next table ({n}).", memory=memory)
    shown, stored = len(await memory.aget()), len(await memory.aget_all())
    print(f"the memory shows {shown} messages of {stored} stored")
    print(f"compactions: {len(await memory.session.events())}")
    print(
        "recall audit-0003:", [hit.snippet for hit in await memory.session.recall("audit-0003")][:1]
    )


if __name__ == "__main__":
    asyncio.run(main())
