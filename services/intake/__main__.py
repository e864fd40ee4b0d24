"""`python -m intake`: settings from the environment, logging, serve until SIGTERM."""

from __future__ import annotations

from servicekit import setup_logging

from .app import run
from .config import Config


def main() -> None:
    cfg = Config.from_env()
    setup_logging(cfg.log_level)
    run(cfg)


if __name__ == "__main__":
    main()
