"""The shared streams besides the cast log: one msgspec type per entry, with its read/write helpers.

An entry is a flat map of field -> string on the wire; each type here names those fields (an
attribute's name IS the field's name: renaming one changes the stored data and the ACL's
assumptions, so don't). A field that holds a JSON document is listed in ``JSON_FIELDS``.

| stream | type | written by | read by |
|---|---|---|---|
| ``jobs/lane/{lN}``, ``jobs/live/lane/{lN}`` | :class:`Job` | SUBMIT (scripts.py), OPEN (live.py) | synth's lane mover (lanes.py) |
| ``jobs``, ``jobs/live`` | :class:`Job` | the lane mover | synth's consumer group |
| ``catalog/<id>`` (first entry) | :class:`Recipe` | SUBMIT, OPEN | synth, intake's cancel (:func:`read_recipe`) |
| ``jobs/dead`` | :class:`DeadLetter` | synth | operators, tests |
| ``progress/done`` | :class:`Done` | synth | the archiver's group |
| ``synth/voices`` | :class:`VoiceList` | synth at start | intake |
| ``archive/trash`` | :class:`Trash` | archive.delete (after DELETE) | the archiver |
| ``deletes`` | :class:`DeleteRequest` | intake (the admin's delete, deletes.py) | every worker |

Readers skip fields they do not know (a newer writer) and take a missing optional field as its
default; an entry that does not decode raises :class:`Malformed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, TypeVar, cast

import msgspec
from redis.asyncio import Redis

from . import keys
from .keys import Fields, Rows
from .records import encode_json

CastId = Annotated[str, msgspec.Meta(pattern=f"^{keys.CAST_ID_PATTERN}$")]


class Malformed(ValueError):
    """An entry that is not its stream's type (a hand-made or foreign entry)."""


class TypedEntry(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the entry types: attributes are the wire's fields. (An entry as Redis gives it,
    id and raw fields, is a ``keys.Row``.)"""

    JSON_FIELDS: ClassVar[tuple[str, ...]] = ()


E = TypeVar("E", bound=TypedEntry)


def encode(entry: TypedEntry) -> dict[str, str | int | float]:
    """The fields of ``entry`` as XADD takes them; an optional field that is None is left out."""
    out: dict[str, str | int | float] = {}
    for name, value in msgspec.structs.asdict(entry).items():
        if value is None:
            continue
        if name in entry.JSON_FIELDS:
            value = encode_json(value).decode()
        elif isinstance(value, bool):
            value = "1" if value else "0"
        out[name] = value
    return out


def decode(kind: type[E], fields: Fields) -> E:
    """The entry of type ``kind`` that ``fields`` (as XRANGE gives them) hold, or :class:`Malformed`."""
    try:
        text = {k.decode(): v.decode() for k, v in fields.items()}
        wire: dict[str, Any] = dict(text)
        for name in kind.JSON_FIELDS:
            if name in text:
                wire[name] = msgspec.json.decode(text[name])
        # strict=False: the wire's numbers and flags are strings ("12", "1").
        return msgspec.convert(wire, type=kind, strict=False)
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        raise Malformed(f"not a {kind.__name__} entry: {exc}") from exc


def now_ms() -> int:
    """This host's clock in ms since the epoch (Redis stamps the cast log's ``ts`` itself)."""
    return int(time.time() * 1000)


# ---- jobs, jobs/live ---------------------------------------------------------------------------


class Job(TypedEntry, frozen=True, kw_only=True):
    """One entry of ``jobs`` (or ``jobs/live``): a cast to synthesize; the text is in its recipe."""

    id: CastId
    voice: str = ""
    enqueued_at: int = 0  # ms, Redis's clock; 0 when unknown
    client: str = ""  # who submitted it, as a tag (live.client_tag); workers admit clients in turn


def decode_job(fields: Fields) -> Job:
    """The job of one ``jobs`` entry; :class:`Malformed` when its id is no cast id."""
    try:
        int(fields.get(b"enqueued_at", b"0"))
    except ValueError:  # an unreadable time is an unknown one, not a bad job
        fields = {**fields, b"enqueued_at": b"0"}
    return decode(Job, fields)


# ---- catalog/<id> ----------------------------------------------------------------------------


class Recipe(TypedEntry, frozen=True, kw_only=True):
    """The private first entry of ``catalog/<id>``. An open cast's has ``live`` and its
    ``speed`` and an empty ``text`` (its text follows in later entries: see live.py); a whole
    text's speed is in its ``meta`` record."""

    text: str
    voice: str
    title: str
    created_at: int
    live: bool = False
    speed: float = 1.0
    wh: str = ""  # an open cast's write token's hash (live.py); never sent to a client
    client: str = ""  # its opener or submitter, as a tag (live.client_tag); '' in older recipes


