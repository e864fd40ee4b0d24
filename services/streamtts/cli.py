"""The ``streamtts`` command: ``up`` runs the system locally; ``say``, ``follow`` and ``voices``
talk to a running one over HTTP (``--url``, or ``STREAMTTS_URL``; default the local origin).

Each subcommand is a parser and a function ``(args) -> exit code``; ``voices`` has its own
subcommands (``voices list``, the default), so more (``voices install``) slot in beside it.
Exit codes: 0 done, 1 the cast ended in error, 2 usage, 3 the server cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from servicekit import ConfigError, setup_logging
from servicekit.metrics import project_version
from servicekit.settings import REDIS_URL, raw_of, value_of

from . import commands as client_commands
from . import migratecmd, statecmd, voicecmd
from .client import EXIT_INTERRUPTED, EXIT_USAGE, ClientError, fail
from .config import Config, environment
from .launcher import SERVICES, Launcher, Options, local_hosts, port_in_use
from .proxy import Limits
from .redisserver import ServerNotFound
from .serverchoice import ServerRefused


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamtts", description="StreamTTS: streaming text-to-speech on Kokoro-82M")
    parser.add_argument("--version", action="version", version=f"%(prog)s {project_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_up(commands)
    client_commands.add_all(commands)
    statecmd.add_state(commands)
    migratecmd.add_migrate(commands)
    return parser


def add_up(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = commands.add_parser("up", help="run the whole system locally on one origin")
    up.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    command = Config.from_env()
    up.add_argument("--port", type=int, default=command.port,
                    help="port to serve on (default $STREAMTTS_PORT, else 8080)")
    up.add_argument("--state-dir", type=Path, default=Path(command.state_dir),
                    help="where the embedded Redis keeps its AOF and synth its model cache (default .state)")
    up.add_argument("--wyoming-port", type=int, default=command.wyoming_port,
                    help="the Wyoming server's port for Home Assistant, on --host (default $STREAMTTS_WYOMING_PORT, "
                         "else 10210; 0: none)")
    statecmd.add_server_option(up)
    up.add_argument("--only", default=",".join(SERVICES),
                    help=f"comma-separated services to run (default {','.join(SERVICES)})")
    up.add_argument("--no-voice-install", action="store_true", help="do not fetch voice packs on the first start")
    up.add_argument("--log-level", default="INFO", type=str.upper,
                    help="the launcher's log level; DEBUG adds a line per request through the proxy")
    up.set_defaults(func=run_up, parser=up)


def run_up(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    setup_logging(args.log_level)
    services = tuple(s for s in args.only.split(",") if s)
    unknown = set(services) - set(SERVICES)
    if unknown:
        parser.error(f"unknown service(s) {sorted(unknown)}; choose from {', '.join(SERVICES)}")
    if port_in_use(args.host, args.port):
        return fail(f"port {args.port} is in use; pass --port", EXIT_USAGE)
    try:
        from intake.config import Config as IntakeConfig  # here: intake's package loads its audio tools

        # the proxy takes what intake takes, in its time
        limits = Limits(Config.from_env(), *(value_of(IntakeConfig, name, environment()) for name in
                                             ("max_body_bytes", "body_timeout_s", "live_max_message_bytes")))
        hosts = local_hosts(args.host, value_of(IntakeConfig, "allowed_hosts", environment()))
    except ConfigError as exc:
        parser.error(str(exc))
    state_dir = args.state_dir.expanduser().resolve()
    try:  # before anything starts: REDIS_URL, else the state dir's own server, or a refusal that says why
        redis = raw_of(REDIS_URL, environment()) or statecmd.server_for(state_dir, args.redis_server)
    except (ServerRefused, ServerNotFound) as exc:
        return fail(exc, 1)
    if "synth" in services and not args.no_voice_install:
        voicecmd.first_start(state_dir)
    options = Options(host=args.host, port=args.port, state_dir=state_dir, redis=redis, services=services,
                      limits=limits, access_log=args.log_level == "DEBUG", wyoming_port=args.wyoming_port, hosts=hosts)
    try:
        return asyncio.run(Launcher(options).run())
    except (ConnectionError, RuntimeError) as exc:
        return fail(exc, 1)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ClientError as exc:
        return fail(exc, exc.exit_code)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
