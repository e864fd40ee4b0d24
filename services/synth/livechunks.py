"""The chunks of an open cast's text as it grows: the one splitter, fed fragment by fragment.

``LiveChunks`` wraps castlog's incremental splitter (``feed(text) -> complete chunks``,
``flush() -> the rest``), which gives exactly the batch splitter's chunks however the text is
cut. A flush in the middle of a text (the client's ``flush``) ends the current run; the text
after it starts a new run, whose first chunk is short again (a new utterance after a pause).
"""

from __future__ import annotations

from castlog.splitter import FIRST_CHUNK_CHARS, MAX_CHUNK_CHARS, _cut, _limit, _sentences


class _Incremental:
    """Stand-in for castlog's incremental splitter until it lands: the batch splitter's own
    steps, re-run over the text so far; a sentence is final once text follows it."""

    def __init__(self) -> None:
        self._text = ""
        self._sentences_out = 0
        self._chunks_out = 0

    def feed(self, text: str) -> list[str]:
        self._text += text
        return self._emit(_sentences(self._text)[:-1])

    def flush(self) -> list[str]:
        return self._emit(_sentences(self._text))

    def _emit(self, sentences: list[str]) -> list[str]:
        out: list[str] = []
        for sentence in sentences[self._sentences_out :]:
            while sentence:
                head, sentence = _cut(sentence, _limit(self._chunks_out, FIRST_CHUNK_CHARS, MAX_CHUNK_CHARS))
                out.append(head)
                self._chunks_out += 1
        self._sentences_out = max(self._sentences_out, len(sentences))
        return out


class LiveChunks:
    """Every chunk cut so far (``chunks``), grown by :meth:`feed` and :meth:`flush`."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self._run = _Incremental()

    def feed(self, text: str) -> list[str]:
        new = self._run.feed(text)
        self.chunks.extend(new)
        return new

    def flush(self) -> list[str]:
        new = self._run.flush()
        self.chunks.extend(new)
        self._run = _Incremental()
        return new
