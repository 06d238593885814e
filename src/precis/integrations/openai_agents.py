"""precis for the OpenAI Agents SDK: `PrecisSession`, a `Session` over any precis store.

    sessions = Sessions(store, settings=CompactionSettings(context_window=8000))
    session = PrecisSession("user-42", sessions)  # one per Agents SDK session id, as SQLiteSession
    result = await Runner.run(agent, "…", session=session,
                              run_config=RunConfig(call_model_input_filter=session.input_filter))

Each session id is its own precis conversation; `PrecisSession`s of one id (made per request,
say) share that conversation's state, so one agent serves many users at once.

`add_items` stores every item as an original; `get_items` returns the compacted view (pinned ·
summary · kept) as Responses input items. Items are stored in units the planner never splits: a
model turn (reasoning, messages, calls) is one assistant message, each call output one tool
result paired by `call_id` (function, custom tool, shell, apply_patch, computer, local shell,
tool search, program), so a reasoning item stays with the item after it. `pop_item` returns the
last item exactly as added (the runner's retry rewind compares fingerprints).

The runner calls `run_compaction` (the SDK's public compaction-aware session protocol) once a
turn is stored with no local tool output pending. Within one run, `input_filter` (a
`call_model_input_filter`; `run_config()` makes a `RunConfig` with it) compacts before every
model call and counts the instructions and tool definitions in the budget; a session used
without it is warned about at its first model turn, since nothing then keeps a run's requests
inside the window. Each compaction is a custom span (`precis.compaction`) in the SDK's own
trace, and an OpenTelemetry span (see `precis.integrations`).
`pip install 'precis-context[agents]'`.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from agents import Agent, ModelSettings, RunConfig, TResponseInputItem
from agents.memory import SessionSettings
from agents.models.interface import Model, ModelTracing
from agents.run_config import CallModelData, ModelInputData
from agents.tool import FunctionTool
from agents.tracing import custom_span

from precis.core.errors import InvalidInput
from precis.core.messages import KIND_MARKER, Message, ToolCall
from precis.core.types import Role
from precis.integrations._common import (
    FRAMEWORK,
    PRECIS_KINDS,
    RAW,
    Sessions,
    UnboundedWindow,
    fingerprint,
    shown_differently,
)
from precis.integrations._models import FrameworkSummarizer
from precis.integrations._telemetry import SPAN_NAME, Compaction
from precis.session import AsyncSession, adrive
from precis.stores.base import CompactionEvent, MessageIds, utc_now

__all__ = ["PrecisSession", "from_precis", "model_summarizer", "to_precis"]

NAME = "openai-agents"
# Client-side calls and the outputs that answer them, paired by call_id.
CALLS = {
    "function_call": "function",
    "custom_tool_call": "custom",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
    "computer_call": "computer",
    "local_shell_call": "local_shell",
    "tool_search_call": "tool_search",
    "program": "program",
}
OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "tool_search_output",
        "program_output",
    }
)
# Items only a model emits; with the calls, they make up one model turn.
MODEL_ITEMS = frozenset(
    {
        "reasoning",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "compaction",
        *CALLS,
    }
)
_IGNORED_IN_DIGEST = ("id", "status", "provider_data")


# --- conversion -------------------------------------------------------------------------------


def _plain(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dumped: dict[str, Any] = item.model_dump(exclude_unset=True, mode="json")
    return dumped


def _call_id(item: Mapping[str, Any]) -> str | None:
    value = item.get("call_id")
    if value is None and item.get("type") == "local_shell_call_output":
        value = item.get("id")  # the Responses type names the call by `id`
    return value if isinstance(value, str) and value else None


def _is_model_item(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind == "tool_search_output" and _call_id(item) is None:
        return True  # a server-side search answers inline
    if kind == "message" or kind is None:
        return item.get("role") == "assistant"
    return kind in MODEL_ITEMS


def _is_output(item: Mapping[str, Any]) -> bool:
    return item.get("type") in OUTPUTS and _call_id(item) is not None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    texts.append(text)
        return "\n\n".join(texts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _call(item: Mapping[str, Any]) -> ToolCall | None:
    call_id = _call_id(item)
    kind = str(item.get("type"))
    if call_id is None or kind not in CALLS:
        return None
    if kind == "function_call":
        return ToolCall(call_id, str(item.get("name", "")), str(item.get("arguments", "")))
    if kind == "custom_tool_call":
        return ToolCall(call_id, str(item.get("name", "")), str(item.get("input", "")))
    payload = {k: v for k, v in item.items() if k not in {"type", "id", "call_id", "status"}}
    return ToolCall(call_id, CALLS[kind], json.dumps(payload, ensure_ascii=False))


def _turn_message(items: list[dict[str, Any]], after_reasoning: bool) -> Message:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for item in items:
        if item.get("type") == "reasoning":
            reasoning.extend(_text(item.get("summary")).split("\n\n"))
        elif item.get("role") == "assistant":
            texts.append(_text(item.get("content")))
        else:
            call = _call(item)
            if call is not None:
                calls.append(call)
    meta: dict[str, Any] = {FRAMEWORK: NAME, RAW: items}
    if after_reasoning:
        meta["after_reasoning"] = True
    return Message(
        role="assistant",
        content="\n\n".join(t for t in texts if t),
        tool_calls=tuple(calls),
        reasoning="\n\n".join(r for r in reasoning if r),
        metadata=meta,
    )


def _input_message(item: dict[str, Any], known_calls: set[str]) -> Message:
    meta: dict[str, Any] = {FRAMEWORK: NAME, RAW: [item]}
    if _is_output(item):
        output = item.get("output", item.get("result"))
        call_id = _call_id(item)
        if call_id in known_calls:
            return Message(role="tool", content=_text(output), tool_call_id=call_id, metadata=meta)
        return Message(role="user", content=_text(output), metadata={**meta, "orphan_result": True})
    role = item.get("role")
    mapped: Role = "system" if role in ("system", "developer") else "user"
    return Message(role=mapped, content=_text(item.get("content")), metadata=meta)


def to_precis(
    items: Sequence[Any], *, known_calls: Sequence[str] = (), after_reasoning: bool = False
) -> list[Message]:
    """Items as precis messages: each model turn one assistant message, each output one tool
    result (a result whose call is not in `known_calls` or the batch: a user message)."""
    out: list[Message] = []
    calls = set(known_calls)
    turn: list[dict[str, Any]] = []
    for item in map(_plain, items):
        if _is_model_item(item):
            turn.append(item)
            continue
        if turn:
            out.append(_turn_message(turn, after_reasoning and not out))
            calls.update(c.id for c in out[-1].tool_calls)
            turn = []
        out.append(_input_message(item, calls))
    if turn:
        out.append(_turn_message(turn, after_reasoning and not out))
    return out


def _items(message: Message) -> list[dict[str, Any]]:
    raw = message.metadata.get(RAW)
    return [dict(i) for i in raw] if isinstance(raw, list) else []


def from_precis(view: Sequence[Message]) -> list[TResponseInputItem]:
    """The view as Responses input items: originals exactly, a long output as shown, each
    summary a user message; no reasoning item without its follower, and no assistant id left
    pointing at a reasoning item the view dropped."""
    out: list[dict[str, Any]] = []
    for m in view:
        if m.kind in PRECIS_KINDS or m.metadata.get(FRAMEWORK) != NAME:
            out.append({"role": "user", "content": m.content})
            continue
        items = _items(m)
        if m.metadata.get("orphan_result"):
            out.append({"role": "user", "content": f"[an earlier tool result]\n{m.content}"})
            continue
        if shown_differently(m) and items:
            items = [{**items[0], "output": m.content}]
        if m.metadata.get("after_reasoning") and not (out and out[-1].get("type") == "reasoning"):
            items = [_without_id(i) if i.get("role") == "assistant" else i for i in items]
        out.extend(items)
    return cast(list[TResponseInputItem], _reasoning_followed(out))


def _without_id(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "id"}


def _reasoning_followed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if item.get("type") == "reasoning":
            follower = next((x for x in items[i + 1 :] if x.get("type") != "reasoning"), None)
            if follower is None or not _is_model_item(follower):
                continue
        keep.append(item)
    return keep


def digest(item: Any) -> str:
    """An item's identity for matching the runner's input against the store."""
    data = {k: v for k, v in _plain(item).items() if k not in _IGNORED_IN_DIGEST}
    return fingerprint(data)


def _tool_dicts(agent: Agent[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            out.append(
                {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.params_json_schema,
                }
            )
        else:
            out.append({"name": str(getattr(tool, "name", type(tool).__name__))})
    return out


def _traced(compactions: Sequence[Compaction]) -> None:
    """Each compaction as a custom span in the Agents SDK's own trace (a no-op outside one)."""
    for compaction in compactions:
        with custom_span(SPAN_NAME, compaction.attributes()):
            pass


