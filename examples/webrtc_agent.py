"""A voice agent over WebRTC: stream an answer token by token on the `control` data channel and
record the audio track (Opus, decoded) as it plays. Needs aiortc (`pip install 'streamtts[webrtc]'`).

    python examples/webrtc_agent.py                         # a canned answer at 25 tokens/s -> answer.wav
    python examples/webrtc_agent.py --text "Hi. Bye." --out hi.wav

The offer carries the data channel and an audio transceiver to receive on; the answer comes back
from `POST /v1/audio/speech/webrtc`. The messages are the live WebSocket's (examples/agent_stream.py);
the server's last one is `closed`, after the audio played out. A browser does the same with
`RTCPeerConnection` (the paste page's talk mode, services/edge/static/talk.js).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import wave
from collections.abc import AsyncIterator

import aiohttp
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

ANSWER = (
    "Sure, here is the short version. The train leaves at eleven from platform four, and it takes "
    "about two hours to reach the coast. Bring a jacket: the wind by the sea is colder than you would think."
)


async def tokens(text: str, per_s: float) -> AsyncIterator[str]:
    """The text as an LLM would stream it: word by word (with its space), at ``per_s`` tokens a second."""
    words = text.split(" ")
    for k, word in enumerate(words):
        await asyncio.sleep(1 / per_s)
        yield word if k == len(words) - 1 else word + " "


async def record(track: MediaStreamTrack, out: wave.Wave_write) -> None:
    """The track's frames as they play (48 kHz stereo s16 after Opus), silence included."""
    try:
        while True:
            frame = await track.recv()
            out.writeframes(frame.to_ndarray().tobytes())
    except MediaStreamError:
        pass


def show(event: dict[str, object], started: float) -> None:
    at = f"{time.monotonic() - started:6.2f}s"
    if event["type"] == "cast":
        print(f"{at} cast {event['id']}: follow it at {event['url']}", file=sys.stderr)
    elif event["type"] == "sentence":
        print(f"{at} sentence {event['index']}: {event['text']}", file=sys.stderr)
    elif event["type"] in ("done", "error", "closed"):
        print(f"{at} {json.dumps(event)}", file=sys.stderr)


async def main(args: argparse.Namespace) -> None:
    pc = RTCPeerConnection()
    channel = pc.createDataChannel("control")
    pc.addTransceiver("audio", direction="recvonly")
    events: asyncio.Queue[dict[str, object]] = asyncio.Queue()
    opened, tracks = asyncio.Event(), asyncio.Queue()  # type: ignore[var-annotated]
    channel.on("open", opened.set)
    channel.on("message", lambda message: events.put_nowait(json.loads(message)))
    pc.on("track", tracks.put_nowait)
    out = wave.open(args.out, "wb")
    out.setnchannels(2)
    out.setsampwidth(2)
    out.setframerate(48_000)
    try:
        await pc.setLocalDescription(await pc.createOffer())
        headers = {"Content-Type": "application/sdp", **({"Authorization": f"Bearer {args.api_key}"} if args.api_key else {})}
        async with aiohttp.ClientSession() as http, http.post(
                args.url.rstrip("/") + "/v1/audio/speech/webrtc", data=pc.localDescription.sdp, headers=headers) as resp:
            if resp.status != 201:
                sys.exit(f"the server answered {resp.status}: {await resp.text()}")
            answer = await resp.text()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        recording = asyncio.ensure_future(record(await tracks.get(), out))
        await asyncio.wait_for(opened.wait(), 20)
        started = time.monotonic()
        channel.send(json.dumps({"type": "start", **({"voice": args.voice} if args.voice else {})}))
        async for token in tokens(args.text, args.tokens_per_s):
            channel.send(json.dumps({"type": "text", "text": token}))
        channel.send(json.dumps({"type": "close"}))  # the rest is spoken, then the server says done
        while True:
            event = await events.get()
            show(event, started)
            if event["type"] == "closed":
                break
        recording.cancel()
    except aiohttp.ClientConnectorError as exc:
        sys.exit(f"cannot reach StreamTTS at {args.url} ({exc}); start it with `streamtts up`")
    finally:
        await pc.close()
        out.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the public origin (streamtts up's)")
    parser.add_argument("--text", default=ANSWER, help="the answer to stream")
    parser.add_argument("--tokens-per-s", type=float, default=25.0)
    parser.add_argument("--voice", default=None, help="a voice of GET /api/voices (default: the server's)")
    parser.add_argument("--api-key", default=None, help="a key of the server's STREAMTTS_API_KEYS, if it has any")
    parser.add_argument("--out", default="answer.wav", help="the WAV file to write (48 kHz stereo, as played)")
    asyncio.run(main(parser.parse_args()))
