"""The second hostile-client campaign's attacks on `streamtts up`'s front proxy (#35 items 5, 6,
the proxy's half of 2, and the low ones), for bench_abuse.py: the proxy (``streamtts.proxy``
behind ``streamtts.doorway``) is served in this process in front of the campaign's intake and
edge processes, as the launcher serves it, with its timeouts short enough to wait out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import aiohttp

from castlog.keys import id_order
from durablestreams.streams import entry_of, offset_of
from streamtts import doorway
from streamtts.config import Config as UpConfig
from streamtts.proxy import RELAY_HOLDS, RELAYS, SERVER_NAME, UPLOADS, Limits, Upstreams, create_app, runner
from streamtts.redisserver import free_port

from abuse_probe import ANSWER_WAIT_S, LIVE, MIB, WELL_BEHAVED, Attack, Outcome, Stack, client, probe, until, ws_url

# The front proxy's bounds here: `up`'s defaults, but timeouts short enough to wait out and a
# connection cap small enough to reach.
PROXY_SETTINGS = dataclasses.replace(UpConfig(), proxy_header_timeout_s=0.5, proxy_write_timeout_s=0.5,
                                     proxy_heartbeat_s=0.5, proxy_connections_per_client=16)
# The stream the unread relays follow: more than the kernel's buffers on both sides hold.
UNREAD_STREAM_MIB = 8
PROXY_LIMITS = Limits(PROXY_SETTINGS, max_body_bytes=MIB, body_timeout_s=5.0, max_message_bytes=64 * 1024)


# ---- the front proxy (#35 items 5, 6, 2's proxy half, the low ones) --------------------------------

@asynccontextmanager
async def front_proxy(s: Stack) -> AsyncIterator[None]:
    """`streamtts up`'s proxy, served as the launcher serves it, in front of intake and edge."""
    app = create_app(s.redis, Upstreams(s.intake, s.edge), PROXY_LIMITS)
    app_runner = runner(app)
    await app_runner.setup()
    port = free_port()
    s.serving = await doorway.serve(app_runner, "127.0.0.1", port, PROXY_SETTINGS.proxy_header_timeout_s,
                                    PROXY_SETTINGS.proxy_connections_per_client)
    s.door, s.proxy = f"http://127.0.0.1:{port}", app
    try:
        yield
    finally:
        await s.serving.close()



async def unread_relays(s: Stack) -> Outcome:
    """5: relays of a stream whose client never reads pinned ~10 MiB of kernel memory each."""
    stream = f"{s.door}/v1/stream/unread/big"
    owner = s.address()
    async with client(owner) as http:
        async with http.put(stream, headers={"Content-Type": "text/plain"}) as r:
            assert r.status == 201, await r.text()
        for _ in range(UNREAD_STREAM_MIB):
            async with http.post(stream, headers={"Content-Type": "text/plain"}, data=b"x" * MIB) as r:
                assert r.status in (200, 204), await r.text()
    port = int(s.door.rsplit(":", 1)[1])
    stuck = []
    for _ in range(s.size(16, 4)):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((owner, 0))
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /v1/stream/unread/big?offset=-1&live=sse HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        stuck.append(sock)  # and never read
    begun = await until(lambda: all(answered(sock) for sock in stuck))  # each relay began
    victim = await probe(s.door)
    freed = await until(lambda: not s.proxy[RELAYS] and not s.proxy[RELAY_HOLDS].held.get(owner))
    ends = [await asyncio.to_thread(drained, sock) for sock in stuck] if begun else []
    cut, refused = ends.count("cut"), ends.count("refused")  # refused: past edge's EDGE_MAX_STREAMS_PER_CLIENT
    return Outcome("5 the proxy keeps unread relays", bool(ends) and "kept" not in ends and freed,
                   f"{len(stuck)} unread SSE relays of an {UNREAD_STREAM_MIB} MiB stream: {cut} cut mid-stream, "
                   f"{refused} refused by edge, {ends.count('kept')} kept; slots {'all freed' if freed else 'still held'}",
                   victim)


def answered(sock: socket.socket) -> bool:
    """Whether the proxy's answer has begun to arrive (looked at, not read)."""
    try:
        return sock.recv(12, socket.MSG_PEEK | socket.MSG_DONTWAIT).startswith(b"HTTP/1.1 ")
    except BlockingIOError:
        return False


def drained(sock: socket.socket) -> str:
    """What a relay that was not read gave once read: "cut" when it began (200) and was ended
    (reset or closed) before the stream's end; "refused" when it was answered otherwise; "kept"
    when it went on streaming."""
    sock.settimeout(10)
    head, total = b"", 0
    try:
        while chunk := sock.recv(1 << 20):
            head, total = head or chunk[:12], total + len(chunk)
        ended = True
    except ConnectionResetError:
        ended = True
    except OSError:  # nothing for 10 s: the relay is still open, waiting for more of the stream
        ended = False
    finally:
        sock.close()
    if not head.startswith(b"HTTP/1.1 200"):
        return "refused" if head.startswith(b"HTTP/1.1 4") else "kept"
    return "cut" if ended and total < UNREAD_STREAM_MIB * MIB else "kept"


