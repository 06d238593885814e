"""A pydantic-ai agent kept inside a 2,000-token window by precis. No API key: FunctionModel.

pip install 'precis-context[pydantic-ai]'
python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from precis import CompactionSettings
from precis.integrations import Sessions
from precis.integrations.pydantic_ai import PrecisCapability
from precis.stores import open_store

CHECKED = [0]


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Check one table per run, then say so once the check came back."""
    last = messages[-1].parts[-1]
    if last.part_kind == "tool-return":
        return ModelResponse(parts=[TextPart(f"Done: {last.content}")])
    CHECKED[0] += 1
    n = CHECKED[0]
    return ModelResponse(parts=[ToolCallPart("check_table", {"n": n}, tool_call_id=f"call_{n}")])


async def main() -> None:
    store = open_store(None, home=Path(tempfile.mkdtemp()))  # SQLite in a throwaway folder
    sessions = Sessions(store, settings=CompactionSettings(context_window=2000))
    agent = Agent(
        FunctionModel(model),
        instructions="You audit the billing database.",
        capabilities=[PrecisCapability(sessions, history_tools=True)],
    )

    @agent.tool_plain
    def check_table(n: int) -> str:
        """Check one table of the billing database."""
        return f"table_{n}: 1,204 rows, checksum ok, owner billing (audit-{n:04d})"

    history: list[ModelMessage] = []
    for n in range(30):
        result = await agent.run(
            f"Check the next table ({n}).", message_history=history, conversation_id="billing-audit"
        )
        history = result.all_messages()
    session = sessions.session("billing-audit")  # one precis conversation per conversation_id
    print(f"the run holds {len(history)} messages; the model saw the compacted view")
    print(f"compactions: {len(await session.events())}")
    print("recall audit-0003:", [hit.snippet for hit in await session.recall("audit-0003")][:1])


if __name__ == "__main__":
    asyncio.run(main())
