"""A request's parameters, parsed in one call per route before anything touches Redis.

Each parser answers a 404 for a malformed cast id and a 400 for a bad query parameter or
header, so that refused names and values cost no Redis command (the guards, ``guards.py``,
come second).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web

from castlog import MAX_SEQ_NUM, cast_id_of, is_cast_id

from .config import Config
from .errors import bad_request, not_found

# The longest Last-Event-ID taken: any such number + 1 is a valid seq_num (below MAX_SEQ_NUM).
LAST_EVENT_ID_DIGITS = 18
CUE_KINDS = ("all", "words", "sentences")
N = TypeVar("N", int, float)


@dataclass(frozen=True)
class RecordsQuery:
    """``GET …/records``: from ``seq``, at most ``limit`` records, waiting up to ``wait`` s at the end."""

    cast_id: str
    seq: int
    limit: int
    wait: float


@dataclass(frozen=True)
class EventsQuery:
    """``GET …/events``: from ``start`` (after Last-Event-ID, else ``seq_num``)."""

    cast_id: str
    start: int


@dataclass(frozen=True)
class CaptionsQuery:
    cast_id: str
    cues: str  # one of CUE_KINDS


def cast_id_from(request: web.Request) -> str:
    """The cast id of the route, or a 404 before anything touches Redis."""
    value = request.match_info.get("id", "")
    if not is_cast_id(value):
        raise not_found("no such cast: a cast id is 12 URL-safe base64 characters")
    return value


def records_query(request: web.Request, cfg: Config) -> RecordsQuery:
    """The cast of the route, or on the original design's gateway path (``/s2/records``) of
    ``?stream=``, where only ``pub/casts/<id>`` is a readable stream."""
    cast_id = cast_id_from(request) if "id" in request.match_info else cast_id_of(request.query.get("stream", ""))
    if cast_id is None:
        raise not_found("no such stream: only pub/casts/<id> is readable")
    return RecordsQuery(
        cast_id,
        seq=number_param(request, "seq_num", 0, 0, MAX_SEQ_NUM),
        limit=number_param(request, "limit", cfg.max_records_limit, 1, cfg.max_records_limit),
        wait=number_param(request, "wait", 0.0, 0.0, cfg.max_wait_s),
    )


def events_query(request: web.Request) -> EventsQuery:
    """Where to start: after ``Last-Event-ID`` if the client sent one, else ``seq_num`` (0)."""
    cast_id = cast_id_from(request)
    last_id = request.headers.get("Last-Event-ID", "").strip()
    if last_id:
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses
        if not (last_id.isascii() and last_id.isdigit()) or len(last_id) > LAST_EVENT_ID_DIGITS:
            raise bad_request("Last-Event-ID must be the seq_num of the last event received")
        return EventsQuery(cast_id, int(last_id) + 1)
    return EventsQuery(cast_id, number_param(request, "seq_num", 0, 0, MAX_SEQ_NUM))


def captions_query(request: web.Request) -> CaptionsQuery:
    cues = request.query.get("cues", "all")
    if cues not in CUE_KINDS:
        raise bad_request(f"cues must be one of {', '.join(CUE_KINDS)}")
    return CaptionsQuery(cast_id_from(request), cues)


def number_param(request: web.Request, name: str, default: N, low: N, high: N) -> N:
    """``?name=`` as the type of ``default``: an integer, or a number of seconds (a float); 400
    unless it parses and lies between ``low`` and ``high``."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    integer = isinstance(default, int)
    try:
        value = type(default)(raw)
    except ValueError:
        raise bad_request(f"{name} must be {'an integer' if integer else 'a number of seconds'}, not {raw[:32]!r}") from None
    if not low <= value <= high:
        unit, spec = ("", "d") if integer else (" seconds", "g")
        raise bad_request(f"{name} must be between {low:{spec}} and {high:{spec}}{unit}, not {value:{spec}}")
    return value
