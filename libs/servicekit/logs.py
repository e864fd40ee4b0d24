"""One log format for every process of StreamTTS (the launcher, intake, edge, synth): their
lines interleave in one terminal under ``streamtts up`` and read the same in a pod's log."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# aiohttp's own loggers (access, server) speak at INFO about every request; quieter by default.
QUIET = ("aiohttp.access",)


def setup_logging(level: str | int = "INFO") -> None:
    """Configure the root logger once, in the one format; request lines only at DEBUG."""
    logging.basicConfig(level=level, format=FORMAT)
    numeric = logging.getLogger().getEffectiveLevel()
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING)
