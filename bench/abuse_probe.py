"""What the second hostile-client campaign's attacks (#35: abuse_attacks.py, abuse_proxy.py) share:
the well-behaved client's probe, clients told apart by loopback address, what an attack reports.

Each attack runs from loopback addresses of its own, and the well-behaved client (127.0.0.3) is
probed while the attack is held: its voice list, a submit and a live first audio (through the
front proxy where the attack is on the proxy). What "held" means is a count or a state (sockets
refused, sessions cut, places given back, a position in the queue), never a time: the probe's time
is printed beside the undisturbed one as a ratio, and only its being served at all is judged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from redis.asyncio import Redis
from wyoming.event import async_read_event

from streamtts import doorway

WELL_BEHAVED = "127.0.0.3"
LIVE = "/v1/audio/speech/live"
SPEAK = "/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=24000"
WEBRTC = "/v1/audio/speech/webrtc"
# How long the well-behaved client waits for its first audio before it counts as not served.
FIRST_AUDIO_WAIT_S = 20.0
ANSWER_WAIT_S = 30.0  # any one answer the campaign waits for
# Tenants of the keyed intake (#35 items 2, 11, 12: again with API keys set).
KEY_A, KEY_B = "tenant-a-key-" + "a" * 32, "tenant-b-key-" + "b" * 32
KEY_VICTIM = "tenant-v-key-" + "v" * 32
MAX_SAFE_INTEGER = 2**53 - 1
MIB = 1024 * 1024
# Per-client and pool sizes as the campaign's processes run them (bench_abuse.py's environment).
WAITING_PER_CLIENT = 4  # INTAKE_SESSIONS_WAITING_PER_CLIENT
OPEN_PER_CLIENT = 4  # INTAKE_LIVE_MAX_OPEN_PER_CLIENT
WYOMING_PER_CLIENT = 4  # INTAKE_WYOMING_CONNECTIONS_PER_CLIENT
# Casts of the bursts that may start before the victim's beside one per attacker: those the worker
# had already read ahead of its inbox when the victim's arrived (a margin, not a setting).
READ_AHEAD_MARGIN = 3


@dataclasses.dataclass
class Outcome:
    finding: str
    held: bool
    what: str  # what held, in counts and states
    victim_s: float | None  # the well-behaved client's probe during the attack; None: not served


@dataclasses.dataclass
class Stack:
    """What the attacks run against; ``quick`` makes the heavy attacks smaller (see ``size``)."""
    intake: str
    edge: str
    keyed: str  # an intake with STREAMTTS_API_KEYS and STREAMTTS_CONTENT_KEY set, on the same Redis
    redis: Redis
    wyoming_port: int
    quick: bool
    door: str = ""  # the front proxy, once it serves
    proxy: Any = None  # its app, whose state the proxy attacks read
    serving: doorway.Serving | None = None
    next_address: int = 40  # #21's attacks use 127.0.0.10-19

    def address(self) -> str:
        """A loopback address no other attack used: a client of its own."""
        self.next_address += 1
        return f"127.0.0.{self.next_address}"

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full


def client(address: str, key: str | None = None) -> aiohttp.ClientSession:
    """An HTTP client whose connections leave from ``address``, with ``key`` as its bearer."""
    headers = {"Authorization": f"Bearer {key}"} if key else None
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(address, 0), force_close=True),
                                 timeout=aiohttp.ClientTimeout(total=120), headers=headers)


def ws_url(base: str, path: str) -> str:
    return base.replace("http", "ws", 1) + path


async def next_json(ws: aiohttp.ClientWebSocketResponse[Any]) -> dict[str, Any]:
    """The next text message (pings answered on the way); {"closed": ...} once the socket ended."""
    while True:
        msg = await ws.receive(timeout=ANSWER_WAIT_S)
        if msg.type == aiohttp.WSMsgType.TEXT:
            return dict(json.loads(msg.data))
        if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            return {"closed": ws.close_code}


async def first_audio(ws: aiohttp.ClientWebSocketResponse[Any]) -> bool:
    try:
        while (msg := await ws.receive(timeout=FIRST_AUDIO_WAIT_S)).type != aiohttp.WSMsgType.BINARY:
            if msg.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.PING, aiohttp.WSMsgType.PONG):
                return False
    except asyncio.TimeoutError:
        return False
    return True


async def probe(base: str, key: str | None = None, speak: bool = False) -> float | None:
    """The well-behaved client once: its voice list, a submit and a live first audio (and, with
    ``speak``, a /v1/speak turn's audio); the seconds it took, or None (and why, printed) when
    any was not served."""
    started = time.perf_counter()
    async with client(WELL_BEHAVED, key) as http:
        async with http.get(f"{base}/api/voices") as r:
            if r.status != 200:
                return not_served(f"voices {r.status} {await r.text()}")
        async with http.post(f"{base}/api/casts", json={"text": f"Served at {time.time()}."}) as r:
            if r.status not in (200, 201):
                return not_served(f"submit {r.status} {await r.text()}")
        async with http.ws_connect(ws_url(base, LIVE)) as ws:
            await ws.send_json({"type": "start"})
            await ws.send_json({"type": "text", "text": "Hello there, still served. ", "flush": True})
            if not await first_audio(ws):
                return not_served("no live first audio")
            await ws.send_json({"type": "close"})
        if speak:
            async with http.ws_connect(ws_url(base, SPEAK)) as ws:
                if (event := await next_json(ws)).get("type") != "Metadata":
                    return not_served(f"/v1/speak {event}")
                await ws.send_json({"type": "Speak", "text": "Still served."})
                await ws.send_json({"type": "Flush"})
                if not await first_audio(ws):
                    return not_served("no /v1/speak audio")
    return time.perf_counter() - started


def not_served(why: str) -> float | None:
    """No time: the probe was not served (why, printed)."""
    print(f"  the well-behaved client was not served: {why[:300]}", flush=True)
    return None


def wyoming_frame(kind: str) -> bytes:
    return json.dumps({"type": kind}).encode() + b"\n"


async def wyoming_event(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The server's next event as (type, error code), read as Home Assistant's client reads it;
    ("closed", "") once it hung up."""
    event = await asyncio.wait_for(async_read_event(reader), ANSWER_WAIT_S)
    if event is None:
        return "closed", ""
    return event.type, str((event.data or {}).get("code", ""))


async def until(predicate: Callable[[], bool], tries: int = 600) -> bool:
    for _ in range(tries):
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()



Attack = Callable[["Stack"], Awaitable[Outcome]]
