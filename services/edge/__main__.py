"""``python -m edge``: settings from the environment, logging, serve."""

from __future__ import annotations

import logging

from aiohttp import web

from .app import create_app
from .config import Config


def main() -> None:
    cfg = Config.from_env()
    logging.basicConfig(level=cfg.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # handler_cancellation: a client that leaves frees its stream slot and listener at once,
    # not at the next heartbeat
    web.run_app(create_app(cfg), host=cfg.host, port=cfg.port, shutdown_timeout=cfg.shutdown_timeout_s,
                handler_cancellation=True, access_log=None, print=None)


if __name__ == "__main__":
    main()
