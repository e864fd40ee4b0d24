"""Who may use the Wyoming port, and how many connections each holds.

Home Assistant's Wyoming integration connects with a host and a port only: it can send no key.
So when ``STREAMTTS_API_KEYS`` is set, a client whose address is in INTAKE_WYOMING_ALLOW_FROM
(loopback by default: Home Assistant on the same box) is let in as it is, and any other must
put a key in its first event's data (``"api_key": "<key>"``, any event type); without one the
connection is answered ``invalid_api_key`` and closed. With no keys the port is as open as the
HTTP API. Connections are counted in this process, overall and per client (an IPv6 client is
its /64, as everywhere); one that has sent nothing yet holds no seat, only a waiting place.
"""

from __future__ import annotations

import asyncio

from castlog import cancel_and_wait
from servicekit import ClientHolds

from .seats import Bound, Seat, Seats

KEY_FIELD = "api_key"  # where a client that is not allowed by address puts its key


class Connections:
    """The connections this process holds (``seats.py``): before its first event a connection
    waits (in ``waiting``, intake's one pool of waiting places), then takes a seat (at most ``most`` in all
    and ``per_client`` per client). Each is a task, so a stop can end them all."""

    def __init__(self, most: int, per_client: int, waiting: ClientHolds) -> None:
        self.seats = Seats(most, per_client, waiting)
        self.tasks: set[asyncio.Task[None]] = set()

    def enter(self, client: str) -> Seat | str:
        """A new connection's place, waiting for its first event; or why it is refused (nothing held)."""
        seat = self.seats.arrive(client)
        return seat if isinstance(seat, Seat) else self.reason(seat)

    def sit(self, seat: Seat) -> str | None:
        """The first event came: a seat, or why there is none (the connection is refused)."""
        refused = seat.take()
        return None if refused is None else self.reason(refused)

    def reason(self, bound: Bound) -> str:
        if bound == "client":
            return (f"your address holds {self.seats.seated.per_client} Wyoming connections "
                    "(INTAKE_WYOMING_CONNECTIONS_PER_CLIENT); close one first")
        if bound == "waiting":
            return (f"your address has {self.seats.waiting.per_client} connections that sent nothing yet "
                    "(INTAKE_SESSIONS_WAITING_PER_CLIENT); send a request on one or close it")
        return f"the Wyoming port holds {self.seats.seated.total} connections (INTAKE_WYOMING_MAX_CONNECTIONS)"

    async def close_all(self) -> None:
        """A stop: every connection's task cancelled until it has ended (castlog.cancel_and_wait:
        one that swallows a cancel mid-Redis-call is cancelled again, not waited on for ever)."""
        await cancel_and_wait(*self.tasks)