async def slow_loris(s: Stack) -> Outcome:
    """6a: header trickles held (300, 0 closed), with keep-alive of an hour and no connection cap."""
    assert s.serving is not None
    address, cap = s.address(), PROXY_SETTINGS.proxy_connections_per_client
    opened = [await asyncio.open_connection("127.0.0.1", int(s.door.rsplit(":", 1)[1]), local_addr=(address, 0))
              for _ in range(cap + s.size(16, 4))]
    for _, writer in opened:
        writer.write(b"GET /api/voices HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")  # a head that never ends
    victim = await probe(s.door)
    answers = []
    for reader, writer in opened:
        head = await asyncio.wait_for(reader.read(), ANSWER_WAIT_S)
        answers.append(head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/1.1") else "closed")
        writer.close()
    door = s.serving.door
    emptied = await until(lambda: not door.connections.held.get(address))
    return Outcome("6 slow-loris on the proxy", answers.count("408") == cap and answers.count("429") == len(opened) - cap
                   and emptied,
                   f"{len(opened)} trickling connections: {answers.count('408')} answered 408, "
                   f"{answers.count('429')} refused 429 (cap {cap}), 0 left open", victim)


async def upload_slots(s: Stack) -> Outcome:
    """6b: eight addresses trickling eight bodies each took all 64 upload slots."""
    port = int(s.door.rsplit(":", 1)[1])
    head = b"POST /api/casts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    uploads = s.proxy[UPLOADS]
    trickling = []
    for address in [s.address() for _ in range(8)]:
        for _ in range(PROXY_SETTINGS.uploads_per_client):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
            writer.write(head)  # 1 byte of 100, then nothing
            trickling.append((reader, writer))
    await until(lambda: sum(uploads.held.values()) >= uploads.total // 2)
    held = dict(uploads.held)
    async with client(WELL_BEHAVED) as http:
        async with http.post(f"{s.door}/api/casts", json={"text": f"A body of mine at {time.time()}."}) as r:
            posted = r.status
    victim = await probe(s.door)
    refused = 0
    for reader, writer in trickling:
        with suppress(asyncio.TimeoutError):
            refused += b" 429 " in (await asyncio.wait_for(reader.read(200), 0.05)).split(b"\r\n")[0]
        writer.close()
    taken = sum(held.values())
    return Outcome("6 upload slots hoarded", taken < uploads.total and posted in (200, 201) and refused > 0,
                   f"8 addresses x {PROXY_SETTINGS.uploads_per_client} bodies held {taken} of {uploads.total} slots "
                   f"(at most {max(held.values(), default=0)} each), {refused} refused 429; another's POST {posted}",
                   victim if posted in (200, 201) else None)


async def socket_messages(s: Stack) -> Outcome:
    """6c: 4 MiB WebSocket messages were relayed (intake takes 64 KiB); 2: the proxy answered
    intake's pings for a dead client, so its session was held."""
    closes = []
    async with client(s.address()) as http:
        for _ in range(s.size(20, 4)):
            async with http.ws_connect(ws_url(s.door, LIVE), max_msg_size=0) as ws:
                with suppress(ConnectionError):  # the proxy may close before the whole message is sent
                    await ws.send_str("x" * (4 * MIB))
                await asyncio.wait_for(ws.receive(), ANSWER_WAIT_S)
                closes.append(ws.close_code)
        dead = await http.ws_connect(ws_url(s.door, LIVE), autoping=False)  # never answers a ping
        await dead.send_json({"type": "start"})
        ended = None
        for _ in range(100):
            msg = await dead.receive(timeout=ANSWER_WAIT_S)
            if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                ended = dead.close_code
                break
        await dead.close()
    relays_left = await until(lambda: not s.proxy[RELAYS])
    victim = await probe(s.door)
    return Outcome("6 oversized WebSocket messages; a dead client through the proxy",
                   all(c in (1009, 1006) for c in closes) and ended is not None and relays_left,
                   f"{len(closes)} 4 MiB messages: sockets closed {sorted({int(c) for c in closes if c is not None})}; a client that answers no "
                   f"ping closed ({ended})", victim)


async def low_ones(s: Stack) -> Outcome:
    """The low ones: the Server header, /metrics through the proxy, X-Forwarded-Host, an offset past the tail."""
    async with client(s.address()) as http:
        async with http.get(f"{s.door}/api/voices") as r:
            server = r.headers.get("Server")
        async with http.get(f"{s.door}/metrics") as r:
            metrics = r.status
        async with http.put(f"{s.door}/v1/stream/low/where", headers={"Content-Type": "text/plain",
                            "X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}, data=b"x") as r:
            location, tail = r.headers.get("Location", ""), r.headers.get("Stream-Next-Offset", "")
        beyond = offset_of(f"{id_order(entry_of(tail) or '0-0')[0] + 1}-0")  # an entry not yet written
        async with http.get(f"{s.door}/v1/stream/low/where", params={"offset": beyond}) as r:
            past = r.status
    victim = await probe(s.door)
    return Outcome("low: Server, /metrics, X-Forwarded-Host, offset past the tail",
                   server == SERVER_NAME and metrics == 404 and "evil.example" not in location and past == 400,
                   f"Server {server!r}; /metrics {metrics}; Location {location!r}; an offset past the tail {past}",
                   victim)


THROUGH_PROXY: list[Attack] = [unread_relays, slow_loris, upload_slots, socket_messages, low_ones]
