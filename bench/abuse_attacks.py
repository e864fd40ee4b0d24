"""The second hostile-client campaign (#35) against intake, the worker and Durable Streams, for
bench_abuse.py: intake's sessions, the splitter, fair whole-text queues, stream types and owners,
the Wyoming, WebRTC and worker pools, and tenants (against the intake with keys set). Each returns
what held, as counts and states, and the well-behaved client's probe taken while it was held
(abuse_probe.py); the front proxy's attacks are in abuse_proxy.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
from aiortc import RTCPeerConnection
from redis.asyncio import Redis

import castlog
from castlog import LiveStore, LogReader, Start
from durablestreams.scripts import MAX_EPOCH_STEP

from abuse_probe import (
    ANSWER_WAIT_S,
    FIRST_AUDIO_WAIT_S,
    KEY_A,
    KEY_B,
    KEY_VICTIM,
    LIVE,
    MAX_SAFE_INTEGER,
    OPEN_PER_CLIENT,
    READ_AHEAD_MARGIN,
    SPEAK,
    WAITING_PER_CLIENT,
    WEBRTC,
    WELL_BEHAVED,
    WYOMING_PER_CLIENT,
    Attack,
    Outcome,
    Stack,
    client,
    next_json,
    probe,
    until,
    ws_url,
    wyoming_event,
    wyoming_frame,
)

# ---- intake's sessions (#35 items 1, 2) -----------------------------------------------------------

async def speak_sockets(s: Stack) -> Outcome:
    """1: one address opened every /v1/speak socket of the process, before saying anything."""
    tried = s.size(64, 12)
    async with client(s.address()) as http:
        sockets, answers = [], []
        for _ in range(tried):
            ws = await http.ws_connect(ws_url(s.intake, SPEAK))
            event = await next_json(ws)
            sockets.append(ws)
            answers.append(event.get("type") if event.get("type") == "Metadata" else event.get("err_code"))
        victim = await probe(s.intake, speak=True)
        for ws in sockets:
            await ws.close()
    admitted = answers.count("Metadata")
    return Outcome("1 /v1/speak sockets from one address", admitted <= WAITING_PER_CLIENT
                   and answers.count("BUSY") == tried - admitted,
                   f"{admitted} of {tried} sockets admitted, {answers.count('BUSY')} BUSY", victim)


async def until_idle(ws: aiohttp.ClientWebSocketResponse[Any]) -> tuple[str, int]:
    """A silent client that answers every ping: how its session ended, and the pongs it sent."""
    pongs = 0
    while True:
        msg = await ws.receive(timeout=ANSWER_WAIT_S)
        if msg.type == aiohttp.WSMsgType.PING:
            await ws.pong(msg.data)
            pongs += 1
        elif msg.type == aiohttp.WSMsgType.TEXT:
            event = json.loads(msg.data)
            if event.get("error") == "idle" or event.get("code") == "IDLE":
                return "idle", pongs
        else:
            return f"ended {ws.close_code}", pongs


async def idle_with_pongs(s: Stack) -> Outcome:
    """2: a client that answers the server's pings and says nothing was held for ever (keys set)."""
    async with client(s.address(), KEY_A) as http:
        live = await http.ws_connect(ws_url(s.keyed, LIVE), autoping=False)
        await live.send_json({"type": "start"})
        speak = await http.ws_connect(ws_url(s.keyed, SPEAK), autoping=False)
        await speak.send_json({"type": "Speak", "text": "Hello. "})
        waits = asyncio.gather(until_idle(live), until_idle(speak))
        victim = await probe(s.keyed, KEY_VICTIM)
        (live_end, live_pongs), (speak_end, speak_pongs) = await waits
        await live.close()
        await speak.close()
    return Outcome("2 sessions held by answering pings", live_end == speak_end == "idle"
                   and min(live_pongs, speak_pongs) >= 2,
                   f"live WS {live_end} after {live_pongs} pongs, /v1/speak {speak_end} after {speak_pongs}", victim)


