"""``python -m synth``: settings from the environment, logging, run until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from servicekit import setup_logging

from .app import serve
from .config import SynthConfig


def main() -> None:
    cfg = SynthConfig.from_env()
    setup_logging(cfg.log_level)
    code = asyncio.run(serve(cfg))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every write the worker owes is awaited by now; don't let an inference thread that is
    # still running hold the exit past SYNTH_GRACE_S.
    os._exit(code)


if __name__ == "__main__":
    main()
