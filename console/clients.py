"""The console's clients: one bounded pool of admin clients, one per principal, and a bound on
the consumers the record browser opens at once.

A web page must not cost a broker connection that outlives it: every page of a principal
goes through that principal's one `AsyncAdminClient` (which keeps one connection per broker),
the least recently used client is closed when more principals than `max_admins` are active,
and each record-browser read opens a consumer that it closes, at most `max_readers` at a time.
A principal is the console's own configuration (`None`) or a logged-in user's `Credentials`:
the client then authenticates to the cluster as that user, so the cluster's ACLs apply.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from minilog.connector.client import AsyncAdminClient, AsyncConsumer

MAX_ADMINS = 32
MAX_READERS = 4


@dataclass(frozen=True)
class Credentials:
    """A SASL user the console acts as (kept in memory only, never in a cookie)."""
    username: str
    password: str
    mechanism: str

    def __repr__(self) -> str:  # never the password, in a log or a traceback
        return f"Credentials({self.username!r}, {self.mechanism})"

    def settings(self) -> dict[str, str]:
        return {"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                "sasl.password": self.password}


Principal = Credentials | None


class ClientPool:
    """Admin clients by principal, least recently used closed first; consumers bounded."""

    def __init__(self, config: dict[str, Any], max_admins: int = MAX_ADMINS,
                 max_readers: int = MAX_READERS) -> None:
        self.config = config
        self._max_admins = max_admins
        self._admins: OrderedDict[Principal, AsyncAdminClient] = OrderedDict()
        self._readers = asyncio.Semaphore(max_readers)

    def settings(self, principal: Principal) -> dict[str, Any]:
        """The client settings acting as `principal`."""
        return self.config if principal is None else {**self.config, **principal.settings()}

    def admin(self, principal: Principal) -> AsyncAdminClient:
        client = self._admins.pop(principal, None) or AsyncAdminClient(self.settings(principal))
        self._admins[principal] = client
        while len(self._admins) > self._max_admins:
            _, oldest = self._admins.popitem(last=False)
            asyncio.ensure_future(oldest.close())
        return client

    async def discard(self, principal: Principal) -> None:
        """Close `principal`'s client (a logout, a refused login)."""
        client = self._admins.pop(principal, None)
        if client is not None:
            await client.close()

    @contextlib.asynccontextmanager
    async def consumer(self, principal: Principal) -> AsyncIterator[AsyncConsumer]:
        """A started consumer without a group for one read, closed afterwards."""
        async with self._readers:
            consumer = AsyncConsumer({**self.settings(principal), "enable.auto.commit": False,
                                      "auto.offset.reset": "earliest"})
            await consumer.start()
            try:
                yield consumer
            finally:
                await consumer.close()

    async def close(self) -> None:
        admins = list(self._admins.values())
        self._admins.clear()
        await asyncio.gather(*(a.close() for a in admins), return_exceptions=True)
