"""What clients hold at once in one process (connections, bodies being read): a bound in all and
a bound per client, counted here (not in Redis: a hold lives no longer than its task)."""

from __future__ import annotations

from typing import Literal


class ClientHolds:
    """At most ``total`` holds at once, ``per_client`` of them one client's (its key:
    ``client_address``, an IPv6 client's /64). A client has an entry only while it holds one, so
    the map is never larger than ``total``."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self.held: dict[str, int] = {}  # client -> its holds
        self.count = 0

    def take(self, client: str) -> Literal["client", "total"] | None:
        """None when one was taken for ``client``; else which bound refused it (nothing taken).
        The client's own bound first: a client at its share is told so, even when all are held."""
        if self.held.get(client, 0) >= self.per_client:
            return "client"
        if self.count >= self.total:
            return "total"
        self.held[client] = self.held.get(client, 0) + 1
        self.count += 1
        return None

    def give(self, client: str) -> None:
        """Give back one that ``take`` gave ``client``."""
        self.count -= 1
        left = self.held.pop(client) - 1
        if left:
            self.held[client] = left
