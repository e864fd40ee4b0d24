"""durablestreams: the Durable Streams protocol (``/v1/stream/*``) on Redis Streams, a library of
its own beside the cast log.

``streams.py`` is the storage side (a stream's meta, log and producers; reads by offset, forks),
``scripts.py`` its Lua, ``keys.py`` its key names by family (one hash slot per family) and their
migration; ``protocol.py`` the HTTP vocabulary edge's reads and intake's writes share (headers,
cursors, ETags, SSE events, refusals), ``openapi.py`` the routes' part of the OpenAPI document.

Above castlog (its Lua clock) and servicekit (``Refusal``, the OpenAPI helpers); castlog and
servicekit never import it. A follower of a stream's log waits on its process's one shared tail
(``fanout.Tail.wait``).
"""

from .streams import DurableStreams

__all__ = ["DurableStreams"]
