"""The chunks of an open cast's text as it grows: castlog's one splitter, fed fragment by fragment.

``castlog.Chunker`` gives exactly the batch splitter's chunks however the text is cut into
fragments. A flush (the client's ``flush``, or the close) ends the pending sentence as a line
break would; the numbering, and so the ramp of chunk lengths, goes on after it.
"""

from __future__ import annotations

from castlog import Chunker


class LiveChunks:
    """Every chunk cut so far (``chunks``), grown by :meth:`feed` and :meth:`flush`."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self._chunker = Chunker()

    def feed(self, text: str) -> list[str]:
        new = self._chunker.feed(text)
        self.chunks.extend(new)
        return new

    @property
    def continued(self) -> list[bool]:
        """Per chunk: whether it goes on with the sentence of the chunk before (see Chunker)."""
        return self._chunker.continued

    @property
    def pending(self) -> bool:
        """Text has come that is in no chunk yet (a sentence being typed)."""
        return bool(self._chunker.pending.strip())

    def flush(self) -> list[str]:
        new = self._chunker.flush()
        self.chunks.extend(new)
        return new
