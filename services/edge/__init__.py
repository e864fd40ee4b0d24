"""edge: the public read path of StreamTTS (replay, live SSE from one shared tail, MP3, pages)."""

from __future__ import annotations

from .app import create_app, serving
from .config import Config

__all__ = ["Config", "create_app", "serving"]
