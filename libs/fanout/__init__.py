"""fanout: one blocked read per process, however many follow: the cast logs' fan-out engine.

``tail.py`` is a process's one shared tail (one blocking XREAD for every cast followed, then each
record handed to its followers, the waiters of other streams woken); ``listener.py`` one response
following one cast (by offset up to the end, then the tail's records; it knows the tail only as
a ``Hub``); ``items.py`` the records built once for every listener (their JSON and SSE frames);
``blocking.py`` a blocked read that its owner wakes through its own wake stream, and
``stop_tasks``; ``slotreads.py`` one such read per hash slot on a Redis Cluster;
``waiters.py`` the keys the tail wakes someone for.

Above castlog (it reads the cast log through castlog's keys, records, marks and ``LogReader``) and
servicekit (an Item's SSE frame is ``servicekit.sse``'s); neither imports it.
"""

from .blocking import BlockingRead, stop_tasks
from .items import ITEM_CACHE_BYTES, ItemCache
from .listener import Item, Listener
from .slotreads import SlotReads, choose_reads
from .tail import LISTENER_QUEUE, Tail, TailMetrics

__all__ = [
    "ITEM_CACHE_BYTES", "LISTENER_QUEUE", "BlockingRead", "Item", "ItemCache", "Listener", "SlotReads", "Tail",
    "TailMetrics", "stop_tasks", "choose_reads",
]
