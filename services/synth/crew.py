"""The crew: what the worker's parts share, built once by the worker and handed to each.

Admission, the synth loop, the appenders, the live feed and the outcomes each take the crew plus at
most two things of their own, so a newcomer reads one list of what a part can reach: the settings,
Redis and the stores over it, the casts in hand, the metrics, the clock and the model's measured speed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from castlog import CastStore, LiveStore, LogReader

from .config import SynthConfig
from .hand import Hand
from .metrics import SynthMetrics
from .scheduler import ModelSpeed


@dataclass(frozen=True)
class Crew:
    cfg: SynthConfig
    redis: Redis  # the consumer group's commands (:mod:`synth.jobs`) and the receipts
    store: CastStore  # every write of a cast log
    reader: LogReader  # every read of a cast log (admission recovers casts from theirs)
    live: LiveStore  # the open casts' text, in their catalogs
    hand: Hand  # the casts in hand, the two inboxes, the events the tasks wake each other with
    metrics: SynthMetrics
    clock: Callable[[], float]  # monotonic seconds: the schedule's, the leases', the feed's
    speed: ModelSpeed  # how fast the model is now: the schedule's first chunk, and the ramp's chunk lengths
