"""Deleting a cast at the admin's word, through a worker: intake asks, synth deletes.

Intake's Redis user may not delete casts (a flaw in the public service must not reach every
cast's keys). The admin's ``DELETE /api/casts/{id}`` (the admin token checked by intake) adds a
:class:`~castlog.streams.DeleteRequest` to ``deletes``, the one thing intake may do with that
stream; every worker follows it (with ``cancels``, in one blocking read), and carries out
a request only when its proof is the HMAC of the cast id under the admin token the worker holds
(STREAMTTS_ADMIN_TOKEN, the same in both): a request intake forged without the token deletes
nothing. The delete itself is the archive's one script (:func:`castlog.archive.delete`: the log,
the catalog and the played mark, the archived blob trashed), idempotent, so that two workers
carrying out one request delete once.
"""

from __future__ import annotations

import hashlib
import hmac

from redis.asyncio import Redis

from .keys import DELETES, is_cast_id
from .streams import DeleteRequest, encode

# Entries kept in `deletes` (approximately): workers read it as it grows, never its history.
DELETES_MAXLEN = 1_000


def delete_proof(token: str, cast_id: str) -> str:
    """What shows that the admin asked: the HMAC-SHA256 (hex) of the cast id under the token."""
    message = b"delete\x00" + cast_id.encode()
    return hmac.new(token.encode("utf-8", "surrogatepass"), message, hashlib.sha256).hexdigest()


def proven(request: DeleteRequest, token: str | None) -> bool:
    """Whether ``request`` comes with the admin token's proof (constant time); never without a token."""
    return bool(token) and is_cast_id(request.id) and hmac.compare_digest(
        delete_proof(token or "", request.id), request.proof)


async def request_delete(redis: Redis, cast_id: str, token: str) -> None:
    """Ask the workers to delete ``cast_id``, with the proof ``token`` (the admin's) gives."""
    entry = encode(DeleteRequest(id=cast_id, proof=delete_proof(token, cast_id)))
    await redis.xadd(DELETES, entry, maxlen=DELETES_MAXLEN, approximate=True)  # type: ignore[arg-type]