async def read_recipe(redis: Redis, cast_id: str) -> Recipe | None:
    """The recipe of ``cast_id``; None when there is none (no cast, or archived: the archive
    drops the catalog)."""
    rows = cast(Rows, await redis.xrange(keys.catalog_key(cast_id), count=1))
    return decode_or_none(Recipe, rows[0][1]) if rows else None


# ---- deletes ---------------------------------------------------------------------------------


class DeleteRequest(TypedEntry, frozen=True, kw_only=True):
    """The admin's delete of cast ``id``, asked through intake, carried out by a worker only when
    ``proof`` is the admin token's HMAC of it (deletes.py): intake's Redis user may add it and
    nothing more, so it cannot delete a cast by itself."""

    id: str
    proof: str


# ---- jobs/dead -------------------------------------------------------------------------------


class DeadLetter(TypedEntry, frozen=True, kw_only=True):
    """A job given up on."""

    id: str  # the job's id as it stood: a malformed job's too
    attempts: int
    error: str
    failed_at: int  # ms, the worker's clock
    consumer: str


async def dead_letter(redis: Redis, cast_id: str, attempts: int, error: str, consumer: str) -> None:
    entry = DeadLetter(id=cast_id, attempts=attempts, error=error, failed_at=now_ms(), consumer=consumer)
    await redis.xadd(keys.JOBS_DEAD, dict[Any, Any](encode(entry)))


# ---- progress/done ---------------------------------------------------------------------------


class Done(TypedEntry, frozen=True, kw_only=True):
    """A receipt per finished cast: what it cost. Published at least once per cast: readers key
    it by ``id``. A reader needs only the id; the figures default to 0."""

    id: CastId
    attempts: int = 0
    sentences: int = 0
    audio_ms: int = 0
    synth_ms: int = 0  # inference time of the finishing attempt
    first_audio_ms: int = 0  # job enqueued -> the cast's first audio record (Redis's clock)
    finished_at: int = 0


async def announce_done(redis: Redis, done: Done) -> None:
    await redis.xadd(keys.PROGRESS_DONE, dict[Any, Any](encode(done)))


# ---- synth/voices ----------------------------------------------------------------------------


class VoiceList(TypedEntry, frozen=True, kw_only=True):
    """What a worker offers, published at its start; the newest well-formed entry stands."""

    JSON_FIELDS = ("voices",)

    voices: tuple[str, ...]  # JSON on the wire: ["af_heart", ...]
    default: str = ""
    backend: str | None = None
    worker: str = ""
    at: int = 0  # ms, the worker's clock


async def publish_voices(redis: Redis, voices: VoiceList, maxlen: int) -> None:
    await redis.xadd(keys.VOICES, dict[Any, Any](encode(voices)), maxlen=maxlen, approximate=True)


async def read_voices(
    redis: Redis, count: int, on_malformed: Callable[[bytes, Malformed], None] | None = None
) -> VoiceList | None:
    """The newest of the last ``count`` entries that offers a voice (a bad newest entry does not
    hide older good ones); None when none does. ``on_malformed`` hears of each bad entry."""
    rows = cast(Rows, await redis.xrevrange(keys.VOICES, count=count))
    for entry_id, fields in rows:
        try:
            offer = decode(VoiceList, fields)
        except Malformed as exc:
            if on_malformed is not None:
                on_malformed(entry_id, exc)
            continue
        if offer.voices:
            return offer
    return None


# ---- archive/trash ---------------------------------------------------------------------------


class Trash(TypedEntry, frozen=True, kw_only=True):
    """The blob of a deleted archived cast, for the archiver to remove."""

    key: str  # the blob's name in the store (the archived log's `k`)


async def read_trash(redis: Redis, count: int) -> list[tuple[bytes, Trash | None]]:
    """The oldest ``count`` trash entries; None for a malformed one (drop it, nothing to remove)."""
    rows = cast(Rows, await redis.xrange(keys.ARCHIVE_TRASH, count=count))
    return [(entry_id, decode_or_none(Trash, fields)) for entry_id, fields in rows]


def decode_or_none(kind: type[E], fields: Fields) -> E | None:
    """:func:`decode`, or None for an entry that does not decode (a reader that skips it)."""
    try:
        return decode(kind, fields)
    except Malformed:
        return None


async def newest_id(redis: Redis, stream: str) -> str:
    """Where a reader of a stream it follows as it grows (the broadcasts ``cancels`` and
    ``deletes``, the movers' ``jobs/bell``) starts: after its newest entry ("0-0" when empty)."""
    rows = cast(Rows, await redis.xrevrange(stream, count=1))
    return rows[0][0].decode() if rows else "0-0"
