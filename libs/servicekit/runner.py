"""The ``__main__`` of every service: serve an app until SIGTERM or SIGINT, then stop gracefully.

The stop is aiohttp's: the site stops accepting, ``on_shutdown`` closes long-lived responses,
requests in flight get ``shutdown_timeout_s`` to finish, then ``cleanup_ctx`` runs backwards
(background tasks stop, work is handed back, Redis closes). A service whose real work is a task
of its own (synth's worker) tells where it is with ``until``: the process also stops when that
task ends, and exits 1 if it failed. Before it, ``setup_logging``: one log format for every process
of StreamTTS (the launcher, intake, edge, synth), whose lines interleave in one terminal under
``streamtts up`` and read the same in a pod's log.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from aiohttp import web

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# aiohttp's own loggers (access, server) speak at INFO about every request; quieter by default.
QUIET = ("aiohttp.access",)


def setup_logging(level: str | int = "INFO") -> None:
    """Configure the root logger once, in the one format; request lines only at DEBUG."""
    logging.basicConfig(level=level, format=FORMAT)
    numeric = logging.getLogger().getEffectiveLevel()
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING)


@dataclass(frozen=True)
class Serving:
    """Where and how one service listens."""

    name: str  # in the log: "<name> ready on http://…", "<name> stopped"
    host: str
    port: int
    shutdown_timeout_s: float = 60.0
    # a client that leaves cancels its handler (edge: frees its stream seat and listener at once)
    handler_cancellation: bool = False
    # stop when this task of the app ends, too (set up by a cleanup_ctx, read once it ran); its
    # failure exits 1
    until: Callable[[web.Application], asyncio.Task[Any]] | None = None
    # leave with os._exit once every write is awaited: an inference thread still running must
    # not hold the exit (synth)
    hard_exit: bool = False
    # a Unix socket to listen on instead of host:port: only who may open its folder reaches it
    # (``streamtts up``'s proxy), and FORWARDED_ALLOW_IPS=unix believes that one alone
    path: str = ""


def main(service: str) -> NoReturn:
    """``python -m <service>``: its ``Config`` from the environment, logging, then its app served
    (``<service>.app``'s ``create_app`` and ``serving``) until SIGTERM."""
    app = importlib.import_module(f"{service}.app")
    cfg = importlib.import_module(f"{service}.config").Config.from_env()
    setup_logging(cfg.log_level)
    run(app.create_app(cfg), app.serving(cfg))


def run(app: web.Application, serving: Serving) -> NoReturn:
    """Serve ``app`` until a stop signal (or ``serving.until`` ends); exit with its status."""
    code = asyncio.run(serve(app, serving))
    if serving.hard_exit:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


async def serve(app: web.Application, serving: Serving) -> int:
    """Serve until a stop signal or until ``serving.until`` ends; the process's exit status."""
    # the handlers go in before the port opens: a SIGTERM sent as soon as the service answers
    # (an orchestrator's stop right after its probe) stops it gracefully, never by the default
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=serving.shutdown_timeout_s,
                               handler_cancellation=serving.handler_cancellation)
        await runner.setup()
        task = serving.until(app) if serving.until is not None else None
        try:
            site = web.UnixSite(runner, serving.path) if serving.path else web.TCPSite(runner, serving.host, serving.port)
            await site.start()
            log.info("%s ready on %s", serving.name, site.name)
            await stop_or(stop, task)
            log.info("%s stopping", serving.name)
        finally:
            await runner.cleanup()
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
    log.info("%s stopped", serving.name)
    if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
        log.error("%s failed", serving.name, exc_info=task.exception())
        return 1
    return 0


async def stop_or(stop: asyncio.Event, task: asyncio.Task[Any] | None) -> None:
    """Wait for ``stop`` (SIGTERM or SIGINT), or for ``task`` to end."""
    waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(stop.wait())}
    if task is not None:
        waiters.add(task)
    _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in pending - {task}:
        waiter.cancel()
