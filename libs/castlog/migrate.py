"""Moving a single Redis's data written before lanes (keys.py) to the lane layout.

Before #24 a cast's log was ``pub/casts/<id>``, its catalog entry ``catalog/<id>`` and its cancel
flag ``cancel/<id>``; now they are ``pub/casts/{lN}/<id>``, ``catalog/{lN}/<id>`` and
``cancel/{lN}/<id>``. :func:`migrate_to_lanes` RENAMEs each old
key to its new name (RENAMENX: a key already under the new name is kept, the old one left for an
operator to look at). It is idempotent and cheap when there is nothing to move (one SCAN), so
``streamtts up`` runs it at every start and ``streamtts migrate-keys`` runs it on any REDIS_URL.
Jobs waiting in ``jobs`` and ``jobs/live`` keep their names: workers still read those streams
(castlog/lanes.py moves the lanes' new jobs into them), so an old job is taken as before.

A cluster never held old keys (old code cannot run on one: CROSSSLOT), and RENAME across slots
is refused there; data moved from a single Redis into a cluster goes through this first.

``streamtts migrate-keys`` and ``up`` run this step, then the durable streams' (the
``durablestreams`` library's ``migrate_durable_keys``).
"""

from __future__ import annotations

from redis.asyncio import Redis

from . import keys

SCAN_COUNT = 500


async def migrate_to_lanes(redis: Redis) -> int:
    """Rename every pre-lane cast log, catalog entry and cancel flag; returns how many keys moved."""
    moved = 0
    renames = ((keys.CAST_PREFIX, keys.cast_key), (keys.CATALOG_PREFIX, keys.catalog_key),
               (keys.CANCEL_PREFIX, keys.cancel_key))
    for prefix, new_name in renames:
        found: list[tuple[str, str]] = []
        async for raw in redis.scan_iter(match=prefix + "*", count=SCAN_COUNT):
            old = keys.decoded(raw)
            rest = old[len(prefix) :]
            if keys.is_cast_id(rest):  # an old name; a new one has its lane tag before the id
                found.append((old, new_name(rest)))
        for old, new in found:  # not while scanning: a rename during SCAN may show a key twice
            moved += int(await redis.renamenx(old, new))
    return moved

