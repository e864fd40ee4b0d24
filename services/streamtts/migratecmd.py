"""``streamtts migrate-keys``: move a Redis's data written before lanes to the lane layout.

    streamtts migrate-keys [--redis-url URL]     (default $REDIS_URL)

``streamtts up`` does the same at every start; compose and k3s operators run this once (as a
one-off container or Job) before the new services take traffic. See launcher.migrate_keys.
"""

from __future__ import annotations

import argparse
import asyncio

from redis.exceptions import RedisError

from servicekit import connect, redact
from servicekit.settings import REDIS_URL, raw_of

from .client import fail
from .config import environment
from .launcher import migrate_keys


def add_migrate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mig = commands.add_parser("migrate-keys", help="rename cast logs and catalog entries written before lanes "
                              "(pub/casts/<id>, catalog/<id>, cancel/<id>) to the lane layout, and durable "
                              "streams (ds/meta/<path> ...) to their families' names; idempotent")
    mig.add_argument("--redis-url", default=None, metavar="URL", help="the Redis to migrate (default $REDIS_URL)")
    mig.set_defaults(func=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    url = args.redis_url or raw_of(REDIS_URL, environment())
    if not url:
        return fail("give --redis-url or set REDIS_URL", 2)
    try:
        moved = asyncio.run(_migrate(url))
    except ConnectionError as exc:  # nothing answers there (the message names the URL)
        return fail(exc, 1)
    except RedisError as exc:  # e.g. a user that may not SCAN and RENAME
        return fail(f"{redact(url)}: {exc} (migrate-keys needs the admin user)", 1)
    print(f"{redact(url)}: {moved} key(s) moved to the lane layout")
    return 0


async def _migrate(url: str) -> int:
    async with await connect(url, attempts=3) as redis:
        return await migrate_keys(redis)
