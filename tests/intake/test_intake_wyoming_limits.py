"""The Wyoming port held to its limits, through a real socket: every length a client declares is
bounded before it is read, junk does not keep a connection alive, connections are capped overall
and per client, and with API keys set a client is let in by its address or by a key in its first
event. Clients are told apart by loopback source address (127.0.0.2, .3, ...)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any
from unittest.mock import ANY

import aiohttp
import pytest
from redis.asyncio import Redis

from castlog import JOBS_LIVE
from intake.context import INTAKE
from streamtts.redisserver import free_port

from .conftest import MakeClient

KEY = "k" * 40
STRANGER = "127.0.0.2"  # not in INTAKE_WYOMING_ALLOW_FROM (loopback 127.0.0.1 is)

pytestmark = pytest.mark.rule("wyoming-bounded")


async def _serve(make_client: MakeClient, **changes: Any) -> int:
    port = free_port()
    await make_client(wyoming_port=port, **changes)
    return port


async def _connect(port: int, source: str = "127.0.0.1") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


def _frame(kind: str, data: dict[str, Any] | None = None) -> bytes:
    header: dict[str, Any] = {"type": kind}
    body = json.dumps(data).encode() if data else b""
    if body:
        header["data_length"] = len(body)
    return json.dumps(header).encode() + b"\n" + body


async def _next(reader: asyncio.StreamReader, timeout: float = 10) -> tuple[str, dict[str, Any]] | None:
    """The server's next event (type, data), or None once it has closed the connection."""
    line = await asyncio.wait_for(reader.readline(), timeout)
    if not line:
        return None
    header = json.loads(line)
    data = header.get("data") or {}
    if header.get("data_length"):
        data.update(json.loads(await reader.readexactly(header["data_length"])))
    if header.get("payload_length"):
        await reader.readexactly(header["payload_length"])
    return header["type"], data


async def _refused_with(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, code: str) -> None:
    """An ``error`` event with ``code``, then the server hangs up."""
    try:
        event = await _next(reader)
        assert event is not None and event[0] == "error", event
        assert event[1]["code"] == code, event
        assert await _next(reader) is None, "the server keeps the connection"
    finally:
        writer.close()


@pytest.mark.parametrize("header, code", [
    ({"type": "synthesize", "data_length": 10**12}, "frame_too_large"),
    ({"type": "synthesize", "payload_length": 10**12}, "frame_too_large"),
    ({"type": "synthesize", "data_length": -1}, "bad_frame"),
    ({"type": "synthesize", "data_length": "12"}, "bad_frame"),
    ({"data": {}}, "bad_frame"),
])
async def test_a_declared_length_past_its_limit_is_refused_before_a_byte_of_it_is_read(
    make_client: MakeClient, redis: Redis, header: dict[str, Any], code: str
) -> None:
    port = await _serve(make_client)
    reader, writer = await _connect(port)
    writer.write(json.dumps(header).encode() + b"\n")  # and not one byte of what it declares
    await _refused_with(reader, writer, code)
    assert await redis.xlen(JOBS_LIVE) == 0


async def test_a_header_line_past_its_limit_is_refused_without_waiting_for_its_end(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_max_header_bytes=1024)
    reader, writer = await _connect(port)
    writer.write(b'{"type": "describe", "pad": "' + b"x" * 4096)  # no newline, ever
    await _refused_with(reader, writer, "frame_too_large")


async def test_a_header_that_is_not_json_is_refused(make_client: MakeClient) -> None:
    port = await _serve(make_client)
    reader, writer = await _connect(port)
    writer.write(b"GET / HTTP/1.1\r\n")
    await _refused_with(reader, writer, "bad_frame")


async def test_json_nested_past_the_parsers_depth_is_refused(make_client: MakeClient) -> None:
    port = await _serve(make_client)
    reader, writer = await _connect(port)
    data = b"[" * 10_000  # within INTAKE_WYOMING_MAX_DATA_BYTES, deeper than json's recursion
    writer.write(json.dumps({"type": "synthesize", "data_length": len(data)}).encode() + b"\n" + data)
    await _refused_with(reader, writer, "bad_frame")


