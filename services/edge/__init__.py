"""edge: the public read path of StreamTTS (replay, SSE following from one shared tail, MP3, pages)."""

from __future__ import annotations

from .app import create_app, serving
from .config import Config

__all__ = ["Config", "create_app", "serving"]
