"""``python -m synth``: settings from the environment, logging, run until SIGTERM."""

from __future__ import annotations

from servicekit import run, setup_logging

from .app import create_app, serving
from .config import Config


def main() -> None:
    cfg = Config.from_env()
    setup_logging(cfg.log_level)
    run(create_app(cfg), serving(cfg))


if __name__ == "__main__":
    main()
