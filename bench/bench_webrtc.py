"""The live session over WebRTC against the live WebSocket, side by side, and how many WebRTC
sessions one intake process carries per core.

intake runs as its own process on a throwaway Redis; this script stands in for the worker: when
a session's text log shows its flush, it appends the sentence's audio (a tone's MP3, as synth
writes it) at once, so what is measured is the way back to the client, not the model.

1. first audio after a flushed sentence: from the ``flush`` sent to the first audio at the client
   (the WebSocket: the sentence's binary frame; WebRTC: the first loud frame out of the track's
   decoder, after aiortc's jitter buffer), median and worst of ``--rounds`` sessions each.
2. end-to-end jitter over a cast of ``--sentences`` one-second sentences: for every 20 ms of audio,
   its lateness (arrival - first arrival - its media time); the buffer a player needs for gapless
   playout is the worst lateness, and its spread (p95 - p5) says how bursty the arrival is. The
   WebSocket hands over each sentence at once (early: a spread of whole sentences, which the client
   must buffer and schedule itself); WebRTC paces the audio in real time, so its spread is the
   network's and the pacing's jitter. RFC 3550's interarrival jitter of the WebRTC frames too.
3. sessions per core: ``--sessions`` WebRTC sessions playing at once; intake's CPU seconds per
   second (from /proc) give the sessions one core carries.

    python bench/bench_webrtc.py [--rounds 5] [--sentences 5] [--sessions 8]       (about a minute)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, LiveStore, LogReader, Start, VoiceList, publish_voices
from synth.mp3 import encode_chunk

from common import RESULTS, machine, print_rows, services, temp_redis, write_results

VOICE = "af_heart"
LOUD = 300  # RMS (s16) above which a decoded frame carries the tone
FRAME_S = 0.020


def tone_mp3(seconds: float) -> bytes:
    t = np.arange(int(24_000 * seconds)) / 24_000
    return bytes(encode_chunk((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 48_000).data)


async def stand_in_worker(redis: Redis, cast_id: str, sentences: int, seconds: float) -> None:
    """When the flush is in the text log, the sentences' audio and the end, at once."""
    live = LiveStore(redis)
    while True:
        text = await live.read_text(cast_id)
        if text is not None and any(e.kind == "flush" for e in text.events):
            break
        await asyncio.sleep(0.002)
    mp3 = tone_mp3(seconds)
    records: list[Any] = [Start(attempt=1, resume_from=0, at=0)]
    records += [Audio(i=k, t=f"Sentence {k}.", d=int(seconds * 1000), o=0, n=k + 1, body=mp3) for k in range(sentences)]
    records.append(Eos(sentences=sentences, audio_ms=int(sentences * seconds * 1000), attempts=1))
    await CastStore(redis).append(cast_id, await LogReader(redis).tail(cast_id), records)


@dataclass
class Run:
    flushed: float = 0.0
    arrivals: list[float] = field(default_factory=list)  # per 20 ms of audio, when it was there

    def first_audio_s(self) -> float:
        return self.arrivals[0] - self.flushed

    def lateness_ms(self) -> list[float]:
        return [(a - self.arrivals[0] - k * FRAME_S) * 1000 for k, a in enumerate(self.arrivals)]


