"""The client subcommands: ``say``, ``follow`` and ``voices`` (with ``voices list``).

They compose in a shell: ``say`` prints the cast's link alone on stdout (its status and the
progress bar go to stderr), ``-o -`` streams the MP3 to stdout instead (the link then goes to
stderr), and ``--json`` prints one JSON object per event on stdout (the cast, each record, the end).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack, closing
from pathlib import Path

from rich.console import Console
from rich.table import Table

from castlog import CastState

from . import completion, voicecmd
from .client import (
    EXIT_CAST_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Api,
    UsageError,
    split_link,
    voice_traits,
)
from .config import Config
from .follow import AudioSink, Mp3File, Mp3Stream, follow, print_json

STDOUT = "-"  # -o -: the MP3 to stdout


def server_options(default: str | None = None) -> argparse.ArgumentParser:
    """``--url``, shared by the client commands (a nested subcommand passes SUPPRESS, so that its
    default does not overwrite a --url given before it)."""
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", default=default,
                        help="the StreamTTS origin (default $STREAMTTS_URL, else http://127.0.0.1:8080)")
    server.add_argument("--api-key", default=default, metavar="KEY",
                        help="a key of the server's STREAMTTS_API_KEYS (default $STREAMTTS_API_KEY)")
    return server


def api_for(args: argparse.Namespace, origin: str | None = None) -> Api:
    """The origin asked for (else the link's, else STREAMTTS_URL's), with --api-key (else STREAMTTS_API_KEY)."""
    settings = Config.from_env()
    return Api(args.url or origin or settings.url, args.api_key or settings.api_key or None)


def output_options() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("-o", "--output", metavar="FILE",
                     help="where to write the MP3 (default <cast id>.mp3; - streams it to stdout)")
    out.add_argument("--json", action="store_true",
                     help="print one JSON object per event on stdout (the cast, each record, the end)")
    return out


def add_all(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    server, out = server_options(), output_options()
    add_say(commands, server, out)
    add_follow(commands, server, out)
    add_voices(commands, server)
    completion.add_completion(commands)


def add_say(commands: argparse._SubParsersAction[argparse.ArgumentParser], server: argparse.ArgumentParser,
            out: argparse.ArgumentParser) -> None:
    say = commands.add_parser("say", parents=[server, out], help="make a cast of a text and follow it to its end",
                              description="Submit TEXT (or -f FILE, or - for stdin), print its link on stdout, and "
                              "follow it as it is made, writing the MP3 as it arrives (-o - streams it to stdout).")
    say.add_argument("text", nargs="?", metavar="TEXT", help="the text to read out; - reads it from stdin")
    say.add_argument("-f", "--file", type=Path, help="read the text from FILE (UTF-8)")
    say.add_argument("-v", "--voice", help="the voice (see `streamtts voices`; default: the server's)")
    say.add_argument("--title", help="the cast's title (default: its first words)")
    say.add_argument("--speed", type=float, help="speaking speed, 0.25 to 4.0 (default 1.0)")
    say.set_defaults(func=run_say)


def add_follow(commands: argparse._SubParsersAction[argparse.ArgumentParser], server: argparse.ArgumentParser,
               out: argparse.ArgumentParser) -> None:
    fol = commands.add_parser("follow", parents=[server, out], help="follow an existing cast, writing its MP3")
    fol.add_argument("cast", metavar="ID_OR_LINK", help="a cast id or its link (http://host/c/<id>)")
    fol.add_argument("--live", action="store_true", help="start at the tail (the next record) instead of the beginning")
    fol.set_defaults(func=run_follow)


def add_voices(commands: argparse._SubParsersAction[argparse.ArgumentParser], server: argparse.ArgumentParser) -> None:
    voices = commands.add_parser("voices", parents=[server], help="the voices the server offers")
    voices.add_argument("--ids", action="store_true", help="the voice ids alone, one a line (for scripts, completion)")
    voices.set_defaults(func=run_voices_list)  # `streamtts voices` alone lists them
    sub = voices.add_subparsers(dest="voices_command", metavar="SUBCOMMAND")
    listing = sub.add_parser("list", parents=[server_options(argparse.SUPPRESS)], help="a table of the voices (the default)")
    listing.set_defaults(func=run_voices_list)
    voicecmd.add_install_command(sub)  # `streamtts voices install`: packs onto this machine


def read_text(args: argparse.Namespace) -> str:
    if args.file is not None and args.text is not None:
        raise UsageError("give the text or -f FILE, not both")
    if args.file is not None:
        try:
            return args.file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    if args.text == "-" or (args.text is None and not sys.stdin.isatty()):
        return sys.stdin.read()
    if args.text is None:
        raise UsageError("nothing to say: give TEXT, -f FILE, or - to read stdin")
    return str(args.text)


def check_outputs(args: argparse.Namespace) -> None:
    if args.json and args.output == STDOUT:
        raise UsageError("--json prints its events on stdout: write the MP3 to a file (-o FILE), not to -")


def run_say(args: argparse.Namespace) -> int:
    check_outputs(args)
    text = read_text(args)
    if not text.strip():
        raise UsageError("the text is empty; give some words to read out")
    with closing(api_for(args)) as api:
        cast = api.submit(text, args.voice, args.title, args.speed)
        return _follow(api, cast["id"], args, from_tail=False, submitted=cast["status"])


def run_follow(args: argparse.Namespace) -> int:
    check_outputs(args)
    cast_id, origin = split_link(args.cast)
    with closing(api_for(args, origin)) as api:  # a full link names its server
        return _follow(api, cast_id, args, from_tail=args.live)


def _follow(api: Api, cast_id: str, args: argparse.Namespace, *, from_tail: bool, submitted: str | None = None) -> int:
    """The cast's link said, then its records followed to the end; ``submitted``: what ``say``'s submit answered."""
    link, console = api.link(cast_id), Console(stderr=True)
    console.print(link if submitted is None else f"{link}  ({'new' if submitted == 'new' else 'already made: cached'})")
    if args.json:
        print_json({"event": "cast", "id": cast_id, "url": link, **({"status": submitted} if submitted else {})})
    elif submitted is not None and args.output != STDOUT:
        print(link, flush=True)  # stdout holds the link alone: `link=$(streamtts say …)`
    state = api.state(cast_id)
    tail = int(state.get("tail", 0))
    # --live (from_tail): from the next record; of a cast that has ended, its terminal record (nothing to wait for)
    start = (tail - 1 if state.get("status") in ("done", "error") else tail) if from_tail else 0
    where = STDOUT if args.output == STDOUT else str(Path(args.output or f"{cast_id}.mp3"))
    try:
        with ExitStack() as files:
            sink: AudioSink = (Mp3Stream(sys.stdout.buffer) if where == STDOUT
                               else Mp3File(files.enter_context(Path(where).open("wb"))))
            ended = follow(api, cast_id, sink, planned=int(str(state.get("planned") or 0)), seq_num=start,
                           console=console, on_record=print_json if args.json else None, show_progress=not args.json)
    except KeyboardInterrupt:
        console.print(f"stopped following; the cast goes on: `streamtts follow {api.link(cast_id)}`")
        return EXIT_INTERRUPTED
    return _report(ended, where, console, as_json=args.json)


def _report(ended: CastState, out: str, console: Console, *, as_json: bool) -> int:
    audio_s = ended.audio_ms / 1000
    if as_json:
        print_json({"event": "end", "status": ended.status, "sentences": ended.finished,
                    "audio_s": round(audio_s, 3), "error": ended.error, "output": out})
    if ended.status == "error":
        console.print(f"[red]the cast ended in error:[/red] {ended.error}")
        return EXIT_CAST_ERROR
    console.print(f"done: {ended.finished} sentences, {audio_s:.1f} s of audio in {out}")
    return EXIT_OK


def run_voices_list(args: argparse.Namespace) -> int:
    with closing(api_for(args)) as api:
        listing = api.voices()
    if args.ids:
        print("\n".join(listing["voices"]))
        return EXIT_OK
    table = Table("voice", "language", "gender", "default")
    details = {d.get("id"): d for d in listing.get("details") or [] if isinstance(d, dict)}
    for name in listing["voices"]:
        known = details.get(name)  # the server's metadata when it sends it, else the id's letters
        language, gender = (known.get("language") or "?", known.get("gender") or "?") if known else voice_traits(name)
        table.add_row(name, language, gender, "*" if name == listing["default"] else "")
    Console().print(table)
    return EXIT_OK
