"""Every error precis raises, in one tree rooted at `PrecisError`, carrying its facts as data.

Faces map errors by class (the CLI to an exit code, the server to a status), never by their text.

    PrecisError
    ├── InvalidInput (ValueError)        bad data from the caller
    │   ├── InvalidMessage               index, field, reason
    │   │   └── MessageTooLarge          over the one size limit
    │   ├── InvalidSetting               key, reason
    │   ├── SettingsError                where (file and key, or variable)
    │   ├── IdempotencyConflict          a key reused for another append
    │   └── ImportLineError              line, reason (a StoreError too: nothing was imported)
    ├── StoreError
    │   ├── StoreUnavailable             down, unreachable, full or locked: retry later
    │   ├── ConversationNotFound
    │   ├── UnknownMessage
    │   └── VersionConflict              a concurrent compaction won
    ├── ModelError                       the model or its server failed
    │   ├── ContextOverflow              the request was too big for it
    │   ├── UpstreamError                upstream, status, reason
    │   └── ModelTimeout (TimeoutError)  no answer in time
    ├── SummarizerError                  the summarizer gave nothing usable
    ├── CompactionError                  no acceptable compaction; nothing was written
    │   ├── PlanningError                no cut exists (the engine falls back on this)
    │   └── CompactionVetoed             a pre-compact hook said no
    ├── HookVeto                         raised by a Python pre-hook to veto
    └── TokenizerUnavailable             no exact tokenizer here; says what to install
"""

from __future__ import annotations


class PrecisError(Exception):
    """The root of every error precis raises on purpose."""


class InvalidInput(PrecisError, ValueError):
    """Data a caller passed in that precis refuses, naming what and where."""


class InvalidMessage(InvalidInput):
    """A message precis refuses: which one (`index`), which `field`, and why (`reason`)."""

    def __init__(self, index: int | None, reason: str, field: str | None = None) -> None:
        self.index = index
        self.reason = reason
        self.field = field
        where = f"message {index}" if index is not None else "message"
        super().__init__(f"{where}: {reason}")

    def at(self, index: int | None) -> InvalidMessage:
        """The same error placed at another index (a caller's numbering of the messages)."""
        return type(self)(index, self.reason, self.field)


class MessageTooLarge(InvalidMessage):
    """A message over the one size limit every entry point shares (`MAX_MESSAGE_CHARS`)."""


class InvalidSetting(InvalidInput):
    """A settings value out of range, naming the key so a person knows what to fix."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class SettingsError(InvalidInput):
    """A setting that cannot be loaded, naming where it was set (file and key, or variable)."""


class IdempotencyConflict(InvalidInput):
    """An idempotency key already used for a different append in the same conversation."""

    def __init__(self, conversation_id: str, key: str) -> None:
        self.conversation_id = conversation_id
        self.key = key
        super().__init__(
            f"idempotency key {key!r} was already used for a different append to this "
            "conversation; send new messages with a new key"
        )


class StoreError(PrecisError):
    """A store operation that could not be done; the text names what and where."""


class StoreUnavailable(StoreError):
    """The store cannot answer just now (unreachable, connection lost, disk full, locked): the
    operation did not take effect, so a caller may retry it later."""


class ReadOnlyStore(StoreError):
    """The store may be read but not written (a read-only file or home)."""


class ConversationNotFound(StoreError):
    """The conversation id is not in the store."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id!r} not found")


class UnknownMessage(StoreError):
    """A message id that the conversation does not hold."""

    def __init__(self, conversation_id: str, message_id: str) -> None:
        self.conversation_id = conversation_id
        self.message_id = message_id
        super().__init__(f"conversation {conversation_id!r} has no message {message_id!r}")


class VersionConflict(StoreError):
    """Another compaction committed first; the caller must re-read the context and retry."""

    def __init__(self, conversation_id: str, expected: int, actual: int) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"conversation {conversation_id!r}: expected context version {expected}, "
            f"found {actual} (a concurrent compaction won)"
        )


class ImportLineError(InvalidInput, StoreError):
    """A JSONL line that cannot be imported (nothing was); names its 1-based line number."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


class ModelError(PrecisError):
    """The model, or the server in front of it, failed to answer usefully."""


class ContextOverflow(ModelError):
    """The model said the request exceeds its context window; always counts as overflow."""


class UpstreamError(ModelError):
    """The model's server failed: which one (`upstream`), its HTTP `status` if any, and why."""

    def __init__(self, upstream: str, reason: str, status: int | None = None) -> None:
        self.upstream = upstream
        self.reason = reason
        self.status = status
        code = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"{upstream}: {code}{reason}")


class ModelTimeout(ModelError, TimeoutError):
    """No answer from the model (or the summarizer) within the time allowed."""


class SummarizerError(PrecisError):
    """The summarizer answered with nothing usable, so the caller may retry or fall back."""


class CompactionError(PrecisError):
    """A compaction could not produce an acceptable context; the store was left unchanged."""


class PlanningError(CompactionError):
    """No acceptable cut exists; the engine falls back to all-mode on this error only."""


class CompactionVetoed(CompactionError):
    """A pre-compact hook refused this compaction; nothing was written."""


class HookVeto(PrecisError):
    """Raised by a Python pre-hook to stop this compaction; the message is the reason."""


class TokenizerUnavailable(PrecisError, RuntimeError):
    """No exact tokenizer for the encoding can be loaded here; says what to install."""
