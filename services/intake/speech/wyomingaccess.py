"""Who may use the Wyoming port, and how many connections each holds.

Home Assistant's Wyoming integration connects with a host and a port only: it can send no key.
So when ``STREAMTTS_API_KEYS`` is set, a client whose address is in INTAKE_WYOMING_ALLOW_FROM
(loopback by default: Home Assistant on the same box) is let in as it is, and any other must
put a key in its first event's data (``"api_key": "<key>"``, any event type); without one the
connection is answered ``invalid_api_key`` and closed. With no keys the port is as open as the
HTTP API. Connections are counted in this process, overall and per client (an IPv6 client is
its /64, as everywhere).
"""

from __future__ import annotations

import asyncio

from castlog import cancel_and_wait
from servicekit import ClientHolds

KEY_FIELD = "api_key"  # where a client that is not allowed by address puts its key


class Connections:
    """The connections this process holds: at most ``most`` in all and ``per_client`` per client.
    Each is a task, so a stop can end them all."""

    def __init__(self, most: int, per_client: int) -> None:
        self.holds = ClientHolds(most, per_client)
        self.tasks: set[asyncio.Task[None]] = set()

    def enter(self, client: str) -> str | None:
        """Count one more for ``client``; or the reason it is refused (nothing counted)."""
        refused = self.holds.take(client)
        if refused == "client":
            return (f"your address holds {self.holds.per_client} Wyoming connections "
                    "(INTAKE_WYOMING_CONNECTIONS_PER_CLIENT); close one first")
        if refused == "total":
            return f"the Wyoming port holds {self.holds.total} connections (INTAKE_WYOMING_MAX_CONNECTIONS)"
        return None

    def leave(self, client: str) -> None:
        self.holds.give(client)

    async def close_all(self) -> None:
        """A stop: every connection's task cancelled until it has ended (castlog.cancel_and_wait:
        one that swallows a cancel mid-Redis-call is cancelled again, not waited on for ever)."""
        await cancel_and_wait(*self.tasks)
