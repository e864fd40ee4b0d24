"""What clients hold at once in one process (connections, bodies being read, places waiting): a
bound in all and a bound per client, counted here (not in Redis: a hold lives no longer than its
task)."""

from __future__ import annotations

from typing import Literal

Bound = Literal["client", "total"]


class ClientHolds:
    """At most ``total`` holds at once, ``per_client`` of them one client's (its key:
    ``client_address``, an IPv6 client's /64). A client has an entry only while it holds one, so
    the map is never larger than ``total``."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self.held: dict[str, int] = {}  # client -> its holds
        self.count = 0

    def full(self, client: str) -> Bound | None:
        """Which bound would refuse ``client`` one more; None when it may take one. The client's
        own bound first: a client at its share is told so, even when all are held."""
        if self.held.get(client, 0) >= self.per_client:
            return "client"
        return "total" if self.count >= self.total else None

    def take(self, client: str) -> Bound | None:
        """None when one was taken for ``client``; else which bound refused it (nothing taken)."""
        refused = self.full(client)
        if refused is None:
            self.held[client] = self.held.get(client, 0) + 1
            self.count += 1
        return refused

    def give(self, client: str) -> None:
        """Give back one that ``take`` gave ``client``."""
        self.count -= 1
        left = self.held.pop(client) - 1
        if left:
            self.held[client] = left


class Hold:
    """One connection's hold in a :class:`ClientHolds` (its waiting place, its seat): taken at
    most once, given back at most once, whichever of its endings comes first."""

    __slots__ = ("holds", "client", "held")

    def __init__(self, holds: ClientHolds, client: str) -> None:
        self.holds, self.client = holds, client
        self.held = False

    def take(self) -> Bound | None:
        """None when the client had one left (then this connection holds it); else the bound."""
        refused = self.holds.take(self.client)
        self.held = refused is None
        return refused

    def give(self) -> None:
        if self.held:
            self.held = False
            self.holds.give(self.client)