async def test_a_request_with_fields_of_the_wrong_type_is_answered_and_the_connection_goes_on(
    make_client: MakeClient, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    port = await _serve(make_client)
    reader, writer = await _connect(port)
    try:
        for data in ({}, {"text": 5}, {"text": "Hi.", "voice": {"language": 5}}, {"text": "Hi.", "voice": {"name": []}},
                     {"text": "Hi.", "voice": "af_heart"}, {"text": "Hi.", "voice": 5}):
            writer.write(_frame("synthesize", data))
            assert await _next(reader) == ("error", {"text": ANY, "code": "bad_request"}), data
        writer.write(_frame("synthesize-start"))
        writer.write(_frame("synthesize-chunk", {"text": ["a"]}))
        assert await _next(reader) == ("error", {"text": ANY, "code": "bad_request"})
        writer.write(_frame("describe"))
        assert (await _next(reader) or ("",))[0] == "info"
    finally:
        writer.close()
    assert len(await redis.keys("catalog/*")) == 1  # the streaming start's cast; no refused request opened one
    assert not [r for r in caplog.records if r.exc_info], "a bad field is the client's error, not a traceback"


async def test_a_payload_within_its_limit_is_read_and_the_connection_goes_on(make_client: MakeClient) -> None:
    port = await _serve(make_client)
    reader, writer = await _connect(port)
    writer.write(json.dumps({"type": "audio-chunk", "payload_length": 100}).encode() + b"\n" + b"\0" * 100)
    writer.write(_frame("describe"))
    event = await _next(reader)
    writer.close()
    assert event is not None and event[0] == "info"


async def _refused_while(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, pieces: list[bytes],
                         every_s: float, code: str) -> None:
    """Send ``pieces``, one every ``every_s``, until the server answers: then it must be ``code``
    and the hang-up (the answer is read before more is written: a write to a cut socket would
    break the read)."""
    try:
        for piece in pieces:
            writer.write(piece)
            try:
                line = await asyncio.wait_for(reader.readline(), every_s)
            except asyncio.TimeoutError:
                continue
            header = json.loads(line)
            data = json.loads(await reader.readexactly(header["data_length"]))
            assert (header["type"], data["code"]) == ("error", code), (header, data)
            assert await asyncio.wait_for(reader.read(), 10) == b"", "the server keeps the connection"
            return
        raise AssertionError(f"no {code} after {len(pieces) * every_s:g} s")
    finally:
        writer.close()


async def test_an_idle_client_is_cut_off_and_junk_does_not_keep_it(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_idle_s=0.6)
    reader, writer = await _connect(port)
    junk = _frame("nonsense") + _frame("synthesize-chunk", {"text": "x"})  # a chunk outside any request
    await _refused_while(writer, reader, [junk] * 20, 0.1, "idle")


async def test_a_frame_trickled_in_does_not_reset_the_idle_limit(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_idle_s=0.6)
    reader, writer = await _connect(port)
    frame = _frame("describe", {"pad": "x" * 40})
    await _refused_while(writer, reader, [bytes([b]) for b in frame[:-1]], 0.05, "idle")  # a slow loris


async def test_real_requests_keep_a_connection_past_the_idle_limit(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_idle_s=0.6)
    reader, writer = await _connect(port)
    writer.write(_frame("synthesize-start"))
    for _ in range(4):  # 1.6 s, a piece of text every 0.4 s
        await asyncio.sleep(0.4)
        writer.write(_frame("synthesize-chunk", {"text": "Hello. "}))
    writer.write(_frame("describe"))
    event = await _next(reader)
    assert event is not None and event[0] == "info"
    writer.close()


async def test_describe_does_not_keep_a_connection_past_the_idle_limit(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_idle_s=0.6)
    reader, writer = await _connect(port)
    try:
        for _ in range(40):
            writer.write(_frame("describe"))
            event = await _next(reader)
            assert event is not None
            if event[0] == "error":
                assert event[1]["code"] == "idle"
                return
            await asyncio.sleep(0.1)
        raise AssertionError("describe kept the connection open")
    finally:
        writer.close()


async def test_one_client_holds_at_most_its_connections_and_others_still_get_in(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_connections_per_client=2)
    held = [await _connect(port, "127.0.0.2") for _ in range(2)]
    reader, writer = await _connect(port, "127.0.0.2")
    await _refused_with(reader, writer, "busy")
    other_reader, other_writer = await _connect(port, "127.0.0.3")
    other_writer.write(_frame("describe"))
    event = await _next(other_reader)
    assert event is not None and event[0] == "info"
    held[0][1].close()  # one left: its place is free again
    await asyncio.sleep(0.2)
    again_reader, again_writer = await _connect(port, "127.0.0.2")
    again_writer.write(_frame("describe"))
    event = await _next(again_reader)
    assert event is not None and event[0] == "info"
    for _, w in [*held, (other_reader, other_writer), (again_reader, again_writer)]:
        w.close()


async def test_the_port_holds_at_most_its_connections_in_all(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_max_connections=3)
    held = [await _connect(port, f"127.0.0.{n}") for n in (2, 3, 4)]
    for _, w in held:  # the server has counted them once they are answered
        w.write(_frame("describe"))
    for r, _ in held:
        assert (await _next(r) or ("",))[0] == "info"
    reader, writer = await _connect(port, "127.0.0.5")
    await _refused_with(reader, writer, "busy")
    for _, w in held:
        w.close()


@pytest.mark.rule("auth-failures-limited")
async def test_with_keys_set_a_stranger_needs_a_key_in_its_first_event(make_client: MakeClient) -> None:
    port = await _serve(make_client, api_keys=frozenset({KEY}))
    reader, writer = await _connect(port, STRANGER)
    writer.write(_frame("describe"))
    await _refused_with(reader, writer, "invalid_api_key")
    reader, writer = await _connect(port, STRANGER)
    writer.write(_frame("describe", {"api_key": "w" * 40}))
    await _refused_with(reader, writer, "invalid_api_key")
    reader, writer = await _connect(port, STRANGER)
    writer.write(_frame("describe", {"api_key": KEY}) + _frame("describe"))
    for _ in range(2):  # let in once: the next events need no key
        event = await _next(reader)
        assert event is not None and event[0] == "info"
    writer.close()


async def test_with_keys_set_an_allowed_address_needs_none(make_client: MakeClient) -> None:
    port = await _serve(make_client, api_keys=frozenset({KEY}), wyoming_allow_from=frozenset({"127.0.0.0/29"}))
    for source in ("127.0.0.1", STRANGER):
        reader, writer = await _connect(port, source)
        writer.write(_frame("describe"))
        event = await _next(reader)
        writer.close()
        assert event is not None and event[0] == "info", source


async def test_wrong_keys_on_the_port_run_into_the_failure_limit(make_client: MakeClient) -> None:
    port = await _serve(make_client, api_keys=frozenset({KEY}), auth_failures_per_min=2)
    codes = []
    for _ in range(4):
        reader, writer = await _connect(port, STRANGER)
        writer.write(_frame("describe", {"api_key": "w" * 40}))
        event = await _next(reader)
        writer.close()
        codes.append(event[1]["code"] if event else None)
    assert codes[:2] == ["invalid_api_key", "invalid_api_key"] and codes[2:] == ["too_many_failures"] * 2


async def test_a_client_that_takes_no_bytes_is_cut_off(make_client: MakeClient) -> None:
    port = await _serve(make_client, wyoming_write_timeout_s=0.5)
    reader, writer = await _connect(port)
    writer.transport.set_write_buffer_limits(high=1 << 30)  # (its own sends never wait on the server)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    asked = 20_000
    writer.write(_frame("describe") * asked)  # and never a byte read while the answers pile up
    await asyncio.sleep(2)
    answers = 0
    with contextlib.suppress(ConnectionError):
        while (line := await asyncio.wait_for(reader.readline(), 10)):
            answers += 1
            header = json.loads(line)
            await reader.readexactly(header.get("data_length", 0))
    writer.close()
    assert answers < asked, "the server wrote every answer to a client that read none"


async def test_silent_sockets_wait_without_a_seat_and_are_capped_per_client(make_client: MakeClient) -> None:
    port = await _serve(make_client, api_keys=frozenset({KEY}), wyoming_max_connections=2,
                        sessions_waiting_per_client=2)
    strangers = [await _connect(port, source) for source in ("127.0.0.2", "127.0.0.2", "127.0.0.3")]
    reader, writer = await _connect(port, "127.0.0.2")  # past its waiting cap
    await _refused_with(reader, writer, "busy")
    served: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(2):  # Home Assistant, on the allowed address, still gets both seats
            served.append(await _connect(port))
            reader, writer = served[-1]
            writer.write(_frame("describe"))
            event = await _next(reader)
            assert event is not None and event[0] == "info", event
    finally:
        for _, w in [*strangers, *served]:
            w.close()


async def test_a_clients_silent_sockets_count_together_on_every_protocol(make_client: MakeClient) -> None:
    """One pool of waiting places per client: its silent live WebSockets leave it no silent
    Wyoming connection, while another address is still served on both."""
    port = free_port()
    client = await make_client(wyoming_port=port, sessions_waiting_per_client=2)
    live_url = client.make_url("/v1/audio/speech/live")
    connector = aiohttp.TCPConnector(local_addr=(STRANGER, 0))
    async with aiohttp.ClientSession(connector=connector) as stranger:
        silent = [await stranger.ws_connect(live_url) for _ in range(2)]
        waiting = client.app[INTAKE].session_waiting
        for _ in range(250):  # the server has counted both
            if waiting.held.get(STRANGER) == 2:
                break
            await asyncio.sleep(0.02)
        reader, writer = await _connect(port, STRANGER)
        await _refused_with(reader, writer, "busy")
        other_reader, other_writer = await _connect(port, "127.0.0.3")
        other_writer.write(_frame("describe"))
        event = await _next(other_reader)
        other_writer.close()
        assert event is not None and event[0] == "info"
        for ws in silent:
            await ws.close()
