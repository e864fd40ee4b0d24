"""A voice agent's side of StreamTTS: stream an answer token by token into the live WebSocket and
save (or pipe) the audio as each sentence comes back.

    python examples/agent_stream.py                      # a canned answer at 25 tokens/s -> answer.mp3
    python examples/agent_stream.py --text "Hi. Bye." --out - | mpv -   # play as it arrives
    python examples/agent_stream.py --format pcm --out answer.wav

The token stream stands in for an LLM's: any async iterator of strings works (see ``tokens``).
Text goes in on one task and audio comes out on another, so neither waits for the other. The
cast also has a link (printed): anyone can follow it as it is made or replay it later.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import wave
from collections.abc import AsyncIterator
from typing import BinaryIO

import aiohttp

ANSWER = (
    "Sure, here is the short version. The train leaves at eleven from platform four, and it takes "
    "about two hours to reach the coast. If you miss it, there is another one at half past one. "
    "Bring a jacket: the wind by the sea is colder than you would think."
)
SAMPLE_RATE = 24_000


async def tokens(text: str, per_s: float) -> AsyncIterator[str]:
    """The text as an LLM would stream it: word by word (with its space), at ``per_s`` tokens a second."""
    words = text.split(" ")
    for k, word in enumerate(words):
        await asyncio.sleep(1 / per_s)
        yield word if k == len(words) - 1 else word + " "


async def send_text(ws: aiohttp.ClientWebSocketResponse[bool], stream: AsyncIterator[str]) -> None:
    async for token in stream:
        await ws.send_json({"type": "text", "text": token})
    await ws.send_json({"type": "close"})  # the rest is spoken, then the server says done


async def receive_audio(ws: aiohttp.ClientWebSocketResponse[bool], out: BinaryIO | wave.Wave_write, started: float) -> None:
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.BINARY:
            if isinstance(out, wave.Wave_write):
                out.writeframes(msg.data)
            else:
                out.write(msg.data)
                out.flush()
            continue
        if msg.type != aiohttp.WSMsgType.TEXT:
            break
        event = json.loads(msg.data)
        at = f"{time.monotonic() - started:6.2f}s"
        if event["type"] == "cast":
            print(f"{at} cast {event['id']}: follow it at {event['url']}", file=sys.stderr)
        elif event["type"] == "sentence":
            print(f"{at} sentence {event['index']}: {event['text']}", file=sys.stderr)
        elif event["type"] == "done":
            print(f"{at} done: {event['sentences']} sentences, {event['audio_ms'] / 1000:.1f}s of audio", file=sys.stderr)
        elif event["type"] == "error":
            print(f"{at} error {event['error']}: {event['message']}", file=sys.stderr)
    if ws.close_code not in (None, 1000):
        print(f"the server closed the session with code {ws.close_code}", file=sys.stderr)


def open_output(path: str, fmt: str) -> BinaryIO | wave.Wave_write:
    if path == "-":
        return sys.stdout.buffer
    if fmt == "pcm":
        out = wave.open(path, "wb")
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        return out
    return open(path, "wb")  # closed in main


async def main(args: argparse.Namespace) -> None:
    url = args.url.rstrip("/").replace("http", "ws", 1) + "/v1/audio/speech/live"
    start = {"type": "start", "format": args.format, "speed": args.speed, **({"voice": args.voice} if args.voice else {})}
    out = open_output(args.out, args.format)
    try:
        async with aiohttp.ClientSession() as http, http.ws_connect(url, heartbeat=20) as ws:
            await ws.send_json(start)
            started = time.monotonic()
            receiving = asyncio.ensure_future(receive_audio(ws, out, started))
            await send_text(ws, tokens(args.text, args.tokens_per_s))
            await receiving
    except aiohttp.ClientConnectorError as exc:
        sys.exit(f"cannot reach StreamTTS at {args.url} ({exc}); start it with `streamtts up`")
    finally:
        if out is not sys.stdout.buffer:
            out.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the public origin (streamtts up's)")
    parser.add_argument("--text", default=ANSWER, help="the answer to stream")
    parser.add_argument("--tokens-per-s", type=float, default=25.0)
    parser.add_argument("--voice", default=None, help="a voice of GET /api/voices (default: the server's)")
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--format", choices=("mp3", "pcm"), default="mp3")
    parser.add_argument("--out", default="answer.mp3", help="a file, or - for stdout")
    asyncio.run(main(parser.parse_args()))
