"""chunking: text -> a cast's chunks, the one splitter (pure Python, no model, no Redis).

``splitter.py`` finds the sentences and gives the chunks (``split_text``, ``count_chunks``, the
incremental ``Chunker``); ``cuts.py`` cuts a sentence too long, or a first sentence, where a
listener would pause; ``phrases.py`` the English function words those cuts lean on;
``textsteps.py`` counts the characters looked at (the splitter stays linear in its text).

intake plans ``meta.sentences`` with it and synth synthesizes with it, so both agree. It imports
only the standard library; castlog does not import it.
"""

from .splitter import FIRST_CHUNK_CHARS, MAX_CHUNK_CHARS, MAX_PHONEMES, Chunker, count_chunks, split_text

__all__ = ["FIRST_CHUNK_CHARS", "MAX_CHUNK_CHARS", "MAX_PHONEMES", "Chunker", "count_chunks", "split_text"]
