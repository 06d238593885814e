"""The `precis` command line: a thin typer layer over the library, for people and scripts."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

if TYPE_CHECKING:
    from precis.core.messages import Message
    from precis.core.types import CompactionMode
    from precis.engine.compactor import CompactionStats
    from precis.engine.settings import CompactionSettings, LoadedSettings
    from precis.providers.base import ChatProvider
    from precis.session import Session
    from precis.summarize.base import Summarizer

# Every environment variable the CLI reads, by the option it feeds; the one place they are named.
# Compaction settings are read as PRECIS_<SETTING> by policy.load_settings, not by typer, so
# `precis config` can tell an option from the environment; PRECIS_CONTEXT_WINDOW is one of them.
ENV_HOME = "PRECIS_HOME"
ENV_CONTEXT_WINDOW = "PRECIS_CONTEXT_WINDOW"
ENV_STORE = "PRECIS_STORE"
ENV_SUMMARIZER = "PRECIS_SUMMARIZER"
ENV_PROVIDER = "PRECIS_PROVIDER"
ENV_MODEL = "PRECIS_MODEL"
ENV_BASE_URL = "PRECIS_BASE_URL"
ENV_API_KEY = "PRECIS_API_KEY"

DEFAULT_HOME = "~/.precis"
DEFAULT_CONTEXT_WINDOW = 8000
SUMMARIZERS = ("extractive", "llm", "mock")
PROVIDERS = ("mock", "openai", "llama")
MODES = ("sliding_window", "all")
# Characters of message text shown per row in the context and history tables.
PREVIEW_CHARS = 70

# Exit codes: 1 for a failed operation, 2 for a bad invocation (as click uses for usage errors).
EXIT_FAILED = 1
EXIT_USAGE = 2

DEMO_WINDOW = 1200
DEMO_SCENARIOS = ("recall", "red-line")
DEMO_FACT = "our database port is 5433, don't use the default 5432"
DEMO_TURNS = (
    "Can you explain how we should structure the REST endpoints for the orders service so "
    "that pagination, filtering by status and sorting by date stay consistent across pages?",
    "What is a sensible way to organise the React components for the checkout flow, given that "
    "the cart, the address form and the payment step each need their own validation rules?",
    "Our CI pipeline takes almost twenty minutes now; which steps would you cache or parallelise "
    "first to bring the feedback loop for pull requests under five minutes again?",
    "How should we store user sessions if we move from a single server to three instances behind "
    "a load balancer, and what happens to people who are logged in during the switch?",
    "Please suggest a naming convention for our feature flags so that product managers can tell "
    "at a glance which team owns a flag and whether it is safe to remove it.",
    "The product images load slowly on mobile connections; what combination of formats, sizes and "
    "lazy loading would you recommend for the catalogue grid and the detail page?",
    "We keep getting merge conflicts in the translation files; how could we split or generate them "
    "so that two people adding strings on the same day do not collide?",
    "What should our error responses look like in the public API so that client developers can "
    "handle validation failures, rate limits and server errors without parsing text?",
    "How would you write integration tests for the email notifications without actually sending "
    "mail, while still checking the rendered subject, recipients and unsubscribe link?",
    "Is it worth adding a message queue for the invoice generation job, or can we keep running it "
    "as a nightly cron task for another year while the customer base doubles?",
    "What logging fields should every request carry so that we can trace one customer's checkout "
    "across the web app, the orders service and the payment provider callbacks?",
    "Our staging environment drifts from production every few weeks; how can we keep configuration "
    "and seed data in sync without copying real customer records into staging?",
    "How should the frontend handle an expired access token in the middle of a form submission, so "
    "that the user does not lose what they typed and does not see a confusing error?",
    "Which accessibility checks should we automate in the pipeline, and which ones still need a "
    "person with a screen reader before we ship a new page to customers?",
    "What is a reasonable plan for upgrading the web framework by two major versions without "
    "freezing feature work for a month or breaking the admin dashboard along the way?",
    "Before the launch next week, which metrics and alerts would you put on the dashboard so that "
    "the on-call engineer notices a failing payment flow within a few minutes?",
)


@dataclass(frozen=True, slots=True)
class CliConfig:
    """The global options, resolved once, so every command opens the same conversation."""

    home: Path
    conversation: str
    context_window: int
    summarizer: str
    store_url: str | None
    provider: str = "mock"
    model: str | None = None
    base_url: str | None = None
    # Settings given as command-line options; None (a config built in code) makes
    # `context_window` itself the override.
    options: Mapping[str, Any] | None = None


class CliFailure(Exception):
    """An error to report as one line on stderr with an exit code, never as a traceback."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


