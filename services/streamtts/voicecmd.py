"""``streamtts voices install`` and the first start's voice install, with progress on the terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import voicepacks
from .client import say
from .config import Config
from .voicepacks import VoicePackError


def add_install_command(voice_commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``install`` under ``streamtts voices``."""
    install = voice_commands.add_parser("install", help="fetch Kokoro's voice packs (English and more), checked")
    install.add_argument("--from", dest="source", default="npm", metavar="npm|hub|DIR",
                         help=f"where from: npm ({voicepacks.NPM_PACKAGE}, default; without npm its tarball from "
                              f"the registry over HTTPS), the model hub "
                              f"({voicepacks.HUB_REPO}), or a folder of <id>.bin/.pt files")
    install.add_argument("--only", default=None, metavar="ID,…", help="these voices only (default: all 54)")
    install.add_argument("--state-dir", type=Path, default=Path(Config.from_env().state_dir),
                         help="install into <state dir>/kokoro/voices, or KOKORO_MODEL_DIR/voices when set")
    install.set_defaults(func=run_install)


def run_install(args: argparse.Namespace) -> int:
    """The ``voices install`` command: 0 when installed, 1 with a message saying what to do."""
    dest = voicepacks.model_dir(args.state_dir) / "voices"
    try:
        ids = voicepacks.choose(args.only)
        done = _install_with_progress(args.source, dest, ids)
    except VoicePackError as e:
        print(f"streamtts voices install: {e}", file=sys.stderr)
        return 1
    print(f"{len(done)} voices in {dest}; `streamtts up` reads them (KOKORO_MODEL_DIR={dest.parent})")
    return 0


def first_start(state_dir: Path) -> None:
    """Before `up` starts synth: install every pack when none is there (with npm, or from npm's
    registry over HTTPS without it). A failure only warns: the packaged Japanese voices still work."""
    dest = voicepacks.model_dir(state_dir) / "voices"
    if voicepacks.installed(dest):
        return
    try:
        _install_with_progress("npm", dest, voicepacks.choose(None))
    except VoicePackError as e:
        say(f"voice packs not installed ({e}); only the 5 packaged Japanese voices for now: run `streamtts "
            "voices install` later")


def _install_with_progress(source: str, dest: Path, ids: list[str]) -> list[str]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("voice packs"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"))
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("", total=len(ids))

        def report(what: str, done: int, total: int) -> None:
            progress.update(task, description=what, completed=done, total=total)

        return voicepacks.install(source, dest, ids, report)
