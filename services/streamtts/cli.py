"""The ``streamtts`` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from castlog import ConfigError, Settings

from . import voicecmd
from .launcher import SERVICES, Launcher, Options
from .proxy import MAX_BODY_BYTES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamtts", description="StreamTTS: streaming text-to-speech on Kokoro-82M")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="run the whole system locally on one origin")
    up.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    up.add_argument("--port", type=int, default=8080, help="port to serve on (default 8080)")
    up.add_argument("--state-dir", type=Path, default=Path(os.environ.get("STREAMTTS_STATE_DIR", ".state")),
                    help="where the embedded Redis keeps its AOF and synth its model cache (default .state)")
    up.add_argument("--only", default=",".join(SERVICES),
                    help=f"comma-separated services to run (default {','.join(SERVICES)})")
    up.add_argument("--no-voice-install", action="store_true", help="do not fetch voice packs on the first start")
    voices = commands.add_parser("voices", help="Kokoro's voice packs")
    voicecmd.add_install_command(voices.add_subparsers(dest="voices_command", required=True))
    args = parser.parse_args(argv)
    if args.command == "voices":
        return voicecmd.run_install(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    services = tuple(s for s in args.only.split(",") if s)
    unknown = set(services) - set(SERVICES)
    if unknown:
        parser.error(f"unknown service(s) {sorted(unknown)}; choose from {', '.join(SERVICES)}")
    env = Settings(os.environ)
    try:
        max_body = env.get("INTAKE_MAX_BODY_BYTES", int, MAX_BODY_BYTES)
    except ConfigError as exc:
        parser.error(str(exc))
    if "synth" in services and not args.no_voice_install:
        voicecmd.first_start(args.state_dir)
    options = Options(host=args.host, port=args.port, state_dir=args.state_dir,
                      redis_url=os.environ.get("REDIS_URL") or None, services=services, max_body_bytes=max_body)
    try:
        return asyncio.run(Launcher(options).run())
    except (ConnectionError, RuntimeError) as exc:
        print(f"streamtts: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
