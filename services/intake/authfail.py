"""Failed credentials, limited and counted: API keys, write tokens and the admin token.

Each failure of a client takes a token from its bucket ``rl/intake-auth/<client>`` (shared by
the replicas) and is counted in ``streamtts_intake_auth_failures_total``; once the bucket is
empty the client is refused 429 ``too_many_failures`` before any credential of its is compared
again (this process remembers the wait, as for submits: ``cooldown.py``), so guessing a key or a
cast's write token runs at INTAKE_AUTH_FAILURES_PER_MIN at most.
"""

from __future__ import annotations

from redis.asyncio import Redis

from castlog import INTAKE_AUTH_SCOPE, RateLimiter
from servicekit.keys import key_matches as key_matches  # its callers import it from here

from .cooldown import Cooldowns
from .metrics import Metrics
from .validate import Refusal

CREDENTIALS = ("api_key", "write_token", "admin_token")


def too_many(wait_s: int) -> Refusal:
    return Refusal(429, "too_many_failures", f"too many refused credentials from your address; retry in {wait_s} s",
                   {"Retry-After": str(wait_s)})


class AuthFailures:
    def __init__(self, redis: Redis, metrics: Metrics, per_min: int) -> None:
        self.limiter = RateLimiter(redis, INTAKE_AUTH_SCOPE, per_min / 60, per_min)
        self.cooldowns = Cooldowns()
        self.metrics = metrics

    def check(self, client: str) -> None:
        """Before a credential is compared: 429 while ``client`` must wait."""
        wait = self.cooldowns.wait_s(client)
        if wait:
            raise too_many(wait)

    async def failed(self, client: str, credential: str) -> None:
        """Count a refused credential; 429 (instead of the caller's 401) once the bucket is empty."""
        self.metrics.auth_failures.labels(credential).inc()
        asked_at = self.cooldowns.clock()
        verdict = await self.limiter.take(client)
        if not verdict.allowed:
            self.cooldowns.refused(client, asked_at, verdict)
            raise too_many(verdict.retry_after_s)
