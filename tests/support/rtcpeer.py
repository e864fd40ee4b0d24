"""A WebRTC client for tests: an aiortc peer that posts its offer, holds the ``control`` data
channel and records the audio track's frames with their loudness."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

SDP = "application/sdp"
LOUD = 300  # RMS of s16 samples above which a frame is speech (or a tone), not silence


@dataclass
class Frame:
    at: float  # time.monotonic() on arrival
    rms: float


@dataclass
class Peer:
    pc: RTCPeerConnection
    answer: str
    messages: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    frames: list[Frame] = field(default_factory=list)
    channel: Any = None
    listening: asyncio.Task[None] | None = None

    def send(self, message: dict[str, Any]) -> None:
        self.channel.send(json.dumps(message))

    async def next(self, timeout_s: float = 10) -> dict[str, Any]:
        return await asyncio.wait_for(self.messages.get(), timeout_s)

    async def until(self, kind: str, timeout_s: float = 30) -> list[dict[str, Any]]:
        """Every message up to and including the first of ``kind``."""
        got = [await self.next(timeout_s)]
        while got[-1]["type"] != kind:
            got.append(await self.next(timeout_s))
        return got

    async def heard(self, count: int, *, loud: bool = False, timeout_s: float = 20) -> None:
        """Until ``count`` frames (loud ones, with ``loud``) have arrived."""
        deadline = time.monotonic() + timeout_s
        while len(self.loud() if loud else self.frames) < count:
            assert time.monotonic() < deadline, f"fewer than {count} frames in {timeout_s} s"
            await asyncio.sleep(0.02)

    def loud(self, since: float = 0.0) -> list[Frame]:
        return [f for f in self.frames if f.rms > LOUD and f.at >= since]

    async def close(self) -> None:
        if self.listening is not None:
            self.listening.cancel()
        await self.pc.close()


async def _listen(track: MediaStreamTrack, frames: list[Frame]) -> None:
    try:
        while True:
            frame = await track.recv()
            samples = frame.to_ndarray().astype(np.float64)
            frames.append(Frame(time.monotonic(), float(np.sqrt(np.mean(samples * samples)))))
    except MediaStreamError:
        pass


def _take(peer: Peer, message: dict[str, Any]) -> None:
    peer.messages.put_nowait(message)
    if message["type"] == "closed":  # the closing handshake, as a client does
        peer.channel.close()


async def offer(pc: RTCPeerConnection, *, channel: bool = True) -> tuple[str, Any]:
    """The offer a client sends: the control channel (unless not) and an audio track to receive."""
    made = pc.createDataChannel("control") if channel else None
    pc.addTransceiver("audio", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    return str(pc.localDescription.sdp), made


async def connect(post: Any, url: str, headers: dict[str, str] | None = None) -> Peer:
    """A peer with its control channel open and its track listened to. ``post`` is an aiohttp
    ClientSession's or TestClient's ``post``."""
    pc = RTCPeerConnection()
    sdp, channel = await offer(pc)
    resp = await post(url, data=sdp, headers={"Content-Type": SDP, **(headers or {})})
    answer = await resp.text()
    assert resp.status == 201, answer
    assert resp.content_type == SDP
    peer = Peer(pc, answer, channel=channel)
    opened = asyncio.Event()
    channel.on("open", opened.set)
    channel.on("message", lambda m: _take(peer, json.loads(m)))
    tracks: asyncio.Queue[MediaStreamTrack] = asyncio.Queue()
    pc.on("track", tracks.put_nowait)
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    peer.listening = asyncio.ensure_future(_listen(await asyncio.wait_for(tracks.get(), 10), peer.frames))
    await asyncio.wait_for(opened.wait(), 20)
    return peer
