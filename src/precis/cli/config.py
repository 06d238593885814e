"""The global options, resolved once, and what they build: settings, model, summarizer, session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from precis.cli.errors import CliFailure, CliUsageError

if TYPE_CHECKING:
    from precis.cli.loading import LoadedSettings
    from precis.providers.base import ChatProvider
    from precis.session import Session
    from precis.stores.base import ConversationStore
    from precis.summarize.base import Summarizer

# Every environment variable the CLI reads, by the option it feeds; the one place they are named.
# Compaction settings are read as PRECIS_<SETTING> by load_settings, not by typer, so
# `precis config` can tell an option from the environment; PRECIS_CONTEXT_WINDOW is one of them.
ENV_HOME = "PRECIS_HOME"
ENV_CONTEXT_WINDOW = "PRECIS_CONTEXT_WINDOW"
ENV_STORE = "PRECIS_STORE"
ENV_SUMMARIZER = "PRECIS_SUMMARIZER"
ENV_PROVIDER = "PRECIS_PROVIDER"
ENV_MODEL = "PRECIS_MODEL"
ENV_BASE_URL = "PRECIS_BASE_URL"
ENV_API_KEY = "PRECIS_API_KEY"
ENV_API_KEYS = "PRECIS_API_KEYS"
# Variables the CLI reads itself (and the test suite's database); any other PRECIS_* is a typo.
CLI_VARIABLES = frozenset(
    {
        ENV_HOME,
        ENV_STORE,
        ENV_SUMMARIZER,
        ENV_PROVIDER,
        ENV_MODEL,
        ENV_BASE_URL,
        ENV_API_KEY,
        ENV_API_KEYS,
        "PRECIS_DATABASE_URL",
    }
)
# Tenants' keys, as `tenant sha256:HEX` lines, under the home (`precis keys add` writes it).
KEYS_FILE = "api-keys"

DEFAULT_HOME = "~/.precis"
DEFAULT_CONTEXT_WINDOW = 8000

# The choices of --summarizer and --provider; typer checks a given value against them.
SummarizerName = Literal["extractive", "llm", "mock"]
ProviderName = Literal["mock", "openai", "llama"]


@dataclass(frozen=True, slots=True)
class CliConfig:
    """The global options, resolved once, so every command opens the same conversation."""

    home: Path
    conversation: str
    context_window: int
    summarizer: SummarizerName
    store_url: str | None
    provider: ProviderName = "mock"
    model: str | None = None
    base_url: str | None = None
    # Settings given as command-line options; None (a config built in code) makes
    # `context_window` itself the override.
    options: Mapping[str, Any] | None = None
    # Settings warnings already shown by this command.
    warned: set[str] = field(default_factory=set)


def resolve_settings(home: Path, options: Mapping[str, Any]) -> LoadedSettings:
    """precis.toml and PRECIS_* under the given options; the CLI's window when none is set."""
    from precis.cli.loading import LoadedSettings, load_settings

    overrides = {name: value for name, value in options.items() if value is not None}
    loaded = load_settings(
        home=home,
        cwd=Path.cwd(),
        env=os.environ,
        overrides=overrides,
        other_variables=CLI_VARIABLES,
    )
    if loaded.settings.context_window is not None:
        return loaded
    settings = replace(loaded.settings, context_window=DEFAULT_CONTEXT_WINDOW)
    return LoadedSettings(settings, loaded.sources, loaded.warnings)


def config_settings(config: CliConfig, **options: Any) -> LoadedSettings:
    """The effective settings for a command: the global options plus the command's own."""
    given = {"context_window": config.context_window} if config.options is None else config.options
    loaded = resolve_settings(config.home, {**given, **options})
    for line in loaded.warnings:
        if line not in config.warned:  # once per command, however often settings are read
            config.warned.add(line)
            print(f"precis: warning: {line}", file=sys.stderr)
    return loaded


