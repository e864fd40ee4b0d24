"""servicekit.ClientHolds: the proxy's uploads, intake's waiting places and the Wyoming port's
connections per client; a Hold, one connection's place among them."""

from __future__ import annotations

from servicekit import ClientHolds, Hold


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


def test_a_hold_is_given_back_once_however_many_endings_give_it() -> None:
    holds = ClientHolds(total=4, per_client=1)
    first, second = Hold(holds, "a"), Hold(holds, "a")
    assert holds.full("a") is None and holds.count == 0  # asking takes nothing
    assert first.take() is None and first.held
    assert holds.full("a") == "client"
    assert second.take() == "client" and not second.held
    second.give()  # refused: it held nothing to give
    assert holds.held == {"a": 1}
    first.give()
    first.give()  # the first message, then the end: given back once
    assert (holds.count, holds.held) == (0, {})
