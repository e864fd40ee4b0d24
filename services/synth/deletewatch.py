"""The admin's deletes, carried out: ``deletes`` read every SYNTH_POLL_S by the whole worker.

Intake checks the admin token and adds a request; its Redis user cannot delete a cast itself.
Here a request is carried out only when its proof is the admin token's (``castlog.proven``:
STREAMTTS_ADMIN_TOKEN, the same as intake's), so a request added without the token (a flaw
in the public service, anyone else who may add to the stream) deletes nothing and is logged.
Every worker carries out each request; the delete is idempotent, so the cast goes once.
"""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import DeleteRequest, archive, last_delete, proven, read_deletes

log = logging.getLogger(__name__)

# Requests read per round trip.
DELETE_BATCH = 64


class DeleteWatch:
    """Follows ``deletes`` (``token``: the admin's; None: every request is refused)."""

    def __init__(self, redis: Redis, token: str | None, poll_s: float) -> None:
        self.redis, self.token, self.poll_s = redis, token, poll_s
        self.after: str | None = None  # the last request read; None until the watch has begun

    async def run(self) -> None:
        while True:
            try:
                if self.after is None:
                    # Requests from before this worker ran were carried out, or answered 202 (ask
                    # again): an old one is never carried out late, after the cast was made again.
                    self.after = await last_delete(self.redis)
                # A short read, then a sleep, not a blocking read: deletes are rare (intake waits
                # seconds for one), and a task cancelled in a blocked XREAD can hang redis-py's
                # client (it swallows the first cancel now and then), so the worker's stop could.
                after, requests = await read_deletes(self.redis, self.after, count=DELETE_BATCH)
                for request in requests:
                    await self.carry_out(request)
                # Past a batch only once it is carried out: one that a Redis error cut short is
                # read again (a delete is idempotent), never skipped.
                self.after = after
                if len(requests) < DELETE_BATCH:
                    await asyncio.sleep(self.poll_s)
            except RedisError as exc:
                log.warning("delete watch: Redis error (%s); retrying", exc)
                await asyncio.sleep(self.poll_s)

    async def carry_out(self, request: DeleteRequest | None) -> bool:
        """Delete the cast the request names when the admin's proof comes with it."""
        if request is None or not proven(request, self.token):
            named = request.id[:32] if request is not None else "(malformed)"
            why = "no STREAMTTS_ADMIN_TOKEN here" if not self.token else "its proof is not the admin token's"
            log.warning("refused a request to delete cast %r: %s", named, why)
            return False
        deleted = await archive.delete(self.redis, request.id)
        log.info("cast %s deleted at the admin's request%s", request.id, "" if deleted else " (already gone)")
        return True
