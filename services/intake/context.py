"""What every handler needs, in one typed object under one app key (set up in ``app.py``).

The claim side's pieces come first; the speech room's (``speech/``) are typed here with castlog's
and asyncio's types only, so that this module never imports that room."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web
from redis.asyncio import Redis

import servicekit
from castlog import CastStore, LiveStore, LogReader, RateLimiter
from castlog.slots import Seat, SeatLimiter
from durablestreams.streams import DurableStreams
from fanout import Tail
from servicekit import ClientHolds, Hold

from .config import Config
from .limits import AuthFailures, Cooldowns, DurableQuota, InflightGate
from .metrics import Metrics
from .plan import Planner
from .voices import VoiceBook


class LiveSession(Protocol):
    """A live session (``speech.livews.Session``, ``speech.speak.SpeakSession``, which read this
    module: a Protocol here keeps the import one-way) as its socket and a stop see it."""

    keep: bool  # the cast goes on when the session ends (a stop sets it)
    waiting: Hold  # its place among the client's connections that have sent nothing yet
    seat: Seat | None  # the client's session seat, once it has one

    async def run(self) -> None: ...

    async def end_text(self) -> None: ...

    async def close(self, code: int) -> None: ...


@dataclass
class Intake:
    cfg: Config
    metrics: Metrics
    redis: Redis  # the shared pool: submits, live text, voices, probes
    store: CastStore
    live: LiveStore  # open casts' text logs
    limiter: RateLimiter
    cooldowns: Cooldowns  # clients just refused, refused again before their body is read
    voices: VoiceBook
    gate: InflightGate
    planner: Planner
    # The speech room's: the cast logs by offset (archived ones read from the archive), the shared
    # tail every `/v1/audio/speech` stream and live session follows them through (one blocked
    # read per process), the bound on open streams and the streams open (cancelled at shutdown)
    reader: LogReader
    tail: Tail
    speech_permits: asyncio.Semaphore
    speech_streams: set[asyncio.Task[object]]
    live_sessions: set[LiveSession]  # the live WebSocket's (ended at shutdown)
    durable: DurableStreams  # /v1/stream's writes
    ds_quota: DurableQuota | None  # their share per client while no API key is asked for
    text_limiter: RateLimiter  # live text's characters per client (#21)
    session_seats: SeatLimiter  # live sessions per client, once started (leased in Redis)
    speech_seats: SeatLimiter  # /v1/audio/speech streams per client
    auth_failures: AuthFailures  # refused credentials per client
    # connections per client before their first message, live WebSocket, WebRTC and /v1/speak (this process)
    session_waiting: ClientHolds
    webrtc_ports: ClientHolds  # WebRTC media ports per client (WEBRTC_PORTS_PER_CLIENT)
    # voice blends this process has claimed casts with, by tenant (claim.request_tag), newest last
    # (GET /v1/audio/voices lists a tenant's own)
    blends: dict[str, dict[str, None]] = field(default_factory=dict)


INTAKE = web.AppKey("intake", Intake)
CONFIG = web.AppKey("config", Config)
METRICS = web.AppKey("metrics", Metrics)


def request_client(request: web.Request) -> str:
    """The request's client, the key its per-client limits count under: its address, or the last
    hop a proxy of FORWARDED_ALLOW_IPS put in X-Forwarded-For (servicekit.request_client)."""
    return servicekit.request_client(request, request.app[INTAKE].cfg.forwarded_allow_ips)
