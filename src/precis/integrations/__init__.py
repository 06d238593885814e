"""precis inside agent frameworks: one module per framework, each an optional extra.

- `precis.integrations.openai_agents` — `PrecisSession`, a Session for the OpenAI Agents SDK
  (`pip install 'precis-context[agents]'`).
- `precis.integrations.pydantic_ai` — `PrecisCapability` and `precis_history_processor` for
  pydantic-ai (`pip install 'precis-context[pydantic-ai]'`).
- `precis.integrations.langchain` — `PrecisMiddleware` for LangChain v1 agents
  (`pip install 'precis-context[langchain]'`).
- `precis.integrations.adk` — `PrecisPlugin`, a runner plugin for Google ADK
  (`pip install 'precis-context[adk]'`).
- `precis.integrations.llama_index` — `PrecisMemory`, a memory for LlamaIndex agent workflows
  (`pip install 'precis-context[llama-index]'`).

Each is built on `Sessions`: one precis session per framework thread (LangChain's `thread_id`,
pydantic-ai's conversation, an Agents SDK session id, an ADK session, a LlamaIndex memory's
`session_id`) over one store, so one agent object serves
many users at once and none sees another's messages. The framework's messages are stored
as originals, the model is sent the compacted view (system prompt and tool definitions counted in
the budget), and `search_history` / `read_original` can be given to the agent as its own tools.
Importing this package imports no framework; each module needs its own.
"""

from precis.integrations._common import Sessions

__all__ = ["Sessions"]
