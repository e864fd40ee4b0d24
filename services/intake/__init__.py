"""intake: turns a request into a claimed cast and one job, or a clear refusal.

Two rooms: this package's modules are the claim path (submit, live text, validation) and nothing
else; ``speech/`` streams and converts casts' audio (``/v1/audio/speech``, the live WebSocket)
through the claim path's public pieces, and only ``app.py`` imports it, to wire its routes.
"""

from .app import create_app, serving
from .config import Config

__all__ = ["Config", "create_app", "serving"]
