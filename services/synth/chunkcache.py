"""The chunk cache: a chunk's model output kept in Redis, shared by every worker, so that text read
once (a cast edited and cast again, an agent's stock phrase, a cast retention deleted) is not
read by the model again.

The key is a digest of exactly what the model is fed for the chunk: its text, the words of its
neighbours that a seam reads with it (see seams), the voice (or canonical blend), the speed,
and the model and backend (Kokoro reads a chunk on its own, so the same input gives the same
audio). The entry is the model's PCM and word timings, as the model thread gives them: a hit
goes through the same encoder and the same fenced append as a fresh chunk, so its bytes are the
ones the model's would give, and its record differs only by the ``c`` flag.

Bounded by ``SYNTH_CHUNK_CACHE_BYTES`` (0: off), evicted by use: each entry is a key of its own,
in a slot of its own on a cluster (``synth/chunk/{<digest>}``); an index of uses and sizes in
one slot (``synth/chunks/{index}/*``) is kept by one short script that evicts the least recently
used entries past the budget. Entries live in Redis, so they outlast a worker's restart.
"""

from __future__ import annotations

import hashlib
import logging

import msgspec
import numpy as np
from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import now_ms
from castlog.keys import decoded

from .model import Synthesizer
from .model.timing import Word

log = logging.getLogger(__name__)

ENTRY_PREFIX = "synth/chunk/"  # synth/chunk/{<digest>}: one entry, a slot of its own
USES = "synth/chunks/{index}/uses"  # sorted set: digest -> ms of its last use
SIZES = "synth/chunks/{index}/sizes"  # hash: digest -> bytes of its entry
TOTAL = "synth/chunks/{index}/bytes"  # string: the bytes the index counts
# An entry's expiry, renewed by each hit: a safety net for an entry its index lost (a worker that
# died between an eviction and the entry's delete), not the eviction (that is by use, above).
ENTRY_TTL_MS = 7 * 24 * 3600 * 1000
# The stored form; a change of it (or of what goes into the key) is a new version: old entries miss.
FORMAT = "1"

# KEYS: USES, SIZES, TOTAL. ARGV: digest, its bytes, now (ms), the budget. Counts the entry in,
# then pops the least recently used past the budget; returns {bytes held, evicted digests...}.
KEEP = """
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then redis.call('DECRBY', KEYS[3], old) end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
local total = redis.call('INCRBY', KEYS[3], ARGV[2])
local out = {total}
while total > tonumber(ARGV[4]) do
  local popped = redis.call('ZPOPMIN', KEYS[1])
  if #popped == 0 then break end
  total = redis.call('DECRBY', KEYS[3], redis.call('HGET', KEYS[2], popped[1]) or 0)
  redis.call('HDEL', KEYS[2], popped[1])
  out[1] = total
  out[#out + 1] = popped[1]
end
return out
"""


class Hit(msgspec.Struct, array_like=True):
    """An entry, as stored and as a lookup finds it."""

    pcm: bytes  # float32 samples, as the model gave them
    words: list[Word]
    model_s: float  # the model's time for it: what a hit saves

    def output(self) -> tuple[np.ndarray, list[Word]]:
        """The chunk as the model gave it (what the dispatcher reads in place of the model)."""
        return np.frombuffer(self.pcm, dtype=np.float32), self.words


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Hit).decode


def model_tag(synth: Synthesizer) -> str:
    """The model and backend a chunk's audio depends on (a backend's ``name``: onnx, torch-cuda)."""
    return f"kokoro-82m-v1.0/{synth.name}"


def chunk_key(model: str, text: str, voice: str, speed: float, ahead: str, behind: str) -> str:
    """The entry's key: a digest of what the model is fed for the chunk."""
    fed = msgspec.msgpack.encode((FORMAT, model, text, voice, round(speed, 4), ahead, behind))
    return f"{ENTRY_PREFIX}{{{hashlib.blake2b(fed, digest_size=16).hexdigest()}}}"


def digest_of(key: str) -> str:
    return key[len(ENTRY_PREFIX) + 1 : -1]


class ChunkCache:
    """Lookups before the model, keeps after it; a Redis error is a miss (the model reads the
    chunk) or a chunk not kept, never a failed cast."""

    def __init__(self, redis: Redis, budget: int) -> None:
        self.redis, self.budget = redis, budget
        self._keep = redis.register_script(KEEP)
        self.held = 0  # bytes the index counted at this worker's last keep

    @property
    def on(self) -> bool:
        return self.budget > 0

    async def get(self, key: str) -> Hit | None:
        """The entry at ``key``, its use noted; None for a miss (asked only while ``on``)."""
        try:
            raw = await self.redis.getex(key, px=ENTRY_TTL_MS)
            if not isinstance(raw, bytes):  # a miss (the worker's Redis gives bytes)
                return None
            await self.redis.zadd(USES, {digest_of(key): now_ms()}, xx=True)
        except RedisError as exc:
            log.warning("chunk cache lookup failed (%r): the model reads the chunk", exc)
            return None
        return _decode(raw)

    async def put(self, key: str, pcm: np.ndarray, words: list[Word], model_s: float) -> None:
        """Keep a chunk the model made: counted in the index first (evicting past the budget),
        then stored, so a worker that dies between the two leaves an index entry without bytes,
        never bytes without an index entry."""
        if not self.on:
            return
        body = _encode(Hit(np.ascontiguousarray(pcm, dtype=np.float32).tobytes(), list(words), model_s))
        try:
            out = await self._keep(keys=[USES, SIZES, TOTAL], args=[digest_of(key), len(body), now_ms(), self.budget])
            self.held = int(out[0])
            evicted = {ENTRY_PREFIX + "{" + decoded(d) + "}" for d in out[1:]}
            if key not in evicted:  # larger than the whole budget: not kept
                await self.redis.set(key, body, px=ENTRY_TTL_MS)
            for gone in evicted:  # one key a call: each in its own slot on a cluster
                await self.redis.delete(gone)
        except RedisError as exc:
            log.warning("chunk cache keep failed (%r): the chunk is not kept", exc)
