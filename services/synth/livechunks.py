"""The chunks of an open cast's text as it grows: the one splitter (chunking), fed fragment by fragment.

``chunking.Chunker`` gives exactly the batch splitter's chunks however the text is cut into
fragments. A flush (the client's ``flush``, or the close) ends the pending sentence as a line
break would. The worker's ramp may cut a chunk further in place (ActiveCast.take_chunk): the
lists here are this cast's, the chunker's count is only the splitter's.
"""

from __future__ import annotations

from chunking import Chunker


class LiveChunks:
    """Every chunk cut so far (``chunks``), grown by :meth:`feed` and :meth:`flush`."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        # Per chunk: whether it goes on with the sentence of the chunk before (see Chunker).
        self.continued: list[bool] = []
        self._chunker = Chunker()

    def feed(self, text: str) -> list[str]:
        return self._add(self._chunker.feed(text))

    def _add(self, new: list[str]) -> list[str]:
        self.chunks.extend(new)
        self.continued.extend(self._chunker.continued[len(self._chunker.continued) - len(new) :])
        return new

    @property
    def pending(self) -> bool:
        """Text has come that is in no chunk yet (a sentence being typed)."""
        return bool(self._chunker.pending.strip())

    def flush(self) -> list[str]:
        return self._add(self._chunker.flush())
