"""Benchmark: the soak. The whole system (Redis with its AOF, intake, edge, a worker with the real
model, a file archive) under steady mixed traffic from several loopback clients, each on its own
address: whole casts followed over SSE and ``audio.mp3`` by listeners that stay and listeners that
leave, ``/v1/audio/speech`` in every format (one reader hangs up), live WebSocket turns (done,
cancelled, hung up), ``/v1/speak`` and Wyoming turns, Durable Streams created, appended, read,
forked and deleted, casts deleted by the admin, refused and malformed requests.

Every ``--every`` seconds it samples each process's RSS, open files, threads (``/proc``) and
asyncio tasks (``streamtts_asyncio_tasks``), Redis' used memory, clients and keys by prefix, and
the archive's size; it prints the slope of each after the warm-up, per hour and per thousand casts.

Then the return to rest: once the traffic has stopped and the finished casts are archived, each
process's open files, threads, tasks and Redis' clients must be back to what they were after the
warm-up (within a small constant), and Redis must hold no key per request: only the keys of the
casts it keeps. The exit status is 1 when they are not.

    python bench/bench_soak.py --quick              # a bounded count of rounds, no faults (CI)
    python bench/bench_soak.py --minutes 60         # steady traffic with faults on a schedule

Faults (not in --quick): every ``--fault-every`` seconds, in turn, the worker killed with -9 and
started again, Redis killed with -9 and started again on its AOF, and a slow client (an SSE and an
MP3 listener that read nothing for a while, then leave).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis
from redis.exceptions import RedisError

from streamtts.redisserver import free_port
from synth.chunkcache import TOTAL as CACHE_TOTAL

from common import RESULTS, arguments, machine, wait_healthy, write_results
from faultrig import RedisCtl, Service

# The voice every request asks for: the model's default (read from /api/voices at the start).
VOICE = "af_heart"
ADMIN_TOKEN = "soak-admin-token-" + "x" * 32
SPEECH_FORMATS = ("mp3", "wav", "pcm", "opus", "flac", "aac")
# Limits raised only where one benchmark client's steady traffic would meet them; the rest stay default.
ENV = {
    "LOG_LEVEL": "WARNING", "INTAKE_RATE": "1000", "INTAKE_BURST": "1000", "EDGE_READ_RATE": "1000",
    "EDGE_READ_BURST": "10000", "STREAMTTS_ADMIN_TOKEN": ADMIN_TOKEN, "ARCHIVE_DELAY_S": "1",
    "SYNTH_BACKEND": "onnx", "SYNTH_THREADS": "1", "SYNTH_CHUNK_CACHE_BYTES": str(4 * 2**20),
}
# The chunk cache is bounded by its bytes, not its key count: its entries (synth/chunk/*) may grow
# with new texts while the bytes its index counts stay within the budget the soak sets above
# (small, so that its eviction runs under the soak's traffic).
CACHE_PREFIXES = frozenset({"synth/chunk"})
CACHE_BUDGET = int(ENV["SYNTH_CHUNK_CACHE_BYTES"])
# How long one request may take before the round counts it as failed (a worker restart included).
REQUEST_S = 120.0
# The return to rest: how far above the warm-up each count may stay (pools filled lazily, a
# thread pool's spare threads), and how long the system has to get there once the traffic stops.
SLACK = {"fds": 8, "threads": 6, "tasks": 6}
REDIS_CLIENTS_SLACK = 4
SETTLE_S = 180.0
SETTLE_POLL_S = 0.5
# Keys a kept cast may hold at rest (its catalog entry, its log or archive stub, its meta): a
# prefix whose count grows by more than this per cast kept grows per request.
KEYS_PER_CAST = 3
# The prefixes of a kept cast's keys: its log (pub/casts), its catalog entry, and a cancelled
# cast's mark (it expires after a day: a cancel that lands after the cast's end still finds it).
CAST_PREFIXES = frozenset({"pub/casts", "catalog/{}", "cancel/{}"})
# Keys made once, on first use (the dead-letter stream, the played set): not per request.
SINGLETON_KEYS = 2
# Each process's wake stream (fanout.blocking: tail/wake/<name>/<token>) lives an hour past its
# last wake-up: a worker killed with -9 leaves its own behind until then, one per start.
WAKE_PREFIX = "tail/wake"


# -- the system ------------------------------------------------------------------------------


class System:
    """Redis, intake (with its Wyoming port), edge and one worker in ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.redis = RedisCtl(root / "redis")
        self.restarts = 0  # the worker's starts after the first (each may leave a wake stream)
        self.archive = root / "archive"
        self.archive.mkdir()
        self.wyoming = free_port()
        ports = {"intake": free_port(), "edge": free_port(), "synth": free_port()}
        base = dict(os.environ, **ENV, REDIS_URL=self.redis.url, ARCHIVE_URL=f"file://{self.archive}")
        self.services = {
            "intake": Service("intake", "intake", dict(base, INTAKE_PORT=str(ports["intake"]),
                                                         INTAKE_WYOMING_PORT=str(self.wyoming)), ports["intake"], root),
            "edge": Service("edge", "edge", dict(base, EDGE_PORT=str(ports["edge"])), ports["edge"], root),
            "synth": Service("synth", "synth", dict(base, SYNTH_METRICS_PORT=str(ports["synth"]),
                                                      SYNTH_CACHE_DIR=str(root / "cache")), ports["synth"], root),
        }

    def url(self, service: str, path: str) -> str:
        return f"http://127.0.0.1:{self.services[service].port}{path}"

    async def start(self) -> None:
        for service in self.services.values():
            service.start()
        await self.ready()

    async def ready(self) -> None:
        """Until every service answers /readyz (the worker: its model loaded and warm)."""
        for name, service in self.services.items():
            await wait_healthy(self.url(name, "/readyz"), service.proc)

    async def close(self) -> None:
        for service in self.services.values():
            await service.stop()
        await self.redis.close()


