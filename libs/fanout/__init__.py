"""fanout: one blocked read per process, however many follow: the cast logs' fan-out engine.

``streamtail.py`` is a process's one stream loop (one blocking XREAD for every key its
subscribers name, woken through its own wake stream); ``tail.py`` the casts' subscriber (each
record handed to the casts' listeners) and ``waiters.py`` the other streams' (their waiters
woken); ``listener.py`` one response following one cast (by offset up to the end, then the tail's
records; it knows the tail only as a ``Hub``, and an ``Item`` is one record built once for every
listener: its JSON and SSE frame); ``blocking.py`` a blocked read that its owner wakes through
its own wake stream, and ``stop_tasks``; ``slotreads.py`` one such read per hash slot on a Redis
Cluster.

Above castlog (it reads the cast log through castlog's keys, records, marks and ``LogReader``) and
servicekit (an Item's SSE frame is ``servicekit.sse``'s); neither imports it.
"""

from .blocking import stop_tasks
from .listener import Item, Listener
from .slotreads import SlotReads
from .streamtail import StreamTail, Subscriber
from .tail import LISTENER_QUEUE, Tail, TailMetrics

__all__ = [
    "LISTENER_QUEUE", "Item", "Listener", "SlotReads", "StreamTail", "Subscriber", "Tail", "TailMetrics", "stop_tasks",
]
