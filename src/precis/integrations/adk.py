"""precis for Google ADK: `PrecisPlugin`, a runner plugin that compacts before every model call.

    sessions = Sessions(store, settings=CompactionSettings(context_window=8000))
    agent = LlmAgent(name="auditor", model=..., tools=[*my_tools, *precis_tools(sessions)])
    app = App(name="app", root_agent=agent, plugins=[PrecisPlugin(sessions)])
    runner = Runner(app=app, session_service=...)

Each agent of an ADK session (the session's app, user and id: an id is unique only within its
app and user; and the agent's name, as each agent is sent its own contents) is its own precis
conversation, so one runner serves many users at once and none sees another's messages.

`before_model_callback` stores the request's new contents as originals, compacts when a trigger
fires, and sends the model the view: pinned · summary · kept. ADK builds each request afresh from
the session's events, so the session itself is never changed (non-destructive). A content becomes
one precis message per function response (paired with its call by id, or, where ADK stripped its
own `adk-` ids, with the earliest unanswered call of that name) and one for the rest, so the
planner never keeps a response without its call. The system instruction and the function
declarations are counted in the budget. Contents are known by their digest and how often that
digest came before, so a restarted process over the same store stores nothing twice.

An agent with `include_contents="none"` (or on the stateful interactions API) sends only its own
turn and is left alone. Leave ADK's own events compaction off: precis does the compacting.
`pip install 'precis-context[adk]'`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.sessions.session import Session as AdkSession
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from precis.core.messages import Message, ToolCall, compact_json
from precis.integrations._common import (
    FRAMEWORK,
    KEY,
    PRECIS_KINDS,
    RAW,
    Entry,
    Sessions,
    aanswer_history_tool,
    fingerprint,
    shown_differently,
    tool_schemas,
)
from precis.session import AsyncSession, adrive

__all__ = ["PrecisPlugin", "from_precis", "precis_tools", "thread_id", "to_precis"]

NAME = "adk"


def thread_id(app_name: str, user_id: str, session_id: str, agent_name: str) -> str:
    """The thread an agent of an ADK session is kept in: the session's app, user and id, and
    the agent (each agent of a session is sent its own contents)."""
    return json.dumps([app_name, user_id, session_id, agent_name], ensure_ascii=False)


def _thread_of(session: AdkSession, agent_name: str) -> str:
    return thread_id(session.app_name, session.user_id, session.id, agent_name)


# --- conversion -------------------------------------------------------------------------------


def _dump(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value.model_dump(mode="json", exclude_none=True))


@dataclass
class Contents:
    """A request's contents with each one's key and the tool call ids its parts pair by."""

    keys: list[str] = field(default_factory=list)
    call_ids: list[dict[int, str]] = field(default_factory=list)
    answer_ids: list[dict[int, str | None]] = field(default_factory=list)


def read_contents(contents: Sequence[types.Content]) -> Contents:
    """Key every content (digest and occurrence) and pair every function response with a call."""
    out = Contents()
    seen: dict[str, int] = {}
    pending: dict[str, deque[str]] = {}
    for content in contents:
        digest = fingerprint(_dump(content))
        seen[digest] = seen.get(digest, 0) + 1
        key = f"sha:{digest}#{seen[digest]}"
        out.keys.append(key)
        calls: dict[int, str] = {}
        answers: dict[int, str | None] = {}
        out.call_ids.append(calls)
        out.answer_ids.append(answers)
        for j, part in enumerate(content.parts or []):
            if part.function_call is not None:
                call_id = part.function_call.id or f"{key}/{j}"
                if not part.function_call.id:
                    pending.setdefault(part.function_call.name or "", deque()).append(call_id)
                calls[j] = call_id
            elif part.function_response is not None:
                response = part.function_response
                queue = pending.get(response.name or "")
                answers[j] = response.id or (queue.popleft() if queue else None)
    return out


def _response_text(response: types.FunctionResponse) -> str:
    value = response.response
    if isinstance(value, dict) and set(value) == {"result"} and isinstance(value["result"], str):
        return value["result"]
    return compact_json(value if value is not None else {})


def _part_text(part: types.Part) -> str:
    if part.text is not None:
        return part.text
    media = part.inline_data or part.file_data
    if media is not None:  # counted as an image, never as its bytes
        return f"[{media.mime_type or 'media'}]"
    data = _dump(part)
    data.pop("thought_signature", None)
    return compact_json(data) if data else ""


def to_precis(
    content: types.Content,
    key: str,
    call_ids: dict[int, str] | None = None,
    answer_ids: dict[int, str | None] | None = None,
) -> list[Message]:
    """One ADK content as precis messages, each holding its parts (by index) as JSON.

    A model content is one assistant message (text, function calls, thoughts as reasoning). Any
    other is one tool message per function response (a response with no call known: a user
    message), then one user message for the rest.
    """
    calls_by_part = call_ids or {}
    answers = answer_ids or {}
    parts = list(content.parts or [])
    head = {"role": content.role}

    def meta(indices: Sequence[int], **extra: Any) -> dict[str, Any]:
        raw = {"content": head, "parts": [(j, _dump(parts[j])) for j in indices]}
        return {FRAMEWORK: NAME, KEY: key, RAW: raw, **extra}

    if content.role == "model":
        texts, thoughts, calls = [], [], []
        for j, part in enumerate(parts):
            if part.function_call is not None:
                call = part.function_call
                call_id = calls_by_part.get(j) or call.id or f"{key}/{j}"
                calls.append(ToolCall(call_id, call.name or "", compact_json(call.args or {})))
            elif part.thought:
                thoughts.append(part.text or "")
            else:
                texts.append(_part_text(part))
        return [
            Message(
                role="assistant",
                content="\n\n".join(t for t in texts if t),
                tool_calls=tuple(calls),
                reasoning="\n\n".join(t for t in thoughts if t),
                metadata=meta(range(len(parts))),
            )
        ]
    out: list[Message] = []
    rest: list[int] = []
    for j, part in enumerate(parts):
        if part.function_response is None:
            rest.append(j)
            continue
        text = _response_text(part.function_response)
        answered = answers.get(j, part.function_response.id)
        if answered:
            out.append(
                Message(role="tool", content=text, tool_call_id=answered, metadata=meta([j]))
            )
        else:
            out.append(Message(role="user", content=text, metadata=meta([j], orphan_result=True)))
    if rest or not parts:
        images = sum(1 for j in rest if parts[j].inline_data is not None)
        text = "\n\n".join(t for t in (_part_text(parts[j]) for j in rest) if t)
        out.append(Message(role="user", content=text, images=images, metadata=meta(rest)))
    return out


def _part(raw: Any) -> types.Part:
    return types.Part.model_validate(raw)


def _shown(group: Sequence[Message], source: types.Content | None, complete: bool) -> types.Content:
    """The content for a run of view messages from one ADK content: the object in hand when
    shown whole, else a copy with only these parts (a long function response as shown)."""
    if source is not None and complete and not any(shown_differently(m) for m in group):
        return source
    parts: list[tuple[int, types.Part]] = []
    for m in group:
        for j, raw in m.metadata[RAW]["parts"]:
            part = _part(raw)
            if m.metadata.get("orphan_result"):
                part = types.Part(text=f"[an earlier tool result]\n{m.content}")
            elif shown_differently(m) and part.function_response is not None:
                response = part.function_response.model_copy(
                    update={"response": {"result": m.content}}
                )
                part = part.model_copy(update={"function_response": response})
            parts.append((int(j), part))
    parts.sort(key=lambda jp: jp[0])
    role = group[0].metadata[RAW]["content"].get("role")
    return types.Content(role=role, parts=[p for _, p in parts])


def from_precis(
    view: Sequence[Message],
    originals: dict[str, types.Content] | None = None,
    stored: dict[str, tuple[str, ...]] | None = None,
) -> list[types.Content]:
    """The view as ADK contents: the contents in hand where shown whole (`originals` by key;
    `stored` tells whole from partial), copies with the shown parts otherwise, each summary or
    marker a user content."""
    known = originals or {}
    out: list[types.Content] = []
    i = 0
    while i < len(view):
        m = view[i]
        if m.kind in PRECIS_KINDS or m.metadata.get(FRAMEWORK) != NAME:
            out.append(types.Content(role="user", parts=[types.Part(text=m.content)]))
            i += 1
            continue
        key = m.metadata[KEY]
        j = i
        while j < len(view) and view[j].metadata.get(KEY) == key:
            j += 1
        group = view[i:j]
        complete = stored is None or set(stored.get(key, ())) <= {g.id for g in group}
        out.append(_shown(group, known.get(key), complete))
        i = j
    return out


def _entries(contents: Sequence[types.Content]) -> tuple[list[Entry], dict[str, types.Content]]:
    read = read_contents(contents)
    entries: list[Entry] = []
    originals: dict[str, types.Content] = {}
    for content, key, calls, answers in zip(
        contents, read.keys, read.call_ids, read.answer_ids, strict=True
    ):
        originals[key] = content
        entries.append(Entry(key, partial(to_precis, content, key, calls, answers)))
    return entries, originals


def _system_text(request: LlmRequest) -> str | None:
    instruction = request.config.system_instruction
    if instruction is None:
        return None
    if isinstance(instruction, str):
        return instruction
    if isinstance(instruction, types.Content):
        return "\n\n".join(p.text for p in instruction.parts or [] if p.text)
    return str(instruction)


def _tool_dicts(request: LlmRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in request.config.tools or []:
        if isinstance(tool, types.Tool) and tool.function_declarations:
            for d in tool.function_declarations:
                schema = d.parameters_json_schema
                if schema is None and d.parameters is not None:
                    schema = _dump(d.parameters)
                out.append(
                    {"name": d.name, "description": d.description or "", "parameters": schema}
                )
        else:
            out.append({"tool": _dump(tool) if hasattr(tool, "model_dump") else str(tool)})
    return out


# --- the history tools ------------------------------------------------------------------------


class _HistoryTool(BaseTool):
    """`search_history` or `read_original` over the running ADK session's conversation."""

    def __init__(self, sessions: Sessions, schema: dict[str, Any]) -> None:
        super().__init__(name=str(schema["name"]), description=str(schema["description"]))
        self.sessions = sessions
        self.schema = schema

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self.schema["parameters"],
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        session = self.sessions.session(_thread_of(tool_context.session, tool_context.agent_name))
        return await aanswer_history_tool(session, self.name, args)