# ---- texts (#35 items 3, 7) ---------------------------------------------------------------------

async def splitter(s: Stack) -> Outcome:
    """3: a run of full stops, a text without stops, "Mr. " repeated froze intake's loop and synth."""
    n = s.size(4, 1)  # quarter-size texts in --quick
    texts = {"16,000 stops": "." * (4000 * n), "100k stopless": ("word " * (5000 * n))[:25_000 * n].strip(),
             "Mr. x25k": "Mr. " * (6250 * n)}
    async with client(s.address()) as http, client(WELL_BEHAVED) as victim:
        async def submit(text: str) -> tuple[int, str]:
            async with http.post(f"{s.intake}/api/casts", json={"text": text}) as r:
                return r.status, str((await r.json()).get("id", ""))
        attacks = [asyncio.ensure_future(submit(t)) for t in texts.values()]
        await asyncio.sleep(0)
        async with victim.get(f"{s.intake}/api/voices") as r:
            voices = r.status
        async with victim.post(f"{s.intake}/api/casts", json={"text": f"Mine at {time.time()}."}) as r:
            submitted = r.status
        planning = sum(not a.done() for a in attacks)  # still being planned when the victim was answered
        answers = [await a for a in attacks]
        victim_s = await probe(s.intake)  # while synth has the attack's casts in hand
    for _, cast_id in answers:
        if cast_id:
            await castlog.cancel(s.redis, cast_id)
    statuses = [status for status, _ in answers]
    served = voices == 200 and submitted in (200, 201)
    return Outcome("3 quadratic splitter", served and all(st in (200, 201, 422) for st in statuses),
                   f"{', '.join(texts)} at {'1/4' if s.quick else 'full'} size answered {statuses}; victim's "
                   f"voices {voices} and submit {submitted} with {planning} still planning",
                   victim_s if served else None)


async def started_at(redis: Redis, cast_id: str) -> int | None:
    entries = await LogReader(redis).read(cast_id, 0, 10_000)
    return next((e.ts for e in entries if isinstance(e.record, Start)), None)


async def fairness(s: Stack) -> Outcome:
    """7: two addresses' bursts queued first; a third client's short text waited behind them all."""
    burst = s.size(24, 8)
    sentence = "It goes on about the harbour, the boats and the weather of the week, slowly. "
    queued = []
    for attacker in (s.address(), s.address()):
        async with client(attacker) as http:
            for n in range(burst):
                async with http.post(f"{s.intake}/api/casts",
                                     json={"text": f"Burst {attacker} {n}. " + sentence * 3}) as r:
                    assert r.status in (200, 201), await r.text()
                    queued.append(str((await r.json())["id"]))
    waiting = [c for c in queued if await started_at(s.redis, c) is None]  # the queue ahead of the victim
    async with client(WELL_BEHAVED) as http:
        async with http.post(f"{s.intake}/api/casts", json={"text": f"My short text at {time.time()}."}) as r:
            mine = str((await r.json())["id"])
    begun = None
    for _ in range(int(FIRST_AUDIO_WAIT_S * 20)):
        if (begun := await started_at(s.redis, mine)) is not None:
            break
        await asyncio.sleep(0.05)
    victim = await probe(s.intake)
    starts = [await started_at(s.redis, c) for c in waiting]
    ahead = sum(1 for t in starts if t is not None and begun is not None and t < begun)
    for cast_id in queued:
        await castlog.cancel(s.redis, cast_id)
    # round robin by client: at most one cast of each attacker's, beside those read ahead already
    return Outcome("7 whole texts first come, first served", begun is not None and ahead <= 2 + READ_AHEAD_MARGIN,
                   f"{len(waiting)} of 2x{burst} burst casts queued ahead; the victim's started after {ahead} of "
                   f"them", victim if begun is not None else None)


# ---- Durable Streams (#35 items 4, 9) -------------------------------------------------------------

