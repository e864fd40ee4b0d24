"""The durable streams' key names, which keep every script's keys in one hash slot, and the
migration of keys written under the names before them.

A stream's keys carry its *family* as their hash tag: ``ds/{<family>}/meta/<path>``,
``.../log/<path>``, ``.../prod/<path>``. A stream created without a source is its own family;
a fork joins its source's, so that the create script (the fork's keys and its source's meta), the
release walk up a fork chain and every other script touch one slot of a Redis Cluster. A fork
that lives away from its own path's slot is found through its link ``ds/{<path>}/family`` (the
family's name), which sits in the path's own slot beside the keys it would have at home, so that
the script that claims a path for a family sees both at once. A link lives as long as the stream
it leads to: it takes that stream's expiry, and goes when the stream goes (deleted, lapsed), so
that Redis holds links for what exists, not for every fork path ever asked for. A process keeps
the links it has read, and checks a kept one again when the stream is missing where it leads
(``streams.py``). A path has a stream at home or a link, never both.
Stream paths hold no braces (``streams.valid_path``), so the tag is the whole family name.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import cast

from redis.asyncio import Redis

from castlog.keys import decoded

DS_PREFIX = "ds/"
# Links read, kept per process (a few hundred bytes each); past this the oldest is read again.
MAX_LINKS_KEPT = 10_000
# The names before families (one Redis only): ds/meta/<path>, ds/log/<path>, ds/prod/<path>.
OLD_META_PREFIX, OLD_LOG_PREFIX, OLD_PRODUCERS_PREFIX = "ds/meta/", "ds/log/", "ds/prod/"
SCAN_BATCH = 500


def _tagged(family: str, kind: str, path: str) -> str:
    return f"{DS_PREFIX}{{{family}}}/{kind}/{path}"


def meta_key(path: str, family: str | None = None) -> str:
    return _tagged(family or path, "meta", path)


def log_key(path: str, family: str | None = None) -> str:
    return _tagged(family or path, "log", path)


def producers_key(path: str, family: str | None = None) -> str:
    return _tagged(family or path, "prod", path)


def link_key(path: str) -> str:
    """Where a fork that lives in another family names it (in the path's own slot)."""
    return f"{DS_PREFIX}{{{path}}}/family"


def keys_of(path: str, family: str | None = None) -> list[str]:
    """Every script's first three keys: the stream's meta, log and producers."""
    return [meta_key(path, family), log_key(path, family), producers_key(path, family)]


class Links:
    """The links this process has read: path -> family, the oldest forgotten first."""

    def __init__(self, size: int = MAX_LINKS_KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[str, str] = OrderedDict()

    def family(self, path: str) -> str:
        """Where ``path``'s keys are as far as this process knows (its own, unless linked)."""
        found = self._kept.get(path)
        if found is None:
            return path
        self._kept.move_to_end(path)
        return found

    def forget(self, path: str) -> None:
        """A kept link led to no stream: the link went, or leads elsewhere now."""
        self._kept.pop(path, None)

    def keep(self, path: str, family: str) -> None:
        if family == path:
            return
        self._kept[path] = family
        self._kept.move_to_end(path)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)

    async def read(self, redis: Redis, path: str) -> str | None:
        """The family ``path`` is linked to in Redis (kept from now on), or None."""
        raw = cast("bytes | None", await redis.get(link_key(path)))
        if raw is None:
            return None
        family = raw.decode()
        self.keep(path, family)
        return family


async def migrate_durable_keys(redis: Redis) -> int:
    """Rename every stream kept under the old names (``ds/meta/<path>`` ...) to its family's
    names, linking the forks that leave their own slot; the number of streams moved. For one
    Redis (the old names never ran on a cluster), before the services start on the new code, and
    idempotent: a second run finds nothing. The durable streams' step of ``streamtts migrate-keys``."""
    sources: dict[str, str | None] = {}
    async for raw in redis.scan_iter(match=OLD_META_PREFIX + "*", count=SCAN_BATCH):
        key = decoded(raw)
        source = cast("bytes | None", await redis.hget(key, "src"))
        sources[key[len(OLD_META_PREFIX):]] = source.decode() if source else None
    for path in sources:
        family = _root(path, sources)
        pipe = redis.pipeline(transaction=True)
        for old, new in ((OLD_META_PREFIX, meta_key(path, family)), (OLD_LOG_PREFIX, log_key(path, family)),
                         (OLD_PRODUCERS_PREFIX, producers_key(path, family))):
            if await redis.exists(old + path):
                pipe.rename(old + path, new)  # keeps the key's expiry (the lapsed-stream backstop)
        if family != path:
            pipe.set(link_key(path), family)
        await pipe.execute()
    return len(sources)


def _root(path: str, sources: dict[str, str | None]) -> str:
    """The first stream of ``path``'s fork chain (as far as the chain is still there)."""
    seen = {path}
    while (source := sources.get(path)) is not None and source in sources and source not in seen:
        seen.add(source)
        path = source
    return path
