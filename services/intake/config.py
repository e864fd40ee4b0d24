"""Intake's settings: a frozen struct read once from the environment (the only reader of it).

Each field declares its variable, default and bounds on one line (``servicekit.settings``); the
README's settings table is generated from these lines (``scripts/settings_doc.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from blobstore import StoreConfig
from castlog.rowcache import ROW_CACHE_BYTES
from servicekit.connect import CONNECT_ATTEMPTS
from servicekit.crosssite import ALLOWED_HOSTS, ALLOWED_ORIGINS
from servicekit.settings import (
    ADMIN_TOKEN,
    API_KEYS,
    CONTENT_KEY,
    FORWARDED_ALLOW_IPS,
    REDIS_URL,
    Settings,
    networks,
    setting,
)


def port_range(raw: str) -> tuple[int, int]:
    """``first-last`` (or one port) -> (first, last), within 1..65535."""
    first, _, last = raw.partition("-")
    ports = (int(first), int(last or first))
    if not 0 < ports[0] <= ports[1] < 65536:
        raise ValueError("want first-last, 1 <= first <= last <= 65535")
    return ports


# How long the planning of one text may take. The longest text allowed plans in well under a
# tenth of this, its worst case included (the splitter is linear): the budget is there for a
# regression or a starved host, so that a submit never waits on planning without end.
PLAN_BUDGET_S = 5.0


@dataclass(frozen=True)
class Config(Settings):
    host: str = setting("INTAKE_HOST", "127.0.0.1", doc="where it listens (containers set `0.0.0.0`)")
    port: int = setting("INTAKE_PORT", 8081, ge=0, doc="its port")
    socket: str = setting("INTAKE_SOCKET", "", shown="unset", doc="listen on this Unix socket instead of "
                          "`INTAKE_HOST`:`INTAKE_PORT` (`streamtts up`: in a folder only its user may open)")
    redis_url: str = REDIS_URL.field()
    redis_connect_attempts: int = setting("INTAKE_REDIS_CONNECT_ATTEMPTS", CONNECT_ATTEMPTS, gt=0,
                                          doc="connection attempts at start-up, with backoff")
    max_chars: int = setting("INTAKE_MAX_CHARS", 100_000, gt=0,
                             doc="longest text, in characters after normalisation (413 beyond)")
    # A maximal text pasted as CJK into a form is 3 UTF-8 bytes x 3 for percent-encoding = 9 bytes per
    # character: 1 MiB leaves room for that and still stops a runaway upload early.
    max_body_bytes: int = setting("INTAKE_MAX_BODY_BYTES", 1024 * 1024, gt=0, doc="largest request body (413 "
                                  "beyond); `streamtts up`'s front proxy takes as much")
    body_timeout_s: float = setting("INTAKE_BODY_TIMEOUT_S", 10.0, gt=0, doc="how long a request body may take "
                                    "to arrive (408 beyond; the permit it holds is freed)")
    plan_budget_s: float = setting("INTAKE_PLAN_BUDGET_S", PLAN_BUDGET_S, gt=0, doc="how long planning one text "
                                   "(in a worker thread) may take (422 beyond)")
    max_title_chars: int = setting("INTAKE_MAX_TITLE_CHARS", 200, gt=0, doc="longest title (422 beyond)")
    # A cast costs GPU minutes: one per second sustained per client, 30 at once.
    rate: float = setting("INTAKE_RATE", 1.0, gt=0, doc="submissions per second sustained, per client (429 beyond)")
    burst: int = setting("INTAKE_BURST", 30, gt=0, doc="submissions at once, per client (429 beyond)")
    forwarded_allow_ips: frozenset[str] = FORWARDED_ALLOW_IPS.field()
    allowed_hosts: frozenset[str] = ALLOWED_HOSTS.field()
    content_key: str = CONTENT_KEY.field()
    allowed_origins: frozenset[str] = ALLOWED_ORIGINS.field()
    default_voice: str = setting("INTAKE_DEFAULT_VOICE", "", doc="the default voice when a worker has published "
                                 "it; else the workers' published default. Intake accepts only voices a worker has "
                                 "published to `synth/voices`: before any list, a submit is answered 503 "
                                 "`warming_up` with `Retry-After`; after one, the last list stands even while every "
                                 "worker is down")
    voices_refresh_s: float = setting("INTAKE_VOICES_REFRESH_S", 5.0, ge=0, doc="how long the published voice list "
                                      "is trusted before it is read again")
    wait_replicas: int = setting("INTAKE_WAIT_REPLICAS", 0, ge=0, doc="a submit (an open cast's too) is answered "
                                 "201/200 only once its writes reached this many Redis replicas (WAIT); 0: no wait "
                                 "(a single Redis)")
    wait_timeout_ms: int = setting("INTAKE_WAIT_TIMEOUT_MS", 1000, gt=0, doc="how long a submit waits for "
                                   "`INTAKE_WAIT_REPLICAS` (503 beyond; the write stands, a retry is idempotent)")
    # Each submit in flight holds one pooled connection; past both bounds intake sheds load instead of queueing.
    max_inflight: int = setting("INTAKE_MAX_INFLIGHT", 64, gt=0, doc="submits using Redis at once")
    max_waiting: int = setting("INTAKE_MAX_WAITING", 1024, ge=0,
                               doc="submits that may wait for a turn; beyond both, 503")
    shutdown_timeout_s: float = setting("INTAKE_SHUTDOWN_TIMEOUT_S", 10.0, ge=0,
                                        doc="how long a stop waits for requests in flight")
    # The live WebSocket: each session holds one Redis connection for its audio.
    live_max_sessions: int = setting("INTAKE_LIVE_MAX_SESSIONS", 256, gt=0, doc="live sessions at once, "
                                     "WebSocket and WebRTC together (each holds one Redis connection)")
    live_sessions_per_client: int = setting("INTAKE_LIVE_SESSIONS_PER_CLIENT", 4, gt=0, doc="live sessions "
                                            "(WebSocket, WebRTC, `/v1/speak`) one client may hold once started, across replicas (code 4503 "
                                            "`too_many_sessions` beyond)")
    sessions_waiting_per_client: int = setting("INTAKE_SESSIONS_WAITING_PER_CLIENT", 4, gt=0, doc="connections "
                                               "one client may hold before its first message: live WebSockets, WebRTC "
                                               "offers, `/v1/speak` sockets and Wyoming connections together; they "
                                               "hold no session until it comes (`busy` beyond)")
    live_idle_s: float = setting("INTAKE_LIVE_IDLE_S", 60.0, gt=0, doc="a live session whose text is open "
                                 "closes after this long without a client message (code 4408)")
    live_ping_s: float = setting("INTAKE_LIVE_PING_S", 20.0, gt=0, doc="WebSocket ping interval of a live "
                                 "session; no pong in time closes it")
    live_send_timeout_s: float = setting("INTAKE_LIVE_SEND_TIMEOUT_S", 10.0, gt=0, doc="a live client that "
                                         "takes no frame for this long is cut off (code 4429, with the `seq_num` "
                                         "to resume listening from)")
    live_max_open_per_client: int = setting("INTAKE_LIVE_MAX_OPEN_PER_CLIENT", 4, gt=0, doc="open casts "
                                            "(text not closed yet) one client may hold at once (429 beyond)")
    # About a fast voice agent's pace (25 tokens/s), and many minutes of speech per minute.
    live_chars_per_min: int = setting("INTAKE_LIVE_CHARS_PER_MIN", 6000, gt=0, doc="live text characters per "
                                      "minute per client, sustained and at once (a flush or close costs "
                                      "50; 429 `rate_limited` beyond)")
    live_max_message_bytes: int = setting("INTAKE_LIVE_MAX_MESSAGE_BYTES", 64 * 1024, gt=0,
                                          doc="the largest message a live client may send")
    # WebRTC (`POST /v1/audio/speech/webrtc`): live sessions whose audio is Opus on a peer connection.
    webrtc_udp_ports: tuple[int, int] = setting("WEBRTC_UDP_PORTS", (40000, 40100), parse=port_range,
                                                shown="40000-40100", doc="the UDP ports (`first-last`) media "
                                                "may use, one per session and host address: open and publish "
                                                "these (503 `busy` when none is free)")
    webrtc_public_ip: str = setting("WEBRTC_PUBLIC_IP", "", fallback="WEBRTC_NODE_IP", doc="the address clients reach the UDP ports at "
                                    "when intake is behind NAT (a container, a cloud host): offered as a "
                                    "candidate beside the host's own (k3s sets the fallback to the node's)")
    webrtc_ice_servers: tuple[str, ...] = setting("WEBRTC_ICE_SERVERS", (), shown="none (a LAN needs none)",
                                                  doc="comma-separated `stun:` / `turn:` URLs intake gathers "
                                                  "candidates with (one of each kind is used)")
    webrtc_turn_username: str = setting("WEBRTC_TURN_USERNAME", "", doc="the TURN server's username")
    webrtc_turn_password: str | None = setting("WEBRTC_TURN_PASSWORD", None, secret=True,
                                               doc="the TURN server's password")
    webrtc_max_offer_bytes: int = setting("WEBRTC_MAX_OFFER_BYTES", 32 * 1024, gt=0,
                                          doc="the largest SDP offer (413 beyond)")
    # A LAN or TURN peer opens its channel within seconds (a loaded CPU host takes longer); an offer that never connects holds
    # its ports only this long (#35: never-connected offers from many addresses held the whole range).
    webrtc_connect_timeout_s: float = setting("WEBRTC_CONNECT_TIMEOUT_S", 15.0, gt=0, doc="a peer whose "
                                              "`control` data channel has not opened by then is dropped "
                                              "(its media ports freed)")
    # A client's 4 waiting offers and 4 started sessions (their caps): one client never holds the range.
    webrtc_ports_per_client: int = setting("WEBRTC_PORTS_PER_CLIENT", 8, gt=0, doc="media ports of "
                                           "WEBRTC_UDP_PORTS (on each host address) one client's peer "
                                           "connections may hold at once, answered or started, one per "
                                           "session (429 `too_many_sessions` beyond)")
    webrtc_buffer_ms: int = setting("WEBRTC_BUFFER_MS", 1000, gt=0, doc="audio queued on a session's track "
                                    "before the next sentence waits for it to play")
    log_level: str = setting("INTAKE_LOG_LEVEL", "INFO", parse=str.upper, doc="log level")
    admin_token: str | None = ADMIN_TOKEN.field()
    # A worker carries the delete out (castlog.deletes): a few of its polls at most, when one runs.
    delete_wait_s: float = setting("INTAKE_DELETE_WAIT_S", 5.0, gt=0, doc="how long `DELETE /api/casts/{id}` waits "
                                   "for a worker to delete the cast (200) before it answers 202 (asked, not done yet)")
    max_speech_streams: int = setting("INTAKE_MAX_SPEECH_STREAMS", 64, gt=0, doc="`POST /v1/audio/speech` "
                                      "responses streaming at once (429 beyond)")
    # N streams replaying one log read it from Redis about once, and decode it and build its JSON and
    # frames once (castlog.RowCache).
    row_cache_bytes: int = setting("INTAKE_ROW_CACHE_BYTES", ROW_CACHE_BYTES, gt=0, doc="bytes of log records "
                                   "kept for speech streams and live sessions catching up (their rows, bodies "
                                   "included, and what was built from them)")
    speech_streams_per_client: int = setting("INTAKE_SPEECH_STREAMS_PER_CLIENT", 4, gt=0, doc="`POST "
                                             "/v1/audio/speech` responses one client may have streaming at once, "
                                             "across replicas (429 beyond)")
    speech_write_timeout_s: float = setting("INTAKE_SPEECH_WRITE_TIMEOUT_S", 30.0, gt=0, doc="a speech client "
                                            "that takes no bytes this long is closed (the cast goes on)")
    auth_failures_per_min: int = setting("INTAKE_AUTH_FAILURES_PER_MIN", 10, gt=0, doc="refused credentials "
                                         "(API key, write token, admin token) per minute per client, sustained and "
                                         "at once; beyond, 429 `too_many_failures` before any is compared")
    api_keys: frozenset[str] = API_KEYS.field()
    ds_max_stream_bytes: int = setting("INTAKE_DS_MAX_STREAM_BYTES", 64 * 1024 * 1024, gt=0, doc="bytes one "
                                       "durable stream (`/v1/stream/*`) may hold; an append past it is refused (413)")
    # With no keys anyone may write /v1/stream: a client's share of Redis, refilled over an hour.
    ds_streams_per_client: int = setting("INTAKE_DS_STREAMS_PER_CLIENT", 100, gt=0, doc="durable streams "
                                         "(`/v1/stream/*`) one client may create per hour, all at once at most, "
                                         "while `STREAMTTS_API_KEYS` is unset (429 `streams_quota` beyond)")
    ds_bytes_per_client: int = setting("INTAKE_DS_BYTES_PER_CLIENT", 64 * 1024 * 1024, gt=0, doc="bytes one "
                                       "client may write to durable streams per hour (creates and appends), all "
                                       "at once at most, while `STREAMTTS_API_KEYS` is unset (413 `bytes_quota` "
                                       "beyond)")
    wyoming_port: int = setting("INTAKE_WYOMING_PORT", 0, ge=0, doc="the Wyoming server's port "
                                "(Home Assistant; 10210 by custom); 0: none")
    wyoming_host: str = setting("INTAKE_WYOMING_HOST", "", shown="intake's host", doc="where the "
                                "Wyoming server listens (`streamtts up` gives it `--host`)")
    # The Wyoming port (speech/wyomingserver.py): every length a client declares is bounded before it is read.
    wyoming_max_header_bytes: int = setting("INTAKE_WYOMING_MAX_HEADER_BYTES", 16 * 1024, gt=0, doc="the "
                                            "longest header line of a Wyoming event (the client is cut off beyond)")
    wyoming_max_data_bytes: int = setting("INTAKE_WYOMING_MAX_DATA_BYTES", 1024 * 1024, ge=0, doc="the largest "
                                          "`data_length` a Wyoming event may declare (a text to speak)")
    wyoming_max_payload_bytes: int = setting("INTAKE_WYOMING_MAX_PAYLOAD_BYTES", 64 * 1024, ge=0, doc="the "
                                             "largest `payload_length` a Wyoming event may declare (a TTS request "
                                             "has none; one within it is read and dropped)")
    wyoming_idle_s: float = setting("INTAKE_WYOMING_IDLE_S", 60.0, gt=0, doc="a Wyoming connection that sends "
                                    "no request this long is closed (junk, unknown events and a frame trickled "
                                    "in do not count; a cast it was feeding is cut short)")
    wyoming_write_timeout_s: float = setting("INTAKE_WYOMING_WRITE_TIMEOUT_S", 30.0, gt=0, doc="a Wyoming client "
                                             "that takes no bytes this long is cut off (a cast it was hearing is "
                                             "cut short)")
    wyoming_max_connections: int = setting("INTAKE_WYOMING_MAX_CONNECTIONS", 64, gt=0, doc="Wyoming "
                                           "connections at once per process (`busy` beyond)")
    wyoming_connections_per_client: int = setting("INTAKE_WYOMING_CONNECTIONS_PER_CLIENT", 4, gt=0, doc="Wyoming "
                                                  "connections at once from one client address (`busy` beyond)")
    wyoming_allow_from: frozenset[str] = setting("INTAKE_WYOMING_ALLOW_FROM", frozenset({"127.0.0.1", "::1"}),
                                                 parse=networks, doc="addresses or networks (CIDR) that may use the Wyoming port "
                                                 "without a key when `STREAMTTS_API_KEYS` is set (Home Assistant "
                                                 "sends none); any other client puts a key in its first "
                                                 "event's data as `api_key` (`none`: every client does)")
    # ARCHIVE_URL and friends, as edge's: a repeat of an archived cast reads its audio there
    archive: StoreConfig | None = None
