"""Who is looking: the inspector asks a browser for the API key once and remembers it by cookie.

A login trades a configured key for a random session token, set as an HttpOnly, SameSite=Strict
cookie; the service keeps only the token's digest and the key's tenant, never the key. Without
configured keys (a loopback service) every page is open, as the API is.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from precis.server.keys import ApiKeys, digest

__all__ = ["COOKIE", "MAX_WRONG", "SESSION_SECONDS", "WRONG_SECONDS", "Logins", "NeedLogin"]

COOKIE = "precis_inspector"
# How long a browser stays logged in, and how many logins the service remembers at once.
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 10_000
# Wrong keys a client may send per minute before its logins are refused for the rest of it.
MAX_WRONG = 5
WRONG_SECONDS = 60.0


class NeedLogin(Exception):
    """The request carries no valid key or session; a page redirects to the login form."""

    def __init__(self, page: bool) -> None:
        super().__init__("log in with an API key")
        self.page = page


@dataclass(frozen=True, slots=True)
class _Session:
    tenant: str | None
    expires: float


class Logins:
    """Live inspector sessions: token digest → the tenant of the key that opened it."""

    def __init__(self, keys: ApiKeys, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.keys = keys
        self._clock = clock
        self._lock = threading.Lock()
        self._live: dict[str, _Session] = {}
        self._wrong: dict[str, tuple[float, int]] = {}  # client → (minute started, wrong keys)

    def may_try(self, client: str) -> bool:
        """Whether `client` may try a key now: fewer than MAX_WRONG wrong ones this minute."""
        with self._lock:
            since, count = self._wrong.get(client, (0.0, 0))
            return count < MAX_WRONG or self._clock() - since >= WRONG_SECONDS

    def login(self, key: str, client: str = "") -> str | None:
        """A new session token for a configured key, or None for a wrong one (counted against
        `client`)."""
        known, tenant = self.keys.tenant(key)
        if not known:
            now = self._clock()
            with self._lock:
                since, count = self._wrong.get(client, (now, 0))
                if now - since >= WRONG_SECONDS:
                    since, count = now, 0
                if len(self._wrong) >= MAX_SESSIONS and client not in self._wrong:
                    self._wrong = {
                        c: w for c, w in self._wrong.items() if now - w[0] < WRONG_SECONDS
                    }
                    if len(self._wrong) >= MAX_SESSIONS:
                        del self._wrong[next(iter(self._wrong))]
                self._wrong[client] = (since, count + 1)
            return None
        token = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            if len(self._live) >= MAX_SESSIONS:
                self._live = {k: s for k, s in self._live.items() if s.expires > now}
                while len(self._live) >= MAX_SESSIONS:  # the oldest logins give way
                    del self._live[next(iter(self._live))]
            self._live[digest(token)] = _Session(tenant, now + SESSION_SECONDS)
        return token

    def tenant(self, token: str) -> tuple[bool, str | None]:
        """(known, tenant) for a session token; an expired one is forgotten."""
        key = digest(token)
        with self._lock:
            found = self._live.get(key)
            if found is None:
                return False, None
            if found.expires <= self._clock():
                del self._live[key]
                return False, None
            return True, found.tenant

    def logout(self, token: str) -> None:
        with self._lock:
            self._live.pop(digest(token), None)