def precis_tools(sessions: Sessions) -> list[BaseTool]:
    """`search_history` and `read_original` as ADK tools, to add to an agent's `tools`."""
    return [_HistoryTool(sessions, schema) for schema in tool_schemas()]


# --- the plugin -------------------------------------------------------------------------------


class PrecisPlugin(BasePlugin):
    """Keeps an ADK agent inside its context window; every original stays in the store.

    `sessions` opens one precis session per agent of an ADK session (its settings set the
    window); one plugin serves every session of the runner at once.
    """

    def __init__(self, sessions: Sessions, *, name: str = "precis") -> None:
        super().__init__(name)
        self.sessions = sessions

    def session(
        self, app_name: str, user_id: str, session_id: str, agent_name: str
    ) -> AsyncSession:
        """The precis session an agent of an ADK session is kept in: read, search, compact it."""
        return self.sessions.session(thread_id(app_name, user_id, session_id, agent_name))

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Store the request's new contents, compact when a trigger fires, send the view."""
        agent = callback_context.get_invocation_context().agent
        if getattr(agent, "include_contents", "default") != "default":
            return None  # it sends only its own turn: nothing to compact, nothing to key by
        if llm_request.previous_interaction_id:
            return None  # the server holds the conversation (the interactions API)
        mirror = self.sessions.mirror(
            _thread_of(callback_context.session, callback_context.agent_name)
        )
        mirror.session.tools = list(_tool_dicts(llm_request))
        system = _system_text(llm_request)
        entries, originals = _entries(llm_request.contents)
        async with mirror.alock:
            turn = await adrive(mirror.flow(entries, system=system))
            llm_request.contents = from_precis(turn.view, originals, mirror.stored)
        if turn.system is not None and turn.system != system:  # the session's compiler rewrote it
            llm_request.config.system_instruction = turn.system
        return None