# --- the session ------------------------------------------------------------------------------


class PrecisSession:
    """The Agents SDK `Session` protocol over a precis conversation (structurally: no base class).

    `session_id` is the Agents SDK session's id; `sessions` keeps its precis conversation (and
    the settings that set the window) in their store. Store calls run off the event loop.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        sessions: Sessions,
        *,
        session_settings: SessionSettings | None = None,
        agent: Agent[Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self._mirror = sessions.mirror(session_id)
        self.precis: AsyncSession = self._mirror.session
        self.session_settings = session_settings
        self._ids = MessageIds()
        self._lock = self._mirror.alock
        # Whether a run used `input_filter` on this session, and whether its absence was told.
        self._filtered = False
        self._warned = False
        if agent is not None:
            self.precis.tools = list(_tool_dicts(agent))

    # --- the Session protocol -----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The compacted view, oldest first; with `limit`, its newest `limit` items."""
        items = from_precis(await self.precis.view())
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        return items if limit is None else (items[-limit:] if limit > 0 else [])

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store every item as an original, in units the planner never splits."""
        if not items:
            return
        if not self._filtered and not self._warned and any(map(_is_model_item, map(_plain, items))):
            self._warned = True
            warnings.warn(
                f"PrecisSession {self.session_id!r}: a model turn was stored but the run did not "
                "use the session's input filter, so the run's requests are not kept inside the "
                "window; run with run_config=session.run_config()",
                UnboundedWindow,
                stacklevel=2,
            )
        async with self._lock:
            context = await self.precis.context()
            known = [c.id for m in context for c in m.tool_calls]
            last = _items(context[-1])[-1:] if context else []
            after_reasoning = bool(last) and last[0].get("type") == "reasoning"
            messages = to_precis(items, known_calls=known, after_reasoning=after_reasoning)
            await self.precis.append(*messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the newest item out of the context and return it exactly as it was added.

        The store is append-only: the item stays in the history (and searchable); the context
        no longer holds it."""
        async with self._lock:
            return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        """Empty the context; every original stays in the history, searchable."""
        async with self._lock:
            await asyncio.to_thread(self._clear)

    # --- compaction ---------------------------------------------------------------------------

    async def run_compaction(self, args: Mapping[str, Any] | None = None) -> None:
        """Compact when a trigger fires; `force` compacts now.

        The runner calls this (public `OpenAIResponsesCompactionAwareSession` protocol) once a
        turn's items are stored and no local tool output is pending, so never in the middle of
        a call and its output; within a run, `input_filter` compacts before every model call."""
        force = bool(args and args.get("force"))
        async with self._lock:
            found = await adrive(self._mirror.compactions(force=force, when="after a turn"))
        _traced(found)

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """A `RunConfig` (a copy of `base`, if given) whose model input filter is this session's;
        refused if `base` has a filter of its own, which would be replaced silently."""
        base = base or RunConfig()
        if base.call_model_input_filter not in (None, self.input_filter):
            raise InvalidInput(
                "PrecisSession.run_config: the RunConfig already has a call_model_input_filter; "
                "call session.input_filter from it instead"
            )
        return replace(base, call_model_input_filter=self.input_filter)

    async def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A `call_model_input_filter`: before every model call of a run, compact if a trigger
        fires (counting the instructions and tool definitions) and send the view, plus any input
        the runner has not stored yet."""
        model_data = data.model_data
        self._filtered = True
        self.precis.tools = list(_tool_dicts(data.agent))
        instructions = model_data.instructions or ""
        if instructions != self._mirror.source:
            if await self.precis.system_prompt() != instructions:
                await self.precis.set_system_prompt(instructions)
            self._mirror.source = instructions
        context = await self.precis.context()
        last = _items(context[-1])[-1:] if context else []
        if not last:
            return model_data
        target = digest(last[0])
        stored_up_to = next(
            (
                i
                for i in range(len(model_data.input) - 1, -1, -1)
                if digest(model_data.input[i]) == target
            ),
            None,
        )
        if stored_up_to is None:
            return model_data  # this input is not this session's: leave it alone
        async with self._lock:
            found = await adrive(self._mirror.compactions(when="before this model call"))
        _traced(found)
        unsaved = list(model_data.input[stored_up_to + 1 :])
        compiled = await self.precis.system_prompt()  # the session's compiler may have rewritten it
        return ModelInputData(
            input=[*await self.get_items(), *unsaved],
            instructions=model_data.instructions if compiled == instructions else compiled,
        )

    # --- context edits (off the loop) ---------------------------------------------------------

    def _commit(
        self, snapshot: Any, ids: list[str], written: Message, edit: str, *, count: int
    ) -> None:
        store = self.precis.store
        store.commit_compaction(
            self.precis.conversation_id,
            expected_version=snapshot.version,
            snapshot_last_seq=snapshot.last_seq,
            summary=written,
            context_ids=ids,
            event=CompactionEvent(
                trigger=edit,
                mode="edit",
                stats={"messages_count_before": count, "messages_count_after": len(ids)},
                summary_id=written.id,
                at=written.created_at or "",
            ),
        )

    def _marker(self, text: str) -> Message:
        return Message(
            role="user", kind=KIND_MARKER, content=text, id=self._ids.new(), created_at=utc_now()
        )

    def _pop(self) -> TResponseInputItem | None:
        store = self.precis.store
        store.create(self.precis.conversation_id)
        snapshot = store.context(self.precis.conversation_id)
        if not snapshot.messages:
            return None
        last = snapshot.messages[-1]
        items = _items(last)
        if not items:
            return None
        popped, rest = items[-1], items[:-1]
        ids = [m.id for m in snapshot.messages[:-1]]
        count = len(snapshot.messages)
        if rest:
            [remaining] = to_precis(
                rest, known_calls=[c.id for m in snapshot.messages for c in m.tool_calls]
            )[-1:]
            remaining = replace(remaining, id=self._ids.new(), pinned=last.pinned)
            self._commit(snapshot, [*ids, remaining.id], remaining, "pop_item", count=count)
        else:
            self._commit(
                snapshot, ids, self._marker("[an item was popped]"), "pop_item", count=count
            )
        return cast(TResponseInputItem, popped)

    def _clear(self) -> None:
        store = self.precis.store
        store.create(self.precis.conversation_id)
        snapshot = store.context(self.precis.conversation_id)
        if snapshot.messages:
            marker = self._marker("[the session was cleared]")
            self._commit(snapshot, [], marker, "clear_session", count=len(snapshot.messages))


# --- the framework's own model ----------------------------------------------------------------


def model_summarizer(model: Model, *, name: str | None = None) -> FrameworkSummarizer:
    """precis's model summarizer asking this Agents SDK model (`Model.get_response`, untraced).

    The SDK's models are async only, so it summarizes for `AsyncSession`s (as `PrecisSession`
    is); the SDK knows neither a model's window nor its token counts, so give the window in the
    settings."""

    async def aask(chat: list[dict[str, Any]]) -> str:
        system = "\n\n".join(str(m.get("content") or "") for m in chat if m["role"] == "system")
        items = [
            {"role": m["role"], "content": str(m.get("content") or "")}
            for m in chat
            if m["role"] != "system"
        ]
        response = await model.get_response(
            system or None,
            cast(list[TResponseInputItem], items),
            ModelSettings(),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        return "\n\n".join(_text(_plain(item).get("content")) for item in response.output)

    return FrameworkSummarizer(name or f"openai-agents:{type(model).__name__}", None, aask)
