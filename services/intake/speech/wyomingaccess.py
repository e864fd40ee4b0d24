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
from typing import Literal

from servicekit import ClientHolds, Hold

KEY_FIELD = "api_key"  # where a client that is not allowed by address puts its key


class Seat:
    """One connection's places: it first *waits* (before its first event, in intake's one pool of
    waiting places, ``Intake.session_waiting``, whatever the protocol), then holds a *seat*; both
    are given back when it ends (``leave``)."""

    __slots__ = ("waiting", "seated")

    def __init__(self, connections: Connections, client: str) -> None:
        self.waiting = Hold(connections.waiting, client)
        self.seated = Hold(connections.seated, client)

    def leave(self) -> None:
        self.waiting.give()
        self.seated.give()


class Connections:
    """The connections this process holds: before its first event a connection waits, then takes
    a seat (at most ``most`` in all and ``per_client`` per client). A waiting connection holds no
    seat, so a stranger that opens sockets and says nothing (or cannot say the key) never keeps a
    served client out; a client with no seat left is refused at once, before it waits. Each
    connection is a task, so a stop can end them all."""

    def __init__(self, most: int, per_client: int, waiting: ClientHolds) -> None:
        self.seated = ClientHolds(most, per_client)
        self.waiting = waiting
        self.tasks: set[asyncio.Task[None]] = set()

    def enter(self, client: str) -> Seat | str:
        """A new connection's place, waiting for its first event; or why it is refused (nothing held)."""
        if self.seated.held.get(client, 0) + self.waiting.held.get(client, 0) >= self.seated.per_client:
            return self.reason("client")  # it could never sit: told so now
        if self.seated.count >= self.seated.total:
            return self.reason("total")
        seat = Seat(self, client)
        refused = seat.waiting.take()
        return seat if refused is None else self.reason("waiting" if refused == "client" else "total")

    def sit(self, seat: Seat) -> str | None:
        """The first event came: from waiting to a seat, or why there is none (the connection is refused)."""
        seat.waiting.give()
        refused = seat.seated.take()
        return None if refused is None else self.reason(refused)

    def reason(self, bound: Literal["waiting", "client", "total"]) -> str:
        if bound == "client":
            return (f"your address holds {self.seated.per_client} Wyoming connections "
                    "(INTAKE_WYOMING_CONNECTIONS_PER_CLIENT); close one first")
        if bound == "waiting":
            return (f"your address has {self.waiting.per_client} connections that sent nothing yet "
                    "(INTAKE_SESSIONS_WAITING_PER_CLIENT); send a request on one or close it")
        return f"the Wyoming port holds {self.seated.total} connections (INTAKE_WYOMING_MAX_CONNECTIONS)"
