"""Which cast gets the model next, when open (live) casts are among them.

A live cast is interactive: somebody is waiting for the sentence they just finished typing (or
their agent finished generating). So a complete sentence of a live cast goes before any whole
text cast's lead work, with one exception kept from :func:`scheduler.pick`: a cast whose
listener would run dry while that sentence is made (its lead is between 0 and the model's time
for a short chunk) gets its chunk first. A live cast has at most one sentence in flight (made or
being encoded, not yet appended), so that between its sentences the others move on; only when
nothing else wants the model may it run ahead. Live casts with a sentence ready go round by
client (the opener's tag, carried in the recipe; a cast without one is a client of its own):
the client served least lately goes first (one never served before any), then, among that
client's casts, the one furthest behind its listener (one without audio before any). So a client
with many open casts is served once a round as a client with one is, never once per cast
(:class:`Rotation` remembers the order). While a live cast's next sentence is being typed
(text has come that completes no sentence yet), a cast that leads its listener by more than
``hold_lead_s`` waits instead of taking the model, so the model is free when that sentence
completes; it loses nothing, being that far ahead. Without live casts this is exactly ``pick``.
Like ``pick``, a pure function: it returns a :class:`Decision` and changes none of its casts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar

from .scheduler import Decision, Schedulable, pick


class Interactive(Schedulable, Protocol):
    @property
    def live(self) -> bool: ...

    @property
    def in_flight(self) -> int: ...

    @property
    def typing(self) -> bool:
        """A live cast holds text that completes no sentence yet."""
        ...

    @property
    def client(self) -> str:
        """Which client the cast's chunks count for (open casts share the model round robin by client)."""
        ...


L = TypeVar("L", bound=Interactive)

# Clients whose last service Rotation remembers (a worker holds at most SYNTH_MAX_LIVE_HELD open
# casts, far fewer); the one forgotten was served least lately of all, and goes first anyway.
MAX_REMEMBERED = 4096
# The place of a client never served (or forgotten): before every client served.
NEVER = -1


class Rotation:
    """The order in which clients last had a live cast's chunk (round robin): the dispatcher notes each
    (:meth:`served`) and hands :attr:`last` to :func:`pick_next`, which stays pure."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}  # client -> when it was last served (a count); in that order
        self._count = 0

    def served(self, client: str) -> None:
        self._count += 1
        self.last.pop(client, None)  # re-inserted last: the dict's first is the least lately served
        self.last[client] = self._count
        if len(self.last) > MAX_REMEMBERED:
            del self.last[next(iter(self.last))]


def pick_next(
    casts: Iterable[L], now: float, *, first_chunk_s: float = 0.0, hold_lead_s: float = float("inf"),
    rotation: Mapping[str, int] | None = None,
) -> Decision[L]:
    """The cast that gets the next chunk (see the module's docstring); ``rotation``: each
    client's last service (:attr:`Rotation.last`), none given: every client is new."""
    rotation = rotation or {}
    batch: list[L] = []
    typing = False
    ready: list[L] = []  # live casts with a complete sentence and nothing in flight
    ahead: list[L] = []  # live casts with a sentence in flight and another complete
    for cast in casts:
        typing = typing or (cast.live and cast.typing)
        if not cast.wants_chunk:
            continue
        if not cast.live:
            batch.append(cast)
        elif cast.in_flight == 0:
            ready.append(cast)
        else:
            ahead.append(cast)
    if ready:  # the client served least lately, then its cast furthest behind (as pick orders
        # casts, one without audio first): a client with many casts is served once a round
        return Decision(_running_dry(batch, now, first_chunk_s) or pick(_next_client(ready, rotation), now).cast)
    decision = pick(batch, now, first_chunk_s=first_chunk_s)
    chosen = decision.cast
    if chosen is not None and typing and chosen.pace.lead(now) > hold_lead_s:
        return Decision(None)  # far enough ahead: keep the model free for the sentence being typed
    if chosen is not None or not ahead:
        return decision
    return Decision(pick(_next_client(ahead, rotation), now).cast)  # running ahead, round robin too


def _next_client(ready: list[L], rotation: Mapping[str, int]) -> list[L]:
    """The ready casts of the client served least lately (those never served tie, all first)."""
    first = min(rotation.get(c.client, NEVER) for c in ready)
    return [c for c in ready if rotation.get(c.client, NEVER) == first]


def _running_dry(batch: list[L], now: float, within_s: float) -> L | None:
    """The batch cast whose listener runs dry soonest within ``within_s`` (not already dry)."""
    at_risk = [(c.pace.lead(now), i) for i, c in enumerate(batch) if 0 <= c.pace.lead(now) < within_s]
    return batch[min(at_risk)[1]] if at_risk else None
