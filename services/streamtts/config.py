"""The ``streamtts`` command's settings, and the environment ``up`` hands the services it starts:
the only module of this package that reads ``os.environ``. The services' own settings are
declared in their ``config.py``; the command reads the few it needs through those declarations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from servicekit.settings import Settings, setting


@dataclass(frozen=True)
class Config(Settings):
    port: int = setting("STREAMTTS_PORT", 8080, gt=0,
                        doc="`streamtts up` only: the origin's port when `--port` is not given")
    state_dir: str = setting("STREAMTTS_STATE_DIR", ".state", doc="`streamtts up` only: the embedded Redis's "
                             "AOF, synth's model cache and the archive (`archive/`)")
    wyoming_port: int = setting("STREAMTTS_WYOMING_PORT", 10210, ge=0, doc="`streamtts up` only: the Wyoming "
                                "server's port (Home Assistant) when `--wyoming-port` is not given; 0: none")
    # The local front proxy's bounds (docs/security.md, "What each front door bounds").
    uploads_per_client: int = setting("STREAMTTS_UPLOADS_PER_CLIENT", 8, gt=0, doc="`streamtts up` only: "
                                      "request bodies the local proxy takes in at once from one client address "
                                      "(of 64 in all; 429 `too_many_uploads` beyond)")
    proxy_connections_per_client: int = setting(
        "STREAMTTS_PROXY_CONNECTIONS_PER_CLIENT", 256, gt=0, doc="`streamtts up` only: open connections the local "
        "proxy keeps from one client address (above its relays: each needs one); one more is answered 429 "
        "`too_many_connections` and closed")
    proxy_relays_per_client: int = setting(
        "STREAMTTS_PROXY_RELAYS_PER_CLIENT", 128, gt=0, doc="`streamtts up` only: requests, streams (SSE, audio, "
        "long polls) and WebSockets the local proxy relays at once for one client address (429 `too_many_relays` "
        "beyond); above the services' own (`EDGE_READ_BURST`), so it refuses only what they would")
    proxy_header_timeout_s: float = setting(
        "STREAMTTS_PROXY_HEADER_TIMEOUT_S", 10.0, gt=0, doc="`streamtts up` only: a new connection's first request "
        "head must arrive whole within this (a slow-loris is closed); later ones within `STREAMTTS_PROXY_IDLE_S`")
    proxy_idle_s: float = setting("STREAMTTS_PROXY_IDLE_S", 60.0, gt=0, doc="`streamtts up` only: a kept-alive "
                                  "connection with no request for this long is closed")
    proxy_write_timeout_s: float = setting(
        "STREAMTTS_PROXY_WRITE_TIMEOUT_S", 30.0, gt=0, doc="`streamtts up` only: a relay (SSE, audio, a WebSocket) "
        "whose client takes none of its bytes for this long is cut, and its buffers freed")
    proxy_heartbeat_s: float = setting(
        "STREAMTTS_PROXY_HEARTBEAT_S", 20.0, gt=0, doc="`streamtts up` only: the local proxy pings each WebSocket "
        "client this often; one that does not answer is closed, and its session upstream with it")
    redis_server: str = setting("STREAMTTS_REDIS_SERVER", "", doc="`streamtts up` only: the state dir's Redis "
                                "server, `embedded` or a path (`--redis-server`); unset: the one that wrote it")
    api_key: str = setting("STREAMTTS_API_KEY", "", secret=True, shown="unset", doc="`streamtts say/follow/"
                           "voices`: the API key they send when `--api-key` is not given")
    url: str = setting("STREAMTTS_URL", "http://127.0.0.1:8080", doc="`streamtts say/follow/voices`: the "
                       "origin they talk to when `--url` is not given")


def environment() -> dict[str, str]:
    """A copy of this process's environment: what ``up`` reads its settings from and hands its children."""
    return dict(os.environ)