def make_provider(config: CliConfig) -> ChatProvider:
    """The chat model the options name; mock needs nothing, the others a model or a server."""
    if config.provider == "openai":
        from precis.providers.openai import OpenAIProvider

        if not config.model:
            raise CliUsageError(f"--provider openai needs --model (or {ENV_MODEL})")
        return OpenAIProvider(
            config.model, base_url=config.base_url, context_window=config.context_window
        )
    if config.provider == "llama":
        from precis.providers.llama import LlamaCppProvider

        try:
            return LlamaCppProvider(config.model, context_window=max(config.context_window, 512))
        except RuntimeError as error:  # llama-cpp-python or the default model is not installed
            raise CliFailure(str(error)) from None
    from precis.providers.mock import MockProvider

    return MockProvider(config.context_window)


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


def open_session(
    config: CliConfig, *, clip_chars: int | None = None, read: bool = False
) -> Session:
    """The configured conversation in the configured store, created by the command's first write
    (a command that fails before it creates nothing); a command that only reads (`read`) fails
    when the database or conversation is missing."""
    from precis.core.errors import ConversationNotFound
    from precis.session import Session
    from precis.stores import open_store

    settings = config_settings(config, clip_chars=clip_chars).settings
    summarizer = make_summarizer(config)
    if config.store_url is None and not read:
        config.home.mkdir(parents=True, exist_ok=True)
    store: ConversationStore = open_store(config.store_url, home=config.home, must_exist=read)
    if not store.exists(config.conversation):
        if read:
            store.close()
            raise ConversationNotFound(config.conversation)
        store = cast("ConversationStore", CreatedOnFirstWrite(store, config.conversation))
    return Session(store, config.conversation, None, summarizer, settings)


class CreatedOnFirstWrite:
    """A store in which one new conversation is created by its first write, not when a session
    opens it, so a command that fails before writing leaves no empty conversation behind; until
    then an empty memory store answers that conversation's reads."""

    # What reads the conversation; any other call that names it writes (or may: a method a
    # store gains later is taken for a write, which is the safe side).
    READS = frozenset(
        {"context", "tail", "history", "get", "count", "events", "system_prompt", "recall"}
        | {"samples", "latest_sample"}
    )

    def __init__(self, store: ConversationStore, conversation_id: str) -> None:
        from precis.stores.memory import MemoryStore

        self.store = store
        self.conversation_id = conversation_id
        self.pending = True
        self._empty = MemoryStore()
        self._empty.create(conversation_id)

    def create(self, conversation_id: str, *, system_prompt: str = "") -> None:
        if conversation_id == self.conversation_id:
            if self.pending and not system_prompt:
                return  # the first write creates it
            self.pending = False
        self.store.create(conversation_id, system_prompt=system_prompt)

    def exists(self, conversation_id: str) -> bool:
        return self.store.exists(conversation_id)

    def conversations(self) -> list[str]:
        return self.store.conversations()

    def close(self) -> None:
        self.store.close()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        def call(conversation_id: str, *args: Any, **kwargs: Any) -> Any:
            if not (self.pending and conversation_id == self.conversation_id):
                return method(conversation_id, *args, **kwargs)
            if name in self.READS:
                return getattr(self._empty, name)(conversation_id, *args, **kwargs)
            from precis.core.errors import ConversationNotFound

            try:
                try:  # a SQL store's append creates the conversation in its own transaction
                    return method(conversation_id, *args, **kwargs)
                except ConversationNotFound:
                    self.store.create(conversation_id)
                    return method(conversation_id, *args, **kwargs)
            finally:  # written, or interrupted once the write committed: reads go to the store
                self.pending = not self.store.exists(conversation_id)

        return call


@contextmanager
def session_for(config: CliConfig, **kw: Any) -> Iterator[Session]:
    """Open the session for one command and close its store after, however the command ends."""
    session = open_session(config, **kw)
    try:
        yield session
    finally:
        session.store.close()
