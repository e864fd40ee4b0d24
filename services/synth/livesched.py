"""Which cast gets the model next, when open (live) casts are among them.

A live cast is interactive: somebody is waiting for the sentence they just finished typing (or
their agent finished generating). So a complete sentence of a live cast goes before any whole
text cast's lead work, with one exception kept from :func:`scheduler.pick`: a cast whose
listener would run dry while that sentence is made (its lead is between 0 and the model's time
for a short chunk) gets its chunk first. A live cast has at most one sentence in flight (made or
being encoded, not yet appended), so that between its sentences the others move on; only when
nothing else wants the model may it run ahead. Among live casts with a sentence ready, the one
furthest behind its listener goes first (one without audio before any), so that the open casts
take turns: one client's busy casts never starve another's. While a live cast's next sentence is being typed
(text has come that completes no sentence yet), a cast that leads its listener by more than
``hold_lead_s`` waits instead of taking the model, so the model is free when that sentence
completes; it loses nothing, being that far ahead. Without live casts this is exactly ``pick``.
Like ``pick``, a pure function: it returns a :class:`Decision` and changes none of its casts.
"""

from __future__ import annotations

from collections.abc import Iterable
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


L = TypeVar("L", bound=Interactive)


def pick_next(
    casts: Iterable[L], now: float, *, first_chunk_s: float = 0.0, hold_lead_s: float = float("inf")
) -> Decision[L]:
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
    if ready:  # the one furthest behind its listener, as pick orders casts (one without audio first):
        # a busy cast that was just served waits its turn, so no open cast starves the others
        return Decision(_running_dry(batch, now, first_chunk_s) or pick(ready, now).cast)
    decision = pick(batch, now, first_chunk_s=first_chunk_s)
    chosen = decision.cast
    if chosen is not None and typing and chosen.pace.lead(now) > hold_lead_s:
        return Decision(None)  # far enough ahead: keep the model free for the sentence being typed
    return decision if chosen is not None else Decision(ahead[0] if ahead else None)


def _running_dry(batch: list[L], now: float, within_s: float) -> L | None:
    """The batch cast whose listener runs dry soonest within ``within_s`` (not already dry)."""
    at_risk = [(c.pace.lead(now), i) for i, c in enumerate(batch) if 0 <= c.pace.lead(now) < within_s]
    return batch[min(at_risk)[1]] if at_risk else None
