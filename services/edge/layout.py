"""Edge's cache of cast layouts: the :class:`castlog.LogView` of each cast read lately.

The fold itself (state, playable layout, the check against a log that shrank) is castlog's
``LogReader``; what stays here is caching policy: how many casts edge keeps, which goes first,
and that simultaneous first requests share one read.
"""

from __future__ import annotations

from collections import OrderedDict

from castlog import Layout, LogReader, LogView


class LayoutCache:
    """The views of the casts read lately, growing or finished, least recently used dropped first.

    A cast whose log is empty (no such cast) is not kept. A first read in progress is kept
    aside until it ends, so simultaneous first requests share it; those are as many as the
    requests in flight, which the rate limits bound.
    """

    def __init__(self, size: int, reader: LogReader) -> None:
        self.size = size
        self.reader = reader
        self._items: OrderedDict[str, LogView] = OrderedDict()
        self._loading: dict[str, LogView] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, cast_id: object) -> bool:
        return cast_id in self._items

    async def get(self, cast_id: str) -> Layout:
        view = self._items.get(cast_id)
        if view is not None:
            self._items.move_to_end(cast_id)
            return await view.refresh()
        view = self._loading.get(cast_id)
        if view is None:
            view = self._loading[cast_id] = LogView(self.reader, cast_id)
        try:
            return await view.refresh()
        finally:
            if self._loading.get(cast_id) is view:  # the first to finish files it
                del self._loading[cast_id]
                if view.state.tail > 0:
                    self._keep(cast_id, view)

    def _keep(self, cast_id: str, view: LogView) -> None:
        self._items[cast_id] = view
        while len(self._items) > self.size:
            self._items.popitem(last=False)
