"""An OpenAI Agents SDK agent kept inside a 2,000-token window by precis. No API key: a fake Model.

pip install 'precis-context[agents]'
python examples/openai_agents_session.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    ModelResponse,
    RunConfig,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.models.interface import Model
from agents.testing.model import assistant_message, function_call

from precis import CompactionSettings
from precis.integrations import Sessions
from precis.integrations.openai_agents import PrecisSession
from precis.stores import open_store


class FakeModel(Model):
    """Checks one table per run, then answers once the check came back."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.calls += 1
        last = input[-1] if isinstance(input, list) else {}
        if last.get("type") == "function_call_output":
            output = [assistant_message(f"Done: {last['output']}")]
        else:
            output = [function_call("check_table", {"n": self.calls}, call_id=f"call_{self.calls}")]
        return ModelResponse(output=output, usage=Usage(), response_id=f"resp_{self.calls}")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def check_table(n: int) -> str:
    """Check one table of the billing database."""
    return f"table_{n}: 1,204 rows, checksum ok, owner billing (audit-{n:04d})"


async def main() -> None:
    set_tracing_disabled(True)
    store = open_store(None, home=Path(tempfile.mkdtemp()))  # SQLite in a throwaway folder
    sessions = Sessions(store, settings=CompactionSettings(context_window=2000))
    session = PrecisSession("billing-audit", sessions)  # one per Agents SDK session id
    precis = session.precis
    agent = Agent(
        name="auditor",
        instructions="You audit the billing database.",
        tools=[check_table],
        model=FakeModel(),
    )
    config = RunConfig(call_model_input_filter=session.input_filter)
    for n in range(30):
        await Runner.run(agent, f"Check the next table ({n}).", session=session, run_config=config)
    shown, stored = len(await session.get_items()), len(await precis.history())
    print(f"the session shows {shown} items of {stored} stored")
    print(f"compactions: {len(await precis.events())}")
    print("recall audit-0003:", [hit.snippet for hit in await precis.recall("audit-0003")][:1])


if __name__ == "__main__":
    asyncio.run(main())
