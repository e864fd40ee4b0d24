"""meta.sentences: the splitter's chunk count for a text, remembered for recently seen casts.

Planning is the costliest CPU step of a submit (about 0.1 ms for a page, milliseconds for a book
chapter); a repeat of a cast, the common case the content id exists for, skips it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from castlog import count_chunks

# Casts whose plan is remembered; an entry is an id and an int, about 100 bytes.
PLAN_CACHE_SIZE = 4096
# Planning a text this long takes milliseconds: do it off the event loop so others keep going.
OFFLOAD_PLAN_CHARS = 20_000


class Planner:
    def __init__(self, size: int = PLAN_CACHE_SIZE) -> None:
        self._size = size
        self._plans: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._plans)

    def __contains__(self, cast_id: object) -> bool:
        return cast_id in self._plans

    async def sentences(self, cast_id: str, text: str) -> int:
        """The chunk count of ``text``, the text of cast ``cast_id`` (its content id)."""
        known = self._plans.get(cast_id)
        if known is not None:
            self._plans.move_to_end(cast_id)
            return known
        if len(text) < OFFLOAD_PLAN_CHARS:
            count = count_chunks(text)
        else:
            count = await asyncio.get_running_loop().run_in_executor(None, count_chunks, text)
        self._plans[cast_id] = count
        if len(self._plans) > self._size:
            self._plans.popitem(last=False)
        return count
