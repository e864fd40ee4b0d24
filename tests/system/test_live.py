"""Open (live) casts end to end: intake, edge and synth as separate processes with the real model.

The WebSocket and the HTTP routes, fragments cut at every position of a text, a resend, a close
without flush, a client that disconnects, a live cast followed over SSE and as audio.mp3, and a
worker killed in the middle of an open cast. Short texts: the model runs at about half real
time on two cores. The worker killed has a system of its own; the other tests share the session's
(tests/conftest.py), each with its own texts.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import ClientSession, ClientTimeout

import castlog
import chunking
from tests.support.system import System, running_system

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
CONSUMER = "live-test-worker"  # a fixed name: a restarted worker re-reads its own pending jobs
TWO = "Good morning. The answer is forty two."


@pytest.fixture
def live(tmp_path: Path) -> Iterator[System]:
    """A system of its own for the test that kills its worker (the others share the session's)."""
    with running_system(tmp_path, aof=True, SYNTH_CONSUMER=CONSUMER,
                        INTAKE_RATE="1000", INTAKE_BURST="1000") as system:
        yield system


async def sse(http: ClientSession, system: System, cast_id: str) -> list[dict[str, Any]]:
    """The cast's records over edge's SSE, from the start until its end."""
    records: list[dict[str, Any]] = []
    async with http.get(system.url("edge", f"/api/casts/{cast_id}/events?seq_num=0")) as response:
        assert response.status == 200
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                records.append(json.loads(line[5:].strip()))
                if records[-1]["kind"] in ("eos", "error"):
                    break
    return records


def spoken(records: list[dict[str, Any]]) -> list[str]:
    return [r["headers"]["t"] for r in records if r["kind"] == "audio"]


async def session_events(ws: aiohttp.ClientWebSocketResponse) -> list[Any]:
    got: list[Any] = []
    async for msg in ws:
        got.append(msg.data if msg.type == aiohttp.WSMsgType.BINARY else json.loads(msg.data))
    return got


async def test_websocket_session_speaks_each_sentence_and_listeners_follow_by_link(system: System) -> None:
    from mp3decode import decode_mp3

    async with ClientSession(timeout=ClientTimeout(total=240)) as http:
        ws = await http.ws_connect(system.url("intake", "/v1/audio/speech/live"))
        await ws.send_json({"type": "start"})
        cast_event = json.loads((await ws.receive()).data)
        cast_id = cast_event["id"]
        listener = asyncio.ensure_future(sse(http, system, cast_id))
        for word in TWO.split(" "):  # token by token, as an agent streams them
            await ws.send_json({"type": "text", "text": word + " "})
        await ws.send_json({"type": "close"})
        got = await session_events(ws)
        records = await listener
        async with http.get(system.url("edge", f"/api/casts/{cast_id}/audio.mp3")) as response:
            mp3 = await response.read()
    chunks = chunking.split_text(TWO)
    sentences = [g for g in got if isinstance(g, dict) and g["type"] == "sentence"]
    frames = [g for g in got if isinstance(g, bytes)]
    assert [s["text"] for s in sentences] == chunks and len(frames) == len(chunks)
    assert got[-1] == {"type": "done", "sentences": len(chunks), "audio_ms": got[-1]["audio_ms"]}
    assert all(len(decode_mp3(f)) > 0 for f in frames)
    assert records[0]["kind"] == "meta" and records[0]["headers"]["live"] is True
    assert spoken(records) == chunks and records[-1]["kind"] == "eos"
    assert mp3 == b"".join(frames)  # the listener by link hears the same bytes
    assert abs(len(decode_mp3(mp3)) - got[-1]["audio_ms"] * 24) <= 576


@pytest.mark.rule("fragments-idempotent")
async def test_http_fragments_with_a_resend_and_a_close_without_flush(system: System) -> None:
    text = "Fragments come over HTTP. The last one has no stop"
    async with ClientSession(timeout=ClientTimeout(total=240)) as http:
        async with http.post(system.url("intake", "/api/casts"), json={"live": True, "title": "HTTP"}) as response:
            assert response.status == 201
            opened = await response.json()
            cast_id = opened["id"]
        writer = {"Authorization": f"Bearer {opened['write_token']}"}
        listener = asyncio.ensure_future(sse(http, system, cast_id))
        offset = 0
        for piece in (text[:10], text[10:30], text[30:]):
            for _ in range(2):  # each one sent twice: a resend after a lost reply
                async with http.post(system.url("intake", f"/api/casts/{cast_id}/text"),
                                     json={"text": piece, "offset": offset}, headers=writer) as response:
                    assert response.status == 200
            offset += len(piece)
        async with http.post(system.url("intake", f"/api/casts/{cast_id}/close"), json={"offset": offset},
                             headers=writer) as response:
            assert response.status == 200
            assert (await response.json())["content_id"] == castlog.content_id(text, opened["voice"])
        records = await asyncio.wait_for(listener, 200)
    assert spoken(records) == chunking.split_text(text)
    assert records[-1]["kind"] == "eos" and records[-1]["headers"]["sentences"] == len(chunking.split_text(text))


@pytest.mark.rule("chunker-equals-split")
async def test_fragments_cut_at_every_position_give_the_batch_chunks(system: System) -> None:
    text = "Hi. Yes, go."  # short, so that one cast per cut stays cheap with the real model
    want = chunking.split_text(text)
    assert len(want) == 2
    async with ClientSession(timeout=ClientTimeout(total=280)) as http:
        ids = []
        # every cut inside the first sentence, up to the character that completes it (each cast
        # costs two inferences: tests/synth/test_worker_live.py checks every cut of a long text)
        for cut in range(len("Hi. Y") + 1):
            async with http.post(system.url("intake", "/api/casts"), json={"live": True}) as response:
                opened = await response.json()
            cast_id, writer = opened["id"], {"Authorization": f"Bearer {opened['write_token']}"}
            for offset, piece in ((0, text[:cut]), (cut, text[cut:])):
                async with http.post(system.url("intake", f"/api/casts/{cast_id}/text"),
                                     json={"text": piece, "offset": offset}, headers=writer) as response:
                    assert response.status == 200
            async with http.post(system.url("intake", f"/api/casts/{cast_id}/close"), headers=writer) as response:
                assert response.status == 200
            ids.append(cast_id)
        logs = [await sse(http, system, cast_id) for cast_id in ids]  # one stream at a time: edge caps a client's
    assert [spoken(records) for records in logs] == [want] * len(ids)


@pytest.mark.rule("session-end-closes")
async def test_a_client_that_disconnects_leaves_a_cast_that_finishes(system: System) -> None:
    async with ClientSession(timeout=ClientTimeout(total=240)) as http:
        ws = await http.ws_connect(system.url("intake", "/v1/audio/speech/live"))
        await ws.send_json({"type": "start", "format": "pcm", "keep": True})  # else a disconnect cancels
        cast_id = json.loads((await ws.receive()).data)["id"]
        await ws.send_json({"type": "text", "text": "Gone before the end"})
        await ws.close()
        records = await asyncio.wait_for(sse(http, system, cast_id), 200)
    assert spoken(records) == ["Gone before the end"] and records[-1]["kind"] == "eos"


@pytest.mark.rule("open-restart-resumes")
async def test_a_worker_killed_mid_live_cast_is_resumed(live: System) -> None:
    text1, text2 = "Before the crash. ", "After the crash, it goes on."
    async with ClientSession(timeout=ClientTimeout(total=280)) as http:
        async with http.post(live.url("intake", "/api/casts"), json={"live": True}) as response:
            opened = await response.json()
        cast_id, writer = opened["id"], {"Authorization": f"Bearer {opened['write_token']}"}
        async with http.post(live.url("intake", f"/api/casts/{cast_id}/text"), json={"text": text1, "offset": 0},
                             headers=writer):
            pass
        async with http.post(live.url("intake", f"/api/casts/{cast_id}/text"),
                             json={"text": "After", "offset": len(text1)}, headers=writer):
            pass
        for _ in range(600):  # the first sentence is in the log
            async with http.get(live.url("edge", f"/api/casts/{cast_id}")) as response:
                if (await response.json()).get("finished", 0) >= 1:
                    break
            await asyncio.sleep(0.1)
        live.kill("synth")
        async with http.post(live.url("intake", f"/api/casts/{cast_id}/text"),
                             json={"text": text2[5:], "offset": len(text1) + 5}, headers=writer):
            pass
        async with http.post(live.url("intake", f"/api/casts/{cast_id}/close"), headers=writer):
            pass
        await asyncio.to_thread(live.start, "synth")
        records = await asyncio.wait_for(sse(http, live, cast_id), 240)
    starts = [r["headers"] for r in records if r["kind"] == "start"]
    assert len(starts) == 2 and starts[1]["resume_from"] >= 1
    entries = [castlog.Entry(i, castlog.Audio(i=r["headers"]["i"], t=r["headers"]["t"], d=r["headers"]["d"],
                                              o=r["headers"]["o"]))
               if r["kind"] == "audio" else castlog.Entry(i, castlog.Start(**r["headers"]))
               for i, r in enumerate(records) if r["kind"] in ("audio", "start")]
    played = [e.record.t for e in castlog.playable(entries) if isinstance(e.record, castlog.Audio)]
    assert played == chunking.split_text(text1 + text2) and records[-1]["kind"] == "eos"


def test_the_example_agent_streams_an_answer_and_saves_its_audio(system: System, tmp_path: Path) -> None:
    from mp3decode import decode_mp3

    out = tmp_path / "answer.mp3"
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "agent_stream.py"), "--url", system.url("intake", ""),
         "--text", "Hi there. Bye now.", "--tokens-per-s", "50", "--out", str(out)],
        capture_output=True, text=True, timeout=200,
    )
    assert result.returncode == 0, result.stderr
    assert "sentence 1: Bye now." in result.stderr and "done: 2 sentences" in result.stderr
    assert len(decode_mp3(out.read_bytes())) > 24_000 // 2  # more than half a second of speech
