"""A Google ADK agent kept inside a 2,000-token window by precis. No API key: a scripted BaseLlm.

python examples/adk_agent.py
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from precis import CompactionSettings
from precis.integrations import Sessions
from precis.integrations.adk import PrecisPlugin, precis_tools
from precis.stores import open_store


class FakeModel(BaseLlm):
    """Checks one table per user turn, then answers once the check came back."""

    model: str = "fake"
    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts or []
        answered = next((p.function_response for p in last if p.function_response), None)
        if answered is not None:
            part = types.Part(text=f"Done: {(answered.response or {}).get('result')}")
        else:
            self.calls += 1
            call = types.FunctionCall(name="check_table", args={"n": self.calls})
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def check_table(n: int) -> str:
    """Check one table of the billing database."""
    return f"table_{n}: 1,204 rows, checksum ok, owner billing (audit-{n:04d})"


async def main() -> None:
    store = open_store(None, home=Path(tempfile.mkdtemp()))  # SQLite in a throwaway folder
    sessions = Sessions(store, settings=CompactionSettings(context_window=2000))
    plugin = PrecisPlugin(sessions)
    agent = LlmAgent(
        name="auditor",
        model=FakeModel(),
        instruction="You audit the billing database.",
        tools=[check_table, *precis_tools(sessions)],
    )
    runner = Runner(
        app=App(name="audit", root_agent=agent, plugins=[plugin]),
        session_service=InMemorySessionService(),
    )
    adk_session = await runner.session_service.create_session(app_name="audit", user_id="ana")
    for n in range(30):
        message = types.Content(role="user", parts=[types.Part(text=f"Next table ({n}).")])
        async for _ in runner.run_async(
            user_id="ana", session_id=adk_session.id, new_message=message
        ):
            pass
    stored = await runner.session_service.get_session(
        app_name="audit", user_id="ana", session_id=adk_session.id
    )
    session = plugin.session("audit", "ana", adk_session.id, "auditor")  # per agent of a session
    held = len(stored.events) if stored else 0
    print(f"the ADK session holds {held} events; the model saw the compacted view")
    print(f"compactions: {len(await session.events())}")
    print("recall audit-0003:", [hit.snippet for hit in await session.recall("audit-0003")][:1])


if __name__ == "__main__":
    asyncio.run(main())
