"""The `precis` command line: a thin typer face over the library, for people and scripts.

This module holds the app, its global options and the list of commands; the commands live in
`precis.cli.commands`, what they print in `render`, and how a failure is reported in `errors`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from precis.cli.commands import (
    chat,
    conversation,
    demo,
    evaluate,
    inspector,
    keys,
    serve,
    settings,
    transfer,
)
from precis.cli.config import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_HOME,
    ENV_BASE_URL,
    ENV_CONTEXT_WINDOW,
    ENV_HOME,
    ENV_MODEL,
    ENV_PROVIDER,
    ENV_STORE,
    ENV_SUMMARIZER,
    CliConfig,
    ProviderName,
    SummarizerName,
    resolve_settings,
)
from precis.cli.errors import EXIT_FAILED, CliUsageError, reported
from precis.core.types import CONVERSATION_ID_RULE, is_conversation_id


class _ReportingGroup(TyperGroup):
    """The app's group: whatever fails while parsing or running a command goes to `reported`."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        if not args:  # no arguments: typer shows the help, as no_args_is_help asks
            return super().make_context(info_name, args, parent, **extra)
        with reported():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with reported():
            return super().invoke(ctx)


app = typer.Typer(
    name="precis",
    cls=_ReportingGroup,
    help="Keep an LLM conversation inside its context window; originals stay searchable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def configure(
    ctx: typer.Context,
    home: Annotated[
        Path,
        typer.Option(envvar=ENV_HOME, help="Where precis keeps its data.", show_default=True),
    ] = Path(DEFAULT_HOME),
    conversation: Annotated[
        str, typer.Option("--conversation", "-c", help="Conversation id.")
    ] = "default",
    context_window: Annotated[
        int | None,
        typer.Option(
            help=f"Model context window in tokens ({ENV_CONTEXT_WINDOW} or precis.toml; "
            f"default {DEFAULT_CONTEXT_WINDOW}).",
            show_default=False,
        ),
    ] = None,
    summarizer: Annotated[
        SummarizerName,
        typer.Option(envvar=ENV_SUMMARIZER, help="Who writes summaries; llm uses --provider."),
    ] = "extractive",
    provider: Annotated[
        ProviderName, typer.Option(envvar=ENV_PROVIDER, help="The chat model (mock needs none).")
    ] = "mock",
    model: Annotated[
        str | None,
        typer.Option(envvar=ENV_MODEL, help="Model name (openai) or GGUF path (llama)."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(envvar=ENV_BASE_URL, help="OpenAI-compatible server URL, e.g. …/v1."),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(envvar=ENV_STORE, help="Store URL (default: SQLite at HOME/precis.db)."),
    ] = None,
) -> None:
    """Keep an LLM conversation inside its context window; originals stay searchable."""
    if not is_conversation_id(conversation):
        raise CliUsageError(f"--conversation {conversation[:40]!r}: {CONVERSATION_ID_RULE}")
    if home.expanduser().exists() and not home.expanduser().is_dir():
        raise CliUsageError(f"--home / {ENV_HOME} {str(home)!r}: not a directory")
    options = {"context_window": context_window} if context_window is not None else {}
    window = resolve_settings(home.expanduser(), options).settings.context_window
    assert window is not None  # resolve_settings falls back to the CLI's default window
    ctx.obj = CliConfig(
        home=home.expanduser(),
        conversation=conversation,
        context_window=window,
        summarizer=summarizer,
        store_url=store,
        provider=provider,
        model=model,
        base_url=base_url,
        options=options,
    )


# Every command by the name a user types, in the order `precis --help` lists them.
COMMANDS = (
    ("chat", chat.chat),
    ("compact", conversation.compact),
    ("context", conversation.context),
    ("history", conversation.history),
    ("events", conversation.events),
    ("recall", conversation.recall),
    ("config", settings.config_command),
    ("trust", settings.trust_command),
    ("import", transfer.import_command),
    ("export", transfer.export),
    ("eval", evaluate.eval_command),
    ("serve", serve.serve),
    ("inspect", inspector.inspect_command),
    ("demo", demo.demo),
)
for _name, _command in COMMANDS:
    app.command(_name)(_command)

keys_app = typer.Typer(help="API keys for `precis serve`, one per tenant.", no_args_is_help=True)
keys_app.command("add")(keys.add_key)
app.add_typer(keys_app, name="keys")


def main(argv: list[str] | None = None) -> int:
    """The console-script entry: run the app and return its exit code instead of exiting."""
    try:
        app(args=sys.argv[1:] if argv is None else argv, prog_name="precis")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_FAILED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
