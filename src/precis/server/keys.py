"""API keys and the tenants they belong to: keys kept only as SHA-256 digests.

One key (`PRECIS_API_KEY`) guards a service whose callers share the conversations made without a
tenant; several keys, each bound to a tenant (`PRECIS_API_KEYS="team-a=KEY,team-b=KEY"`, or a keys
file of `tenant sha256:HEX` lines), give each tenant its own conversations and nobody else's. No
key sees every tenant's conversations.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from precis.core.errors import InvalidSetting
from precis.core.types import TENANT_SEPARATOR, is_conversation_id

# Shorter keys can be guessed; a key must also not be blank.
MIN_KEY_CHARS = 16
_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_key(key: str, where: str) -> str:
    """The key, or a refusal naming where it came from."""
    if not key.strip() or len(key) < MIN_KEY_CHARS:
        raise InvalidSetting(where, f"an API key needs at least {MIN_KEY_CHARS} characters")
    return key


def check_tenant(tenant: str, where: str) -> str:
    if not is_conversation_id(tenant):
        raise InvalidSetting(where, f"tenant {tenant!r} is not a valid name")
    return tenant


def new_key() -> str:
    """A fresh key, printed once and stored only as its digest."""
    return "pk_" + secrets.token_urlsafe(24)


@dataclass(frozen=True, slots=True)
class ApiKeys:
    """Digest → tenant; a tenant of None is the single shared key, which scopes nothing."""

    tenants: Mapping[str, str | None]

    @classmethod
    def single(cls, key: str, where: str = "PRECIS_API_KEY") -> ApiKeys:
        return cls({digest(check_key(key, where)): None})

    @classmethod
    def from_pairs(cls, text: str, where: str = "PRECIS_API_KEYS") -> ApiKeys:
        """`tenant=key,tenant=key`."""
        found: dict[str, str | None] = {}
        for pair in filter(None, (p.strip() for p in text.split(","))):
            tenant, sep, key = pair.partition("=")
            if not sep:
                raise InvalidSetting(where, f"{pair!r} is not tenant=key")
            found[digest(check_key(key, where))] = check_tenant(tenant.strip(), where)
        return cls(found)

    @classmethod
    def from_lines(cls, lines: Iterable[str], where: str) -> ApiKeys:
        """`tenant sha256:HEX` per line; blank lines and # comments are skipped."""
        found: dict[str, str | None] = {}
        for number, line in enumerate(lines, start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split()
            hexed = _DIGEST.match(parts[-1]) if len(parts) == 2 else None
            if hexed is None:
                raise InvalidSetting(f"{where}:{number}", "expected `tenant sha256:HEX`")
            found[hexed.group(1)] = check_tenant(parts[0], f"{where}:{number}")
        return cls(found)

    @classmethod
    def from_file(cls, path: Path) -> ApiKeys:
        return cls.from_lines(path.read_text(encoding="utf-8").splitlines(), str(path))

    def merged(self, other: ApiKeys) -> ApiKeys:
        return ApiKeys({**self.tenants, **other.tenants})

    def __bool__(self) -> bool:
        return bool(self.tenants)

    def tenant(self, key: str) -> tuple[bool, str | None]:
        """(known, tenant) for a presented key, compared in constant time over every digest."""
        given = digest(key)
        found: tuple[bool, str | None] = (False, None)
        for known, tenant in self.tenants.items():
            if secrets.compare_digest(given, known):
                found = (True, tenant)
        return found


def scoped(tenant: str | None, conversation_id: str) -> str:
    """The store's id for a tenant's conversation."""
    return conversation_id if tenant is None else f"{tenant}{TENANT_SEPARATOR}{conversation_id}"


def unscoped(tenant: str | None, stored_id: str) -> str | None:
    """The tenant's own id for a stored conversation, or None when it is not the tenant's."""
    if tenant is None:
        return stored_id if TENANT_SEPARATOR not in stored_id else None
    prefix = f"{tenant}{TENANT_SEPARATOR}"
    return stored_id[len(prefix) :] if stored_id.startswith(prefix) else None
