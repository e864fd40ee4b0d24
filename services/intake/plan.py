"""meta.sentences: the splitter's chunk count for a text, remembered for recently seen casts.

Planning is the costliest CPU step of a submit (about 0.1 ms for a page, tens of milliseconds for
a 100 000-character text, linear in it whatever the text: see chunking.textsteps); a repeat of a
cast, the common case the content id exists for, skips it. A text longer than a few lines is
planned in a worker thread, so that the event loop serves other clients meanwhile, and under a
budget: a text whose planning takes longer is refused (422) rather than waited for.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from chunking import count_chunks

from .config import PLAN_BUDGET_S
from .validate import Refusal

# Casts whose plan is remembered; an entry is an id and an int, about 100 bytes.
PLAN_CACHE_SIZE = 4096
# A text this long is planned in a worker thread: the splitter's worst case for it (a run of
# stops, a stopless line) stalls the loop about a millisecond, less than the hop costs.
OFFLOAD_PLAN_CHARS = 1_000


class Planner:
    def __init__(self, size: int = PLAN_CACHE_SIZE, budget_s: float = PLAN_BUDGET_S) -> None:
        self._size, self._budget_s = size, budget_s
        self._plans: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._plans)

    def __contains__(self, cast_id: object) -> bool:
        return cast_id in self._plans

    async def sentences(self, cast_id: str, text: str) -> int:
        """The chunk count of ``text``, the text of cast ``cast_id`` (its content id); a
        :class:`Refusal` (422) when planning it takes longer than the budget."""
        known = self._plans.get(cast_id)
        if known is not None:
            self._plans.move_to_end(cast_id)
            return known
        if len(text) < OFFLOAD_PLAN_CHARS:
            count = count_chunks(text)
        else:
            count = await self._plan_off_loop(text)
        self._plans[cast_id] = count
        if len(self._plans) > self._size:
            self._plans.popitem(last=False)
        return count

    async def _plan_off_loop(self, text: str) -> int:
        planning = asyncio.ensure_future(asyncio.to_thread(count_chunks, text))
        try:
            # shield: a thread cannot be stopped; past the budget the submit is answered and the
            # plan finishes unobserved (its result is dropped).
            return await asyncio.wait_for(asyncio.shield(planning), self._budget_s)
        except asyncio.TimeoutError:
            raise Refusal(422, "text_too_complex", f"planning the text took longer than {self._budget_s:g} s "
                          "(INTAKE_PLAN_BUDGET_S); split it into several shorter casts") from None
