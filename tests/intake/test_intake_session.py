"""The speech session core's own mechanisms, without a protocol around them: answers go out in
order and a cut stops those not out; a client's connections wait without a seat, then sit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from intake.speech.session import InOrder
from intake.speech.wyomingaccess import Connections, Seat
from servicekit import ClientHolds


async def test_answers_go_out_one_after_another_and_a_cut_stops_those_not_out() -> None:
    answers, said = InOrder(most=3), list[str]()
    gates = [asyncio.Event() for _ in range(3)]

    def answer(n: int) -> Callable[[], Awaitable[None]]:
        async def speak() -> None:
            said.append(f"start {n}")
            await gates[n].wait()
            said.append(f"end {n}")
        return speak

    for n in range(3):
        answers.add(None, answer(n))
    assert answers.full()
    gates[1].set()  # the second is ready first, and still waits for the first
    await asyncio.sleep(0)
    gates[0].set()
    while len(said) < 5:
        await asyncio.sleep(0)
    assert said == ["start 0", "end 0", "start 1", "end 1", "start 2"]
    await answers.room()
    await answers.cut()  # the third, still speaking, stops
    gates[2].set()
    await asyncio.sleep(0)
    assert said[-1] == "start 2" and not answers.busy() and not answers.full()
    await answers.done()


async def test_a_broken_answer_is_raised_by_done() -> None:
    answers = InOrder(most=2)

    async def broken() -> None:
        raise ConnectionError("the client went away")

    answers.add(None, broken)
    try:
        await answers.done()
    except ConnectionError:
        return
    raise AssertionError("done() hid the broken answer")


def test_waiting_connections_hold_no_seat_and_are_capped_per_client() -> None:
    seats = Connections(2, 2, waiting=ClientHolds(total=8, per_client=2))
    strangers = [seats.enter("10.0.0.2") for _ in range(2)]
    assert all(isinstance(s, Seat) for s in strangers)
    assert "INTAKE_WYOMING_CONNECTIONS_PER_CLIENT" in str(seats.enter("10.0.0.2"))  # two held: a third could never sit
    served = [seats.enter("10.0.0.1") for _ in range(2)]
    assert [seats.sit(s) for s in served if isinstance(s, Seat)] == [None, None]  # both seats, strangers or not
    assert "INTAKE_WYOMING_MAX_CONNECTIONS" in str(seats.enter("10.0.0.3"))  # every seat taken: refused before it waits
    for seat in [*strangers, *served]:
        assert isinstance(seat, Seat)
        seat.leave()
    assert not seats.seated.held and not seats.waiting.held
