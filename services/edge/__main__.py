"""``python -m edge``: settings from the environment, logging, serve."""

from __future__ import annotations

import logging

from aiohttp import web

from servicekit import setup_logging

from .app import create_app
from .config import Config

log = logging.getLogger("edge")


def main() -> None:
    cfg = Config.from_env()
    setup_logging(cfg.log_level)
    # handler_cancellation: a client that leaves frees its stream slot and listener at once,
    # not at the next heartbeat
    web.run_app(create_app(cfg), host=cfg.host, port=cfg.port, shutdown_timeout=cfg.shutdown_timeout_s,
                handler_cancellation=True, access_log=None,
                print=lambda _: log.info("edge ready on http://%s:%d", cfg.host, cfg.port))


if __name__ == "__main__":
    main()