async def stream_types(s: Stack) -> Outcome:
    """4: a text/html stream loading an application/javascript one ran script on the origin."""
    statuses = []
    async with client(s.address()) as http:
        for kind in ("text/html", "application/javascript", "image/svg+xml", "TEXT/HTML; charset=utf-8"):
            async with http.put(f"{s.intake}/v1/stream/xss/page", headers={"Content-Type": kind},
                                data=b"<script>alert(1)</script>") as r:
                statuses.append(r.status)
    stored = await s.redis.keys("ds/*xss*")
    victim = await probe(s.intake)
    return Outcome("4 script from stream data", statuses == [415] * 4 and not stored,
                   f"active types answered {statuses}, {len(stored)} keys stored", victim)


def producer(epoch: int, seq: int) -> dict[str, str]:
    return {"Producer-Id": "writer", "Producer-Epoch": str(epoch), "Producer-Seq": str(seq),
            "Content-Type": "text/plain"}


async def stream_owners(s: Stack) -> Outcome:
    """9: anyone appended to, closed, deleted, forked or took another's stream, or raised its epoch."""
    url = f"{s.intake}/v1/stream/owned/by-a"
    text = {"Content-Type": "text/plain"}
    async with client(s.address()) as owner, client(s.address()) as stranger:
        async with owner.put(url, headers=text, data=b"mine") as r:
            created = r.status
        attempts: list[tuple[str, str, dict[str, Any]]] = [
            ("PUT", url, {"headers": text}), ("POST", url, {"headers": text, "data": b"not yours"}),
            ("POST", url, {"headers": {"Stream-Closed": "true"}}),
            ("POST", url, {"headers": producer(MAX_SAFE_INTEGER, 0), "data": b"epoch"}), ("DELETE", url, {}),
            ("PUT", url + "-fork", {"headers": {"Stream-Forked-From": "/v1/stream/owned/by-a"},
                                    "skip_auto_headers": ["Content-Type"]}),
        ]
        refused = []
        for method, target, kwargs in attempts:
            async with stranger.request(method, target, **kwargs) as r:
                refused.append(r.status == 403 and (await r.json())["error"]["code"] == "not_owner")
        async with owner.post(url, headers=producer(MAX_SAFE_INTEGER, 0), data=b"!") as r:
            epoch = r.status  # 2^53-1 at once: past MAX_EPOCH_STEP
        async with owner.post(url, headers=producer(MAX_EPOCH_STEP, 0), data=b"!") as r:
            owned = r.status
        async with owner.get(f"{s.edge}/v1/stream/owned/by-a") as r:
            body = await r.read()
        victim = await probe(s.intake)
    return Outcome("9 durable streams have no owner", created == 201 and all(refused) and epoch == 400
                   and owned == 200 and body == b"mine!",
                   f"{sum(refused)} of {len(refused)} stranger writes 403 not_owner; epoch 2^53-1 {epoch}; "
                   f"the owner writes on ({owned}) and reads {body!r}", victim)


