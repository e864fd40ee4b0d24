"""servicekit.ClientHolds: the proxy's uploads and the Wyoming port's connections per client."""

from __future__ import annotations

from servicekit import ClientHolds


def test_holds_are_bounded_per_client_and_in_all_and_come_back() -> None:
    holds = ClientHolds(total=3, per_client=2)
    assert holds.take("a") is None and holds.take("a") is None
    assert holds.take("a") == "client"  # its share, though one is still free
    assert holds.take("b") is None
    assert holds.take("a") == "client" and holds.take("c") == "total"  # its own bound is named first
    assert (holds.count, holds.held) == (3, {"a": 2, "b": 1})  # a refusal takes nothing
    holds.give("a")
    holds.give("b")
    assert holds.take("c") is None
    assert (holds.count, holds.held) == (2, {"a": 1, "c": 1})  # a client that holds none has no entry