# -- the traffic -----------------------------------------------------------------------------


@dataclass
class Tally:
    """What the clients did: requests by kind and outcome, casts made and kept."""

    outcomes: Counter[str] = field(default_factory=Counter)
    casts: int = 0
    kept: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)

    def note(self, kind: str, outcome: str) -> None:
        self.outcomes[f"{kind} {outcome}"] += 1

    @property
    def kept_casts(self) -> int:
        """Casts Redis keeps (every route's: each is a link), less those the admin deleted."""
        return self.casts - len(self.deleted)


class Client:
    """One loopback client (its own source address: per-client limits apply to each)."""

    def __init__(self, system: System, n: int, tally: Tally) -> None:
        self.system, self.n, self.tally = system, n, tally
        self.address = f"127.0.0.{n + 2}"
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(local_addr=(self.address, 0), limit=0),
            timeout=aiohttp.ClientTimeout(total=REQUEST_S),
        )
        self.turn = 0

    def text(self, what: str) -> str:
        """A new sentence each time (an identical text would be the same cast, not new work)."""
        self.turn += 1
        return f"Client {self.n} says {what} number {self.turn}."

    async def round(self, k: int) -> None:
        """One of each kind of traffic, in turn."""
        kinds: list[tuple[str, Callable[[], Awaitable[str]]]] = [
            ("cast", self.cast), ("speech", lambda: self.speech(SPEECH_FORMATS[k % len(SPEECH_FORMATS)])),
            ("speech-hangup", self.speech_hangup), ("live", lambda: self.live("close")),
            ("live-cancel", lambda: self.live("cancel")), ("live-hangup", lambda: self.live("hangup")),
            ("speak", self.speak), ("wyoming", self.wyoming_turn), ("durable", self.durable),
            ("refused", self.refused), ("admin-delete", self.admin_delete),
        ]
        for kind, run in kinds:
            try:
                outcome = await asyncio.wait_for(run(), REQUEST_S)
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError, json.JSONDecodeError) as exc:
                outcome = f"failed ({type(exc).__name__})"
            self.tally.note(kind, outcome)

    async def cast(self) -> str:
        """A whole cast: an SSE listener to the end, one that leaves at once, the MP3 read whole
        and one MP3 reader that leaves after its first bytes."""
        sys_ = self.system
        async with self.http.post(sys_.url("intake", "/api/casts"), json={"text": self.text("a cast"),
                                                                          "voice": VOICE}) as r:
            if r.status not in (200, 201):
                return f"submit {r.status}"
            cid = (await r.json())["id"]
        self.tally.casts += 1
        self.tally.kept.add(cid)
        events = sys_.url("edge", f"/api/casts/{cid}/events")
        async with self.http.get(events) as leaving:
            await leaving.content.readline()
        ended = await self._sse_to_eos(events)
        async with self.http.get(sys_.url("edge", f"/api/casts/{cid}/audio.mp3")) as partial:
            await partial.content.read(512)
        async with self.http.get(sys_.url("edge", f"/api/casts/{cid}/audio.mp3")) as whole:
            mp3 = await whole.read()
        return "ok" if ended and mp3 else f"eos {ended}, {len(mp3)} mp3 bytes"

    async def _sse_to_eos(self, url: str) -> bool:
        async with self.http.get(url) as r:
            async for line in r.content:
                if line.startswith(b"event: eos"):
                    return True
        return False

    async def speech(self, fmt: str) -> str:
        body = {"model": "kokoro", "input": self.text(f"speech in {fmt}"), "voice": VOICE, "response_format": fmt}
        async with self.http.post(self.system.url("intake", "/v1/audio/speech"), json=body) as r:
            audio = await r.read()
            self.tally.casts += 1
            return "ok" if r.status == 200 and audio else f"{r.status}"

    async def speech_hangup(self) -> str:
        body = {"model": "kokoro", "input": self.text("a speech left early"), "voice": VOICE,
                "response_format": "pcm"}
        async with self.http.post(self.system.url("intake", "/v1/audio/speech"), json=body) as r:
            await r.content.read(1)
            self.tally.casts += 1
            return "ok" if r.status == 200 else f"{r.status}"

    async def live(self, ending: str) -> str:
        """A live WebSocket turn: closed and heard to the end, cancelled, or hung up on."""
        url = self.system.url("intake", "/v1/audio/speech/live").replace("http", "ws", 1)
        async with self.http.ws_connect(url) as ws:
            await ws.send_json({"type": "start", "voice": VOICE})
            opened = await ws.receive_json()
            if opened.get("type") != "cast":
                return f"start {opened.get('error')}"
            self.tally.casts += 1
            await ws.send_json({"type": "text", "text": self.text(f"live and {ending}")})
            if ending == "hangup":
                return "ok"  # the socket closes here, the cast still open
            await ws.send_json({"type": ending})
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT and json.loads(msg.data)["type"] in ("done", "error"):
                    return "ok" if json.loads(msg.data)["type"] == "done" else json.loads(msg.data)["error"]
        return "ok" if ending == "cancel" else "closed early"

    async def speak(self) -> str:
        url = self.system.url("intake", "/v1/speak?encoding=linear16&sample_rate=16000").replace("http", "ws", 1)
        async with self.http.ws_connect(url) as ws:
            await ws.send_json({"type": "Speak", "text": self.text("speak")})
            await ws.send_json({"type": "Flush"})
            self.tally.casts += 1
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT and json.loads(msg.data).get("type") == "Flushed":
                    await ws.send_json({"type": "Close"})
                    return "ok"
        return "closed early"

    async def wyoming_turn(self) -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.system.wyoming, local_addr=(self.address, 0))
        try:
            data = json.dumps({"text": self.text("wyoming"), "voice": {"name": VOICE}}).encode()
            writer.write(json.dumps({"type": "synthesize", "data_length": len(data)}).encode() + b"\n" + data)
            self.tally.casts += 1
            while True:
                line = await reader.readline()
                if not line:
                    return "closed early"
                header = json.loads(line)
                for length in (header.get("data_length"), header.get("payload_length")):
                    if length:
                        await reader.readexactly(length)
                if header["type"] == "audio-stop":
                    return "ok"
                if header["type"] == "error":
                    return "error"
        finally:
            writer.close()

    async def durable(self) -> str:
        """A Durable Stream created, appended, read, forked, the fork read, and both deleted."""
        # One path per client, made again each round (a fork's link ds/{<path>}/family goes with
        # the fork now; a reused path keeps the key counts comparable between rounds).
        path = f"/v1/stream/soak-{self.n}"
        text = {"Content-Type": "text/plain"}
        statuses = []
        async with self.http.put(self.system.url("intake", path), headers=text, data=b"one ") as r:
            statuses.append(r.status)
        async with self.http.post(self.system.url("intake", path), headers=text, data=b"two") as r:
            statuses.append(r.status)
        async with self.http.get(self.system.url("edge", path), params={"offset": "-1"}) as r:
            statuses.append(r.status)
            read = await r.read()
        async with self.http.put(self.system.url("intake", path + "/fork"), headers={"Stream-Forked-From": path},
                                 skip_auto_headers=["Content-Type"]) as r:
            statuses.append(r.status)
        async with self.http.get(self.system.url("edge", path + "/fork"), params={"offset": "-1"}) as r:
            statuses.append(r.status)
        for gone in (path + "/fork", path):
            async with self.http.delete(self.system.url("intake", gone)) as r:
                statuses.append(r.status)
        return "ok" if statuses == [201, 204, 200, 201, 200, 204, 204] and read == b"one two" else f"{statuses}"

    async def refused(self) -> str:
        """Malformed and refused requests: each must be a 4xx."""
        sys_ = self.system
        got = []
        async with self.http.post(sys_.url("intake", "/api/casts"), data=b"{not json",
                                  headers={"Content-Type": "application/json"}) as r:
            got.append(r.status)
        async with self.http.post(sys_.url("intake", "/api/casts"), json={"text": "Hi.", "voice": "nobody"}) as r:
            got.append(r.status)
        async with self.http.post(sys_.url("intake", "/v1/audio/speech"),
                                  json={"model": "kokoro", "input": "Hi.", "voice": VOICE, "response_format": "xyz"}) as r:
            got.append(r.status)
        async with self.http.get(sys_.url("edge", "/api/casts/nosuchcast/events")) as r:
            got.append(r.status)
        async with self.http.delete(sys_.url("intake", "/api/casts/nosuchcast"),
                                    headers={"Authorization": "Bearer wrong"}) as r:
            got.append(r.status)
        try:
            await self.http.ws_connect(sys_.url("intake", "/v1/speak?encoding=nope").replace("http", "ws", 1))
            got.append(101)
        except aiohttp.WSServerHandshakeError as exc:
            got.append(exc.status)
        return "ok" if all(400 <= s < 500 for s in got) else f"{got}"

    async def admin_delete(self) -> str:
        """The admin deletes one of this client's finished casts."""
        mine = sorted(self.tally.kept - self.tally.deleted)
        if not mine:
            return "none to delete"
        cid = mine[0]
        async with self.http.delete(self.system.url("intake", f"/api/casts/{cid}"),
                                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as r:
            if r.status == 200:
                self.tally.kept.discard(cid)
                self.tally.deleted.add(cid)
                return "ok"
            return f"{r.status}"

    async def slow_listener(self, hold_s: float) -> str:
        """A listener that reads nothing for ``hold_s`` (its socket's buffers fill), then leaves."""
        if not self.tally.kept:
            return "none to read"
        cid = sorted(self.tally.kept)[-1]
        async with self.http.get(self.system.url("edge", f"/api/casts/{cid}/events")) as sse, \
                self.http.get(self.system.url("edge", f"/api/casts/{cid}/audio.mp3")) as mp3:
            await asyncio.sleep(hold_s)  # the fault itself: a client that does not read
            return f"{sse.status} {mp3.status}"

    async def close(self) -> None:
        await self.http.close()


# -- sampling ---------------------------------------------------------------------------------


TASKS = re.compile(r"^streamtts_asyncio_tasks (\S+)$", re.M)


def proc_counts(pid: int) -> dict[str, float]:
    """RSS (MiB), open files and threads of one process, from /proc."""
    rss_kib = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
    return {"rss_mib": rss_kib / 1024, "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": len(os.listdir(f"/proc/{pid}/task"))}


async def loop_tasks(http: aiohttp.ClientSession, url: str) -> float:
    async with http.get(url) as r:
        found = TASKS.search(await r.text())
    return float(found.group(1)) if found else float("nan")


def key_prefix(key: bytes) -> str:
    """A key's family: its first two parts, hash tags blanked (``cancel/{l40}/<id>`` → ``cancel/{}``)."""
    return "/".join(re.split(r"[/:]", re.sub(r"\{[^}]*\}", "{}", key.decode(errors="replace")))[:2])


async def key_examples(url: str, prefixes: list[str], per: int = 4) -> dict[str, list[str]]:
    """A few keys of each prefix, with their TTL (-1: none), to say what a grown prefix holds."""
    redis = Redis.from_url(url)
    found: dict[str, list[str]] = {p: [] for p in prefixes}
    try:
        async for key in redis.scan_iter(count=1000):
            shown = found.get(key_prefix(key))
            if shown is not None and len(shown) < per:
                shown.append(f"{key.decode(errors='replace')} ttl {await redis.ttl(key)}")
    finally:
        await redis.aclose()
    return found


async def sample(system: System, http: aiohttp.ClientSession) -> dict[str, Any]:
    """One sample of every process, Redis and the archive."""
    row: dict[str, Any] = {"t": time.monotonic()}
    for name, service in system.services.items():
        if service.proc is None or service.proc.poll() is not None:
            continue
        try:
            counts = proc_counts(service.proc.pid)
            counts["tasks"] = await loop_tasks(http, system.url(name, "/metrics"))
        except (OSError, aiohttp.ClientError):  # it is restarting
            continue
        row.update({f"{name}.{k}": v for k, v in counts.items()})
    redis = Redis.from_url(system.redis.url)
    try:
        memory, clients = await redis.info("memory"), await redis.info("clients")
        row["redis.used_mib"] = memory["used_memory"] / 2**20
        row["redis.clients"] = clients["connected_clients"] - 1  # less this one
        keys: Counter[str] = Counter()
        async for key in redis.scan_iter(count=1000):
            keys[key_prefix(key)] += 1
        row["redis.keys"] = dict(keys)
        row["redis.cache_bytes"] = int(await redis.get(CACHE_TOTAL) or 0)
    except (RedisError, OSError) as exc:  # Redis restarting (a fault): no Redis row
        row["redis.error"] = type(exc).__name__
    finally:
        await redis.aclose()
    row["archive.mib"] = sum(p.stat().st_size for p in system.archive.rglob("*") if p.is_file()) / 2**20
    return row


def slope(samples: list[dict[str, Any]], name: str, per: Callable[[dict[str, Any]], float]) -> float:
    """Least-squares slope of ``name`` against ``per(sample)`` over the samples that have it."""
    points = [(per(s), float(s[name])) for s in samples if name in s]
    if len(points) < 2:
        return float("nan")
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else float("nan")


# -- the return to rest -----------------------------------------------------------------------


def at_rest(base: dict[str, Any], now: dict[str, Any], kept: int, base_kept: int, restarts: int = 0) -> list[str]:
    """What is not back to the warm-up's counts (nothing: at rest)."""
    problems = []
    for name in [k for k in base if "." in k and k.split(".")[1] in SLACK]:
        allowed = base[name] + SLACK[name.split(".")[1]]
        if name not in now or now[name] > allowed:
            problems.append(f"{name}: {now.get(name)} at rest, {base[name]} after the warm-up")
    if now.get("redis.clients", 1e9) > base.get("redis.clients", 0) + REDIS_CLIENTS_SLACK:
        problems.append(f"redis clients: {now.get('redis.clients')} at rest, {base.get('redis.clients')} after the warm-up")
    grown = max(0, kept - base_kept)
    if now.get("redis.cache_bytes", 0) > CACHE_BUDGET:
        problems.append(f"the chunk cache holds {now['redis.cache_bytes']} bytes, over its budget {CACHE_BUDGET}")
    for prefix, count in now.get("redis.keys", {}).items():
        if prefix in CACHE_PREFIXES:
            continue  # bounded by bytes (above)
        before = base.get("redis.keys", {}).get(prefix, 0)
        allowed = (KEYS_PER_CAST * grown if prefix in CAST_PREFIXES else 0) + SINGLETON_KEYS
        allowed += restarts if prefix == WAKE_PREFIX else 0
        if count - before > allowed:
            problems.append(f"redis keys {prefix}/: {before} -> {count} for {grown} more casts kept")
    return problems


async def settle(system: System, http: aiohttp.ClientSession, base: dict[str, Any], tally: Tally,
                 base_kept: int) -> tuple[dict[str, Any], list[str]]:
    """Sample until the system is back at rest (or SETTLE_S has passed); the last sample and
    what is still not at rest."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        now = await sample(system, http)
        problems = at_rest(base, now, tally.kept_casts, base_kept, system.restarts)
        if not problems or time.monotonic() > deadline:
            return now, problems
        await asyncio.sleep(SETTLE_POLL_S)


async def idle(system: System, http: aiohttp.ClientSession) -> dict[str, Any]:
    """A sample once the loops' tasks stop falling (the warm-up's stragglers ended)."""
    last = await sample(system, http)
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        await asyncio.sleep(SETTLE_POLL_S * 4)
        now = await sample(system, http)
        if all(now.get(f"{s}.tasks") == last.get(f"{s}.tasks") for s in system.services):
            return now
        last = now
    return last


# -- faults ----------------------------------------------------------------------------------


async def fault(k: int, system: System, http: aiohttp.ClientSession, slow: Client) -> str:
    kind = k % 3
    if kind == 0:
        worker = system.services["synth"]
        worker.send(signal.SIGKILL)
        await worker.exit()
        worker.start()
        system.restarts += 1
        await system.ready()
        return "worker killed with -9 and started again"
    if kind == 1:
        system.redis.kill9()
        system.redis.restart()
        return "redis killed with -9 and started again on its AOF"
    return f"slow client: {await slow.slow_listener(10.0)}"


# -- the run ---------------------------------------------------------------------------------


async def traffic(clients: list[Client], rounds: int | None, until: float | None) -> int:
    """Each client runs rounds in turn, until ``rounds`` each or the monotonic time ``until``."""
    done = 0

    async def one(client: Client) -> None:
        nonlocal done
        k = 0
        while (rounds is None or k < rounds) and (until is None or time.monotonic() < until):
            await client.round(k)
            k += 1
            done += 1

    await asyncio.gather(*(one(c) for c in clients))
    return done


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        system = System(Path(tmp))
        tally = Tally()
        async with aiohttp.ClientSession() as http:
            await system.start()
            async with http.get(system.url("intake", "/api/voices")) as r:
                global VOICE
                VOICE = (await r.json())["default"]
            clients = [Client(system, n, tally) for n in range(args.clients)]
            try:
                return await soak(args, system, http, clients, tally)
            finally:
                for client in clients:
                    await client.close()
                await system.close()


async def soak(args: argparse.Namespace, system: System, http: aiohttp.ClientSession, clients: list[Client],
               tally: Tally) -> int:
    await traffic(clients, 1, None)  # the warm-up: every kind once, each client
    base = await idle(system, http)
    base_kept, base_casts = tally.kept_casts, tally.casts
    print(f"warm-up: {tally.casts} casts; at rest: {json.dumps(rest_view(base))}")
    samples = [dict(base, casts=0)]
    faults: list[str] = []
    started = time.monotonic()
    until = None if args.quick else started + args.minutes * 60
    running = asyncio.ensure_future(traffic(clients, args.rounds if args.quick else None, until))
    next_fault = started + args.fault_every
    k = 0
    while not running.done():
        await asyncio.wait([running], timeout=args.every)
        row = await sample(system, http)
        row["casts"] = tally.casts - base_casts
        samples.append(row)
        if not args.quick and time.monotonic() >= next_fault and not running.done():
            faults.append(await fault(k, system, http, clients[0]))
            print(f"fault {k + 1}: {faults[-1]}", flush=True)
            k += 1
            next_fault = time.monotonic() + args.fault_every
        print(f"{(time.monotonic() - started) / 60:5.1f} min, {row['casts']} casts: "
              f"{json.dumps(rest_view(row))}", flush=True)
    rounds = await running
    await system.ready()  # after a fault's restart: ready before the rest is read
    rest, problems = await settle(system, http, base, tally, base_kept)
    report(samples, base, rest, tally, rounds, faults, problems, time.monotonic() - started)
    grown = [p for p, n in rest.get("redis.keys", {}).items() if n > base.get("redis.keys", {}).get(p, 0)]
    print(f"keys of the prefixes that grew: {json.dumps(await key_examples(system.redis.url, grown), indent=1)}")
    if not args.quick:  # the CI run leaves the tree as it was
        write_results(RESULTS / "soak.json", {"machine": machine(), "args": vars(args), "samples": samples,
                                              "rest": rest, "outcomes": dict(tally.outcomes), "faults": faults,
                                              "problems": problems})
    return 1 if problems else 0


def rest_view(row: dict[str, Any]) -> dict[str, Any]:
    """The counts of a sample, rounded, for a line of the log."""
    return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items() if k not in ("t",)}


def report(samples: list[dict[str, Any]], base: dict[str, Any], rest: dict[str, Any], tally: Tally, rounds: int,
           faults: list[str], problems: list[str], took_s: float) -> None:
    print(f"\n{rounds} rounds, {tally.casts} casts in {took_s / 60:.1f} min; {len(faults)} faults")
    print("outcomes: " + ", ".join(f"{k}: {n}" for k, n in sorted(tally.outcomes.items())))
    under = samples[len(samples) // 2:]  # after the warm-up's effects: the second half
    print(f"\n{'series':<22} {'warm-up':>9} {'peak':>9} {'at rest':>9} {'per hour':>10} {'per 1k casts':>13}")
    names = sorted({k for s in samples for k, v in s.items() if isinstance(v, (int, float)) and k not in ("t", "casts")})
    for name in names:
        per_h = slope(under, name, lambda s: s["t"] / 3600)
        per_k = slope(under, name, lambda s: s["casts"] / 1000)
        peak = max(float(s[name]) for s in samples if name in s)
        print(f"{name:<22} {base.get(name, float('nan')):>9.1f} {peak:>9.1f} {rest.get(name, float('nan')):>9.1f} "
              f"{per_h:>10.2f} {per_k:>13.2f}")
    print(f"\nredis keys by prefix, warm-up -> at rest: {base.get('redis.keys')} -> {rest.get('redis.keys')}")
    print(f"casts kept {tally.kept_casts}, deleted by the admin {len(tally.deleted)}")
    print(f"return to rest: {'violations: ' + '; '.join(problems) if problems else 'ok'}")


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="a bounded count of rounds, no faults (CI)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per client with --quick")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=20.0, help="how long the traffic runs (not --quick)")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--fault-every", type=float, default=120.0, help="seconds between faults (not --quick)")
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