# ---- pools (#35 items 8, 10) ----------------------------------------------------------------------
async def describe_until_cut(s: Stack, address: str, seated: list[str]) -> str:
    """One connection that says nothing but describe, every 0.2 s (in ``seated`` once answered,
    or once refused): how it ended."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", s.wyoming_port, local_addr=(address, 0))
    except OSError:
        seated.append(address)
        return "refused"
    try:
        for n in range(200):
            writer.write(wyoming_frame("describe"))
            kind, code = await wyoming_event(reader)
            if n == 0:
                seated.append(address)
            if kind != "info":
                return code or kind
            await asyncio.sleep(0.2)
        return "kept"
    except (OSError, asyncio.IncompleteReadError):
        return "closed"
    finally:
        writer.close()


async def home_assistant(port: int) -> int:
    """Home Assistant, on another address, describing until it is answered: the tries it took
    (0: never within a hundred)."""
    for tries in range(1, 101):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(WELL_BEHAVED, 0))
            writer.write(wyoming_frame("describe"))
            answered = (await wyoming_event(reader))[0] == "info"
            writer.close()
            if answered:
                return tries
        except (OSError, asyncio.IncompleteReadError):
            pass
        await asyncio.sleep(0.2)
    return 0


async def wyoming_describe(s: Stack) -> Outcome:
    """8: describe was free and reset the idle limit: 16 addresses held all 64 slots for ever."""
    addresses = [s.address() for _ in range(s.size(16, 2))]
    seated: list[str] = []
    spam = asyncio.gather(*(describe_until_cut(s, a, seated) for a in addresses for _ in range(WYOMING_PER_CLIENT)))
    await until(lambda: len(seated) == len(addresses) * WYOMING_PER_CLIENT)  # every seat they could get, held
    victim = await probe(s.intake)
    tries = await home_assistant(s.wyoming_port)
    ends = await spam
    kept = ends.count("kept")
    return Outcome("8 Wyoming describe holds slots", tries > 0 and kept == 0,
                   f"{len(ends)} describing connections: {ends.count('idle')} cut idle, "
                   f"{len(ends) - ends.count('idle') - kept} refused or busy, {kept} kept; "
                   f"HA {'served on try ' + str(tries) if tries else 'never served'}", victim if tries else None)


async def webrtc_offers(s: Stack) -> Outcome:
    """10a: 26 addresses x 4 never-connected offers took all 101 media ports."""
    pc = RTCPeerConnection()
    try:
        pc.createDataChannel("control")
        pc.addTransceiver("audio", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
        statuses: list[list[int]] = []  # each address's answers, in turn
        for address in [s.address() for _ in range(s.size(26, 6))]:
            async with client(address) as http:
                statuses.append([])
                for _ in range(WAITING_PER_CLIENT + 1):
                    async with http.post(f"{s.intake}{WEBRTC}", data=sdp, headers={"Content-Type": "application/sdp"}) as r:
                        statuses[-1].append(r.status)
        async with client(WELL_BEHAVED) as http:  # the range full: an address holding none is answered
            async with http.post(f"{s.intake}{WEBRTC}", data=sdp, headers={"Content-Type": "application/sdp"}) as r:
                answered = r.status
        victim = await probe(s.intake)
    finally:
        await pc.close()
    every = [status for each in statuses for status in each]
    most = max(each.count(201) for each in statuses)
    return Outcome("10 WebRTC offers never connected", answered == 201 and most <= WAITING_PER_CLIENT,
                   f"{len(statuses)} addresses x {WAITING_PER_CLIENT + 1} offers: {every.count(201)} answered (at "
                   f"most {most} an address), {every.count(429)} 429, {every.count(503)} 503 busy; another "
                   f"address's offer {answered}", victim if answered == 201 else None)


async def empty_live_casts(s: Stack, places: int) -> Outcome:
    """10b: 16 addresses x 4 empty live casts took the worker's 64 open-cast places."""
    live = LiveStore(s.redis)
    hoard: list[str] = []
    for address in [s.address() for _ in range(max(1, places // OPEN_PER_CLIENT))]:
        async with client(address) as http:
            for _ in range(OPEN_PER_CLIENT):
                async with http.post(f"{s.intake}/api/casts", json={"live": True}) as r:
                    if r.status == 201:
                        hoard.append(str((await r.json())["id"]))
    victim = await probe(s.intake)

    shut = 0
    for cast_id in hoard:  # the worker closed these, as they were, for the victim's cast
        text = await live.read_text(cast_id)
        shut += text is not None and text.closed is not None
    for cast_id in hoard:
        await castlog.cancel(s.redis, cast_id)
    return Outcome("10 empty live casts hold the worker", victim is not None and shut > 0,
                   f"{len(hoard)} empty casts opened for {places} places; {shut} closed empty", victim)


# ---- tenants (#35 items 11, 12) -------------------------------------------------------------------

async def cache_oracle(s: Stack) -> Outcome:
    """11: a guessed text's submit answered `200 existing` with the id (keys and a content key set)."""
    text = {"text": f"A private letter, written at {time.time()}. Its title is private too.", "title": "Dear B"}
    async with client(s.address(), KEY_A) as a, client(s.address(), KEY_B) as b:
        async with a.post(f"{s.keyed}/api/casts", json=text) as r:
            first, a_id = r.status, str((await r.json())["id"])
        async with b.post(f"{s.keyed}/api/casts", json={**text, "title": ""}) as r:
            guess, b_body = r.status, await r.json()
        async with a.post(f"{s.keyed}/api/casts", json=text) as r:
            again, again_id = r.status, str((await r.json())["id"])
    plain = castlog.content_id(text["text"], "af_heart")  # what anyone could hash without the key
    for cast_id in (a_id, str(b_body.get("id", ""))):
        await castlog.cancel(s.redis, cast_id)
    victim = await probe(s.keyed, KEY_VICTIM)
    return Outcome("11 cache oracle", first == 201 and guess == 201 and b_body.get("id") != a_id
                   and b_body.get("status") == "new" and again == 200 and again_id == a_id and a_id != plain,
                   f"another tenant's guess {guess} {b_body.get('status')} (a new id); the owner's repeat {again} "
                   f"(its own hit); the id is {'not ' if a_id != plain else ''}the plain hash", victim)


async def tenant_cancel_blends(s: Stack) -> Outcome:
    """12: any key holder cancelled any tenant's cast; /v1/audio/voices listed every tenant's blends."""
    blend = "af_heart(2)+jf_alpha(1)"
    async with client(s.address(), KEY_A) as a, client(s.address(), KEY_B) as b:
        async with a.post(f"{s.keyed}/api/casts", json={"text": f"Tenant A's own, at {time.time()}."}) as r:
            a_id = str((await r.json())["id"])
        async with b.post(f"{s.keyed}/api/casts/{a_id}/cancel") as r:
            stranger = r.status
        untouched = not await castlog.is_cancelled(s.redis, a_id)
        async with a.post(f"{s.keyed}/v1/audio/speech", json={"model": "tts-1", "voice": blend,
                                                              "input": f"Blended at {time.time()}."}) as r:
            spoken, blend_id = r.status, r.headers.get("X-Cast-Id", "")
        async with a.get(f"{s.keyed}/v1/audio/voices") as r:
            own = [v["id"] for v in (await r.json())["voices"] if "+" in v["id"]]
        async with b.get(f"{s.keyed}/v1/audio/voices") as r:
            other = [v["id"] for v in (await r.json())["voices"] if "+" in v["id"]]
        async with a.post(f"{s.keyed}/api/casts/{a_id}/cancel") as r:
            owner = r.status
    if blend_id:
        await castlog.cancel(s.redis, blend_id)
    victim = await probe(s.keyed, KEY_VICTIM)
    return Outcome("12 tenants cancel and see each other", stranger == 404 and untouched and owner == 202
                   and spoken == 200 and len(own) == 1 and not other,
                   f"another tenant's cancel {stranger} (cast untouched: {untouched}), the owner's {owner}; "
                   f"blends listed to their tenant {len(own)}, to another {len(other)}", victim)


def live_places(quick: bool) -> int:
    """The worker's open-cast places (SYNTH_MAX_LIVE_HELD): its default, fewer in --quick."""
    return 8 if quick else 64


async def empty_live_places(s: Stack) -> Outcome:
    return await empty_live_casts(s, live_places(s.quick))


DIRECT: list[Attack] = [speak_sockets, idle_with_pongs, splitter, stream_types, fairness, wyoming_describe,
                        stream_owners, webrtc_offers, empty_live_places, cache_oracle, tenant_cancel_blends]
