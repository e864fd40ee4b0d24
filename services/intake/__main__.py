"""`python -m intake`: settings from the environment, logging, serve until SIGTERM."""

from __future__ import annotations

import logging

from .app import run
from .config import Config


def main() -> None:
    cfg = Config.from_env()
    logging.basicConfig(level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(cfg)


if __name__ == "__main__":
    main()
