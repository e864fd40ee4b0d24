"""Who holds a Wyoming connection: it first *waits* (before its first message, in intake's one pool
of waiting places, ``Intake.session_waiting``: INTAKE_SESSIONS_WAITING_PER_CLIENT per client,
whatever the protocol), then holds a *seat* (at most ``per_client`` per client, ``total`` in all). A waiting connection holds no seat, so a stranger
that opens sockets and says nothing (or cannot say the key) never keeps a served client out; a
client with no seat left is refused at once, before it waits."""

from __future__ import annotations

from typing import Literal

from servicekit import ClientHolds

Bound = Literal["waiting", "client", "total"]


class Seats:
    """One protocol's sessions in this process."""

    def __init__(self, total: int, per_client: int, waiting: ClientHolds) -> None:
        self.seated = ClientHolds(total, per_client)
        self.waiting = waiting

    def arrive(self, client: str) -> Seat | Bound:
        """A new connection of ``client``, waiting for its first message; or the bound that refuses it."""
        held = self.seated.held.get(client, 0) + self.waiting.held.get(client, 0)
        if held >= self.seated.per_client:  # it could never sit: told so now
            return "client"
        if self.seated.count >= self.seated.total:
            return "total"
        refused = self.waiting.take(client)
        if refused == "client":
            return "waiting"
        return refused or Seat(self, client)


class Seat:
    """One connection's place: waiting, then seated (``take``), then given back (``leave``)."""

    def __init__(self, seats: Seats, client: str) -> None:
        self.seats, self.client = seats, client
        self.waiting, self.seated = True, False

    def take(self) -> Bound | None:
        """Its first message came: from waiting to a seat; or the bound that refuses it (it stops waiting)."""
        self._stop_waiting()
        refused = self.seats.seated.take(self.client)
        self.seated = refused is None
        return refused

    def leave(self) -> None:
        self._stop_waiting()
        if self.seated:
            self.seated = False
            self.seats.seated.give(self.client)

    def _stop_waiting(self) -> None:
        if self.waiting:
            self.waiting = False
            self.seats.waiting.give(self.client)
