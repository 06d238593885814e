"""`precis chat`: talk to the configured model while precis keeps the conversation in its window."""

from __future__ import annotations

from typing import Annotated

import typer

from precis.cli.config import make_provider, session_for
from precis.cli.render import report_compaction


def chat(
    ctx: typer.Context,
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="One user message; omit to chat.")
    ] = None,
) -> None:
    """One turn with -p, else an interactive chat (an empty line or EOF ends it)."""
    from precis.session.agent import Agent

    with session_for(ctx.obj) as session:
        agent = Agent(
            session,
            make_provider(ctx.obj),
            on_compaction=report_compaction,
            # Only an OpenAI-compatible model can call tools; the others would pay for them unused.
            history_tools=ctx.obj.provider == "openai",
        )
        if prompt is not None:
            reply, _ = agent.turn(prompt)
            print(reply)
            return
        while True:
            try:
                text = input("you> ").strip()
            except EOFError:
                break
            if not text:
                break
            reply, _ = agent.turn(text)
            print(f"model> {reply}", flush=True)