async def ws_run(http: aiohttp.ClientSession, base: str, redis: Redis, sentences: int) -> Run:
    run = Run()
    async with http.ws_connect(base.replace("http", "ws") + "/v1/audio/speech/live") as ws:
        await ws.send_json({"type": "start", "voice": VOICE, "format": "pcm"})
        cast_id = json.loads((await ws.receive()).data)["id"]
        worker = asyncio.ensure_future(stand_in_worker(redis, cast_id, sentences, 1.0))
        await ws.send_json({"type": "text", "text": "Sentence."})
        run.flushed = time.monotonic()
        await ws.send_json({"type": "flush"})
        await ws.send_json({"type": "close"})
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.BINARY:
                now = time.monotonic()
                run.arrivals += [now] * (len(msg.data) // 2 // 480)  # 20 ms of s16 mono 24 kHz each
            elif json.loads(msg.data)["type"] == "done":
                break
        await worker
    return run


async def _listen(track: MediaStreamTrack, run: Run) -> None:
    """Every decoded frame from the first loud one to the last (the quiet frames at the MP3 chunks'
    edges, their encoder's padding, are audio too: skipping them would read as lateness)."""
    pending: list[float] = []  # quiet frames since the last loud one
    try:
        while True:
            frame = await track.recv()
            samples = frame.to_ndarray().astype(np.float64)
            now = time.monotonic()
            if float(np.sqrt(np.mean(samples * samples))) > LOUD:
                run.arrivals += [*pending, now] if run.arrivals else [now]
                pending = []
            elif run.arrivals:
                pending.append(now)
    except MediaStreamError:
        pass


async def rtc_session(http: aiohttp.ClientSession, base: str) -> tuple[RTCPeerConnection, Any, asyncio.Queue[Any], Any]:
    pc = RTCPeerConnection()
    channel = pc.createDataChannel("control")
    pc.addTransceiver("audio", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    async with http.post(base + "/v1/audio/speech/webrtc", data=pc.localDescription.sdp,
                         headers={"Content-Type": "application/sdp"}) as resp:
        assert resp.status == 201, await resp.text()
        answer = await resp.text()
    messages: asyncio.Queue[Any] = asyncio.Queue()
    opened, tracks = asyncio.Event(), asyncio.Queue()  # type: ignore[var-annotated]
    channel.on("open", opened.set)
    channel.on("message", lambda m: messages.put_nowait(json.loads(m)))
    pc.on("track", tracks.put_nowait)
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    await asyncio.wait_for(opened.wait(), 20)
    return pc, channel, messages, await tracks.get()


async def rtc_run(http: aiohttp.ClientSession, base: str, redis: Redis, sentences: int, seconds: float = 1.0) -> Run:
    run = Run()
    pc, channel, messages, track = await rtc_session(http, base)
    listening = asyncio.ensure_future(_listen(track, run))
    try:
        channel.send(json.dumps({"type": "start", "voice": VOICE}))
        cast_id = (await messages.get())["id"]
        worker = asyncio.ensure_future(stand_in_worker(redis, cast_id, sentences, seconds))
        channel.send(json.dumps({"type": "text", "text": "Sentence."}))
        run.flushed = time.monotonic()
        channel.send(json.dumps({"type": "flush"}))
        channel.send(json.dumps({"type": "close"}))
        while (await asyncio.wait_for(messages.get(), 60))["type"] != "closed":
            pass
        await worker
    finally:
        listening.cancel()
        await pc.close()
    return run


def cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def per_core(http: aiohttp.ClientSession, base: str, redis: Redis, pid: int, count: int) -> dict[str, float]:
    """``count`` sessions playing a long cast at once: intake's CPU share while they play."""
    runs = [asyncio.ensure_future(rtc_run(http, base, redis, 1, seconds=12.0)) for _ in range(count)]
    await asyncio.sleep(4.0)  # all connected and playing
    cpu0, t0 = cpu_s(pid), time.monotonic()
    await asyncio.sleep(5.0)
    share = (cpu_s(pid) - cpu0) / (time.monotonic() - t0)
    await asyncio.gather(*runs)
    idle0, t1 = cpu_s(pid), time.monotonic()
    await asyncio.sleep(2.0)
    idle = (cpu_s(pid) - idle0) / (time.monotonic() - t1)
    return {"sessions": count, "cpu_share": share, "idle_share": idle,
            "sessions_per_core": count / max(share - idle, 1e-6)}


def summary(runs: list[Run]) -> dict[str, float]:
    first = [r.first_audio_s() * 1000 for r in runs]
    late = [x for r in runs for x in r.lateness_ms()]
    return {"first_audio_ms_median": statistics.median(first), "first_audio_ms_max": max(first),
            "buffer_needed_ms": max(0.0, max(late)), "lateness_spread_ms": float(np.percentile(late, 95) - np.percentile(late, 5))}


def rfc3550_jitter_ms(run: Run) -> float:
    jitter = 0.0
    for k in range(1, len(run.arrivals)):
        d = abs((run.arrivals[k] - run.arrivals[k - 1]) - FRAME_S)
        jitter += (d - jitter) / 16
    return jitter * 1000


async def main(args: argparse.Namespace) -> None:
    with temp_redis() as server:
        redis = Redis.from_url(server.url)
        await publish_voices(redis, VoiceList(voices=(VOICE,), default=VOICE, backend="onnx", worker="bench", at=1),
                             maxlen=100)
        async with services(server.url, ["intake"], quiet=True, INTAKE_RATE="1000", INTAKE_BURST="1000",
                            WEBRTC_UDP_PORTS="42000-42200") as ports:
            base = f"http://127.0.0.1:{ports['intake']}"
            pid = int(os.popen(f"fuser -n tcp {ports['intake']} 2>/dev/null").read().split()[0])
            async with aiohttp.ClientSession() as http:
                ws = [await ws_run(http, base, redis, args.sentences) for _ in range(args.rounds)]
                rtc = [await rtc_run(http, base, redis, args.sentences) for _ in range(args.rounds)]
                cores = [await per_core(http, base, redis, pid, n) for n in (args.sessions // 2, args.sessions)]
        await redis.aclose()
    rows = {"websocket": summary(ws), "webrtc": {**summary(rtc), "rfc3550_jitter_ms": statistics.median(
        rfc3550_jitter_ms(r) for r in rtc)}, "sessions_per_core": cores}
    for name in ("websocket", "webrtc"):
        print(f"-- {name}")
        print_rows(rows[name], 28)  # type: ignore[arg-type]
    for row in cores:
        print(f"-- {row['sessions']:.0f} sessions at once")
        print_rows(row, 28)
    write_results(RESULTS / "webrtc.json", {"machine": machine(), "args": vars(args), **rows})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="sessions per transport for latency and jitter")
    parser.add_argument("--sentences", type=int, default=5, help="one-second sentences per session")
    parser.add_argument("--sessions", type=int, default=8, help="WebRTC sessions at once for the per-core figure")
    asyncio.run(main(parser.parse_args()))