app = typer.Typer(
    name="precis",
    help="Keep an LLM conversation inside its context window; originals stay searchable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def compaction_line(stats: CompactionStats) -> str:
    """The line each compaction prints, so a person sees when and how much the context shrank."""
    return (
        f"⇣ compacted ({stats.trigger}): {stats.messages_count_before} → "
        f"{stats.messages_count_after} messages, ~{stats.context_tokens_before} → "
        f"~{stats.context_tokens_after} tokens"
    )


def report_compaction(stats: CompactionStats) -> None:
    _err(compaction_line(stats))


@contextmanager
def _clean_errors() -> Iterator[None]:
    """Turn the library's expected failures into one stderr line and an exit code."""
    from precis.core.errors import (
        CompactionError,
        ContextOverflow,
        InvalidMessage,
        PlanningError,
        SettingsError,
        StoreError,
        SummarizerError,
    )

    try:
        yield
    except CliFailure as exc:
        _err(f"precis: error: {exc}")
        raise typer.Exit(exc.code) from None
    except (CompactionError, PlanningError) as exc:
        _err(f"precis: cannot compact: {exc}")
        raise typer.Exit(EXIT_FAILED) from None
    except (InvalidMessage, StoreError, SummarizerError, ContextOverflow) as exc:
        _err(f"precis: error: {exc}")
        raise typer.Exit(EXIT_FAILED) from None
    except SettingsError as exc:
        _err(f"precis: invalid setting: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    except ValueError as exc:
        _err(f"precis: invalid option: {exc}")
        raise typer.Exit(EXIT_USAGE) from None
    except OSError as exc:
        _err(f"precis: error: {exc}")
        raise typer.Exit(EXIT_FAILED) from None


def make_provider(config: CliConfig) -> ChatProvider:
    """The chat model the options name; mock needs nothing, the others a model or a server."""
    if config.provider == "mock":
        from precis.providers.mock import MockProvider

        return MockProvider(config.context_window)
    if config.provider == "openai":
        from precis.providers.openai import OpenAIProvider

        if not config.model:
            raise CliFailure("--provider openai needs --model (or PRECIS_MODEL)", EXIT_USAGE)
        return OpenAIProvider(
            config.model, base_url=config.base_url, context_window=config.context_window
        )
    if config.provider == "llama":
        from precis.providers.llama import LlamaCppProvider

        try:
            return LlamaCppProvider(config.model, context_window=max(config.context_window, 512))
        except RuntimeError as error:
            raise CliFailure(str(error)) from None
    raise CliFailure(
        f"unknown provider {config.provider!r}; choose one of {', '.join(PROVIDERS)}", EXIT_USAGE
    )


def make_summarizer(config: CliConfig) -> Summarizer:
    """The named summarizer; `llm` summarizes with the configured provider."""
    if config.summarizer == "mock":
        from precis.summarize.mock import MockSummarizer

        return MockSummarizer()
    if config.summarizer == "llm":
        from precis.summarize.llm import LLMSummarizer

        return LLMSummarizer(make_provider(config))
    from precis.summarize.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer()


def resolve_settings(home: Path, options: Mapping[str, Any]) -> LoadedSettings:
    """precis.toml and PRECIS_* under the given options; the CLI's window when none is set."""
    from precis.engine.settings import LoadedSettings, load_settings

    overrides = {name: value for name, value in options.items() if value is not None}
    loaded = load_settings(home=home, cwd=Path.cwd(), env=os.environ, overrides=overrides)
    if loaded.settings.context_window is not None:
        return loaded
    settings = replace(loaded.settings, context_window=DEFAULT_CONTEXT_WINDOW)
    return LoadedSettings(settings, loaded.sources)


def config_settings(config: CliConfig, **options: Any) -> LoadedSettings:
    """The effective settings for a command: the global options plus the command's own."""
    given = {"context_window": config.context_window} if config.options is None else config.options
    return resolve_settings(config.home, {**given, **options})


def open_session(config: CliConfig, *, clip_chars: int | None = None) -> Session:
    """The configured conversation in the configured store, created on first use."""
    from precis.session import Session
    from precis.stores import open_store

    if config.summarizer not in SUMMARIZERS:
        raise CliFailure(
            f"unknown summarizer {config.summarizer!r}; choose one of {', '.join(SUMMARIZERS)}",
            EXIT_USAGE,
        )
    settings = config_settings(config, clip_chars=clip_chars).settings
    if config.store_url is None:
        config.home.mkdir(parents=True, exist_ok=True)
    store = open_store(config.store_url, home=config.home)
    return Session(store, config.conversation, None, make_summarizer(config), settings)


@contextmanager
def session_for(ctx: typer.Context, **kw: Any) -> Iterator[Session]:
    """Open the session for one command, report failures cleanly and close the store after."""
    config: CliConfig = ctx.obj
    with _clean_errors():
        session = open_session(config, **kw)
        try:
            yield session
        finally:
            session.store.close()


def message_json(message: Message, session: Session) -> dict[str, Any]:
    """A message as scripts want it: OpenAI format plus id, kind, pinned and tokens."""
    return {
        **message.to_openai(),
        "id": message.id,
        "kind": message.kind,
        "pinned": message.pinned,
        "tokens": session.counter.count(message),
    }


def _preview(message: Message) -> str:
    from precis.core.messages import KIND_SUMMARY

    raw = message.metadata.get("summary")
    text = raw if message.kind == KIND_SUMMARY and isinstance(raw, str) else message.content
    if message.tool_calls:
        text += " -> " + ", ".join(tc.name for tc in message.tool_calls)
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def print_messages(messages: list[Message], session: Session, title: str, as_json: bool) -> None:
    """A rich table for people, or a JSON array for scripts."""
    if as_json:
        print(json.dumps([message_json(m, session) for m in messages], ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    total = sum(session.counter.count(m) for m in messages)
    table = Table(title=f"{title}: {len(messages)} messages, ~{total} tokens")
    for column in ("#", "id", "role", "kind", "pin", "tokens"):
        table.add_column(column, no_wrap=True, justify="right" if column == "tokens" else "left")
    table.add_column("text", overflow="fold")
    for i, m in enumerate(messages):
        table.add_row(
            str(i),
            Text(m.id),
            m.role,
            m.kind,
            "*" if m.pinned else "",
            str(session.counter.count(m)),
            Text(_preview(m)),
        )
    Console(width=140 if not sys.stdout.isatty() else None).print(table)


def print_recall(session: Session, query: str, limit: int) -> int:
    """Print each hit as id, role and snippet; return how many were found."""
    hits = session.recall(query, limit)
    if not hits:
        print(f"no messages match {query!r}")
    for hit in hits:
        print(f"{hit.id}  [{hit.role}]  {' '.join(hit.snippet.split())}")
    return len(hits)


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
        str, typer.Option(envvar=ENV_SUMMARIZER, help="extractive | llm | mock")
    ] = "extractive",
    provider: Annotated[
        str, typer.Option(envvar=ENV_PROVIDER, help="mock | openai | llama")
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
    options = {"context_window": context_window} if context_window is not None else {}
    with _clean_errors():
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


@app.command()
def chat(
    ctx: typer.Context,
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="One user message; omit to chat.")
    ] = None,
) -> None:
    """One turn with -p, else an interactive chat (an empty line or EOF ends it)."""
    from precis.session.agent import Agent

    with session_for(ctx) as session:
        agent = Agent(session, make_provider(ctx.obj), on_compaction=report_compaction)
        if prompt is not None:
            reply, _ = asyncio.run(agent.turn(prompt))
            print(reply)
            return
        while True:
            try:
                text = input("you> ").strip()
            except EOFError:
                break
            if not text:
                break
            reply, _ = asyncio.run(agent.turn(text))
            print(f"model> {reply}", flush=True)


@app.command()
def compact(
    ctx: typer.Context,
    mode: Annotated[str | None, typer.Option(help="sliding_window | all")] = None,
    clip_chars: Annotated[int | None, typer.Option(help="Longest summary, in characters.")] = None,
) -> None:
    """Compact now; print one JSON line of stats, then the summary."""
    if mode is not None and mode not in MODES:
        _err(f"precis: invalid option: --mode must be one of {', '.join(MODES)}, got {mode!r}")
        raise typer.Exit(EXIT_USAGE)
    with session_for(ctx, clip_chars=clip_chars) as session:
        if not session.context():
            raise CliFailure(
                f"conversation {session.conversation_id!r} has no messages; nothing to compact"
            )
        result = asyncio.run(
            session.compact_result(cast("CompactionMode | None", mode), trigger="manual")
        )
        report_compaction(result.stats)
        print(json.dumps(result.stats.as_dict()))
        summary = result.summary.metadata.get("summary")
        print(summary if isinstance(summary, str) else result.summary.content)


@app.command()
def context(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Show what is in context now, in the order the model sees it."""
    with session_for(ctx) as session:
        print_messages(session.context(), session, "context", as_json)


@app.command()
def history(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Show every message ever appended, compacted or not."""
    with session_for(ctx) as session:
        print_messages(session.history(), session, "history", as_json)


@app.command()
def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to search the whole history for.")],
    limit: Annotated[int, typer.Option(min=1, help="Most hits to show.")] = 10,
) -> None:
    """Search every original message, including those compacted away."""
    with session_for(ctx) as session:
        print_recall(session, query, limit)


@app.command("config")
def config_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Show each effective compaction setting, its value and where it came from."""
    with _clean_errors():
        loaded = config_settings(ctx.obj)
    values = asdict(loaded.settings)
    if as_json:
        rows = {name: {"value": v, "source": loaded.sources[name]} for name, v in values.items()}
        print(json.dumps(rows, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    settings = loaded.settings
    table = Table(
        title="compaction settings",
        caption=f"summarize above {settings.threshold} tokens, "
        f"truncate above {settings.hard_limit} tokens",
    )
    for column in ("setting", "value", "source"):
        table.add_column(column, overflow="fold")
    for name, value in values.items():
        table.add_row(name, Text(_setting_text(value)), Text(loaded.sources[name]))
    Console(width=140 if not sys.stdout.isatty() else None).print(table)


def _setting_text(value: Any) -> str:
    """A value as a person would write it in an env variable: none, plain words, JSON otherwise."""
    if value is None:
        return "none"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@app.command("import")
def import_command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="OpenAI-format JSONL, one message per line.")],
) -> None:
    """Append the messages of a JSONL file, all or none."""
    from precis.stores import StoreError, import_jsonl

    with session_for(ctx) as session:
        try:
            with file.open(encoding="utf-8") as lines:
                count = import_jsonl(session.store, session.conversation_id, lines)
        except UnicodeDecodeError as exc:
            raise CliFailure(f"{file}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise CliFailure(f"cannot read {file}: {exc.strerror or exc}") from None
        except (StoreError, ValueError) as exc:
            raise CliFailure(f"{file}: {exc}; nothing was imported") from None
        print(f"imported {count} messages into {session.conversation_id!r}")


@app.command()
def export(
    ctx: typer.Context,
    context_only: Annotated[
        bool, typer.Option("--context", help="Only what is in context, not the whole log.")
    ] = False,
) -> None:
    """Print the conversation as OpenAI-format JSONL."""
    from precis.stores import export_jsonl

    with session_for(ctx) as session:
        export_jsonl(session.store, session.conversation_id, sys.stdout, context_only=context_only)


@app.command("eval")
def eval_command(
    files: Annotated[
        list[Path] | None, typer.Argument(help="Conversations (shared trajectory JSONL).")
    ] = None,
    strategy: Annotated[
        list[str] | None, typer.Option("--strategy", "-s", help="Repeat to pick; default all.")
    ] = None,
    window: Annotated[int, typer.Option(min=1, help="Context window to replay at.")] = 8000,
    at: Annotated[
        int | None, typer.Option(min=1, help="Compact once, after the first K messages.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    plot: Annotated[Path | None, typer.Option(help="Write the sawtooth plot (PNG).")] = None,
    reference: Annotated[
        bool, typer.Option("--reference", help="Compare with Claude Code's own summaries.")
    ] = False,
    trajectories: Annotated[
        Path, typer.Option(help="Folder with reference_summaries/ for --reference.")
    ] = Path("../shared/data/trajectories"),
) -> None:
    """Replay conversations per strategy: violations, tokens, calls, time, fact retention."""
    from rich.console import Console

    import precis.eval as evaluation

    with _clean_errors():
        if reference:
            if not (trajectories / "reference_summaries").is_dir():
                raise CliFailure(f"{trajectories}: no reference_summaries/ folder", EXIT_USAGE)
            ref = evaluation.run_reference(trajectories)
            if as_json:
                print(json.dumps(evaluation.reference_json(ref), ensure_ascii=False))
            else:
                Console(width=160).print(evaluation.render_reference(ref))
            return
        if not files:
            raise CliFailure("name the conversations to replay, or pass --reference", EXIT_USAGE)
        for name in strategy or ():
            evaluation.strategy(name)  # a clear error for an unknown name, before any work
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise CliFailure(f"no such file: {', '.join(missing)}")
        report = evaluation.run_eval(
            files,
            strategies=strategy or evaluation.STRATEGY_NAMES,
            window=window,
            at=at,
        )
        if plot is not None:
            evaluation.plot_sawtooth(report, plot)
        if as_json:
            print(json.dumps(evaluation.report_json(report), ensure_ascii=False))
        else:
            Console(width=160).print(evaluation.render_table(report))


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8321,
    store: Annotated[
        str | None, typer.Option(help="Store URL (default: the global --store / PRECIS_STORE).")
    ] = None,
) -> None:
    """Run the HTTP service; a non-loopback address needs PRECIS_API_KEY."""
    import ipaddress

    config: CliConfig = ctx.obj
    api_key = os.environ.get(ENV_API_KEY) or None
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if api_key is None and not loopback:
        _err(
            f"precis: error: refusing to listen on {host} without an API key; "
            f"set {ENV_API_KEY} (or listen on 127.0.0.1)"
        )
        raise typer.Exit(EXIT_USAGE)
    if config.summarizer not in SUMMARIZERS:
        _err(f"precis: invalid option: unknown summarizer {config.summarizer!r}")
        raise typer.Exit(EXIT_USAGE)
    import uvicorn

    from precis.server import create_app
    from precis.stores import open_store

    url = store if store is not None else config.store_url
    with _clean_errors():
        settings = config_settings(config).settings
        if url is None:
            config.home.mkdir(parents=True, exist_ok=True)
        opened = open_store(url, home=config.home)
    try:
        service = create_app(
            opened,
            settings=settings,
            api_key=api_key,
            summarizer_factory=lambda: make_summarizer(config),
        )
        uvicorn.run(service, host=host, port=port, log_level="info")
    finally:
        opened.close()


@app.command()
def demo(
    scenario: Annotated[
        str, typer.Option(help="recall (S1: a fact compacted away, then found) | red-line (S3)")
    ] = "recall",
) -> None:
    """Replay a scripted session in a throwaway home and watch precis compact it."""
    if scenario not in DEMO_SCENARIOS:
        _err(f"precis: invalid option: --scenario must be one of {', '.join(DEMO_SCENARIOS)}")
        raise typer.Exit(EXIT_USAGE)
    with tempfile.TemporaryDirectory(prefix="precis-demo-") as tmp, _clean_errors():
        if scenario == "red-line":
            run_red_line_demo(Path(tmp))
        else:
            run_demo(Path(tmp))


def _demo_session(home: Path, settings: CompactionSettings, summarizer: Summarizer) -> Session:
    """A session of its own, unaffected by precis.toml or PRECIS_* so the demo always replays."""
    from precis.session import Session
    from precis.stores.sqlite import SQLiteStore

    return Session(SQLiteStore(home / "precis.db"), "demo", None, summarizer, settings)


def run_demo(home: Path) -> None:
    """S1's session in `home`: a fact, 16 unrelated turns, the context, then recall."""
    from precis.engine.settings import CompactionSettings
    from precis.providers.mock import MockProvider
    from precis.session.agent import Agent
    from precis.summarize.extractive import ExtractiveSummarizer

    started = time.perf_counter()
    # S1 pins nothing: the fact must leave the context for recall to have something to find.
    settings = CompactionSettings(context_window=DEMO_WINDOW, pin_task=False)
    session = _demo_session(home, settings, ExtractiveSummarizer())
    try:
        print(f"precis demo — window {DEMO_WINDOW} tokens, mock model, extractive summarizer")
        compactions: list[CompactionStats] = []

        def on_compaction(stats: CompactionStats) -> None:
            compactions.append(stats)
            sys.stdout.flush()
            report_compaction(stats)

        agent = Agent(session, MockProvider(DEMO_WINDOW), on_compaction=on_compaction)
        for number, text in enumerate((DEMO_FACT, *DEMO_TURNS), start=1):
            reply, _ = asyncio.run(agent.turn(text))
            print(f"turn {number:>2}: {reply}", flush=True)
        print()
        print_messages(session.context(), session, "context", as_json=False)
        print()
        print("$ precis recall 5433")
        found = _demo_recall(session)
        elapsed = time.perf_counter() - started
        print()
        print(
            f"{len(compactions)} compactions, {len(session.history())} messages kept in history, "
            f"original fact {'found' if found else 'NOT found'} ({elapsed:.2f}s)"
        )
        if not found:
            raise CliFailure("the demo's recall did not find the original message")
    finally:
        session.store.close()


def run_red_line_demo(home: Path) -> None:
    """S3's catastrophic-forgetting story with a summarizer that drops everything the user said."""
    from precis.cli.demos import (
        RED_LINE,
        RED_LINE_WINDOW,
        DroppingSummarizer,
        red_line_in,
        red_line_steps,
    )
    from precis.engine.settings import CompactionSettings

    settings = CompactionSettings(context_window=RED_LINE_WINDOW)
    summarizer = DroppingSummarizer()
    session = _demo_session(home, settings, summarizer)
    print(f"precis demo --scenario red-line — window {RED_LINE_WINDOW} tokens")
    print(f"red line: {RED_LINE}")
    print(f"summarizer: {summarizer.describe()}")
    print()
    kept = True
    try:
        for number, step in enumerate(red_line_steps()):
            session.append(*step.messages)
            for stats in asyncio.run(session.maybe_compact()):
                sys.stdout.flush()
                report_compaction(stats)
                present = red_line_in(session.view())
                kept = kept and present
                where = _red_line_holder(session, RED_LINE)
                wrote = (
                    "no model call"
                    if stats.mode == "truncate"
                    else f"the summarizer wrote {summarizer.last!r}"
                )
                print(
                    f"step {number:>2}: {stats.mode} ({wrote}); red line in context: "
                    f"{'yes' if present else 'NO'}, {where}",
                    flush=True,
                )
        print()
        print_messages(session.context(), session, "context", as_json=False)
        events = session.events()
        print()
        print(
            f"{len(events)} compactions; red line present after every one: "
            f"{'yes' if kept and events else 'NO'}"
        )
        if not kept or not events:
            raise CliFailure("the red line did not survive every compaction")
    finally:
        session.store.close()


def _red_line_holder(session: Session, red_line: str) -> str:
    """Which message carries the red line now, for the demo's report."""
    for m in session.context():
        if red_line in m.content:
            if m.kind == "summary":
                return "kept verbatim in the summary by the guard"
            if m.kind == "marker":
                return "carried by the truncation marker"
            return "in an original message still in context"
    return "missing"


def _demo_recall(session: Session) -> bool:
    """Print the recall hits and the original message they lead back to."""
    print_recall(session, "5433", 5)
    for hit in session.recall("5433", 5):
        message = session.store.get(session.conversation_id, [hit.id])[0]
        if message.kind != "summary" and DEMO_FACT in message.content:
            in_context = any(m.id == hit.id for m in session.context())
            print(
                f"original message {message.id} ({'in' if in_context else 'out of'} context): "
                f"{message.content}"
            )
            return True
    return False


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
