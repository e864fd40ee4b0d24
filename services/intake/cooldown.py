"""Clients the rate limiter just refused, remembered until their bucket can hold a token again.

The token is taken in the submit script, after the body is read and checked. A client told to
wait is refused here instead, before its body is read, until that wait is over: a flood from a
limited client costs no body reads, no planning and no Redis round trips. Replicas share the
bucket and can only empty it sooner, so this never refuses a request that Redis would allow.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from castlog import Verdict

# Refused clients remembered (about 150 bytes each); past this the oldest refusal is forgotten,
# which costs that client one more trip to Redis and nothing else.
MAX_CLIENTS = 10_000


class Cooldowns:
    def __init__(self, size: int = MAX_CLIENTS, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._size = size
        self._until: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._until)

    def wait_s(self, client: str) -> int:
        """Whole seconds ``client`` must still wait; 0 when it may try."""
        until = self._until.get(client)
        if until is None:
            return 0
        left = until - self.clock()
        if left <= 0:
            del self._until[client]
            return 0
        return max(1, math.ceil(left))

    def refused(self, client: str, asked_at: float, verdict: Verdict) -> None:
        """Remember a refusal of a request sent to Redis at ``asked_at`` (this clock): Redis
        decided later than that, so its wait counted from then ends no later than Redis's."""
        self._until[client] = asked_at + verdict.retry_after_ms / 1000
        self._until.move_to_end(client)
        while len(self._until) > self._size:
            self._until.popitem(last=False)
