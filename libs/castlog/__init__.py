"""castlog: the shared contract of StreamTTS in code: everything that touches a Redis key (keys,
records, scripts, the store, the reader, views, the archive's format), nothing that touches HTTP
(that is ``servicekit``).

Imports only ``redis`` and ``msgspec``; every service imports it, it imports no service and none of
the libraries above it: ``fanout`` (the shared tail and its listeners), ``durablestreams``. The
splitter is ``chunking``. This face exports what the services and those libraries import; the
rest is reached through its module (``castlog.keys.Row``, ``castlog.marks.mark``).
"""

from . import archive, keys, streams
from .blends import BlendError, blend_parts, canonical_voice, is_blend, voice_available
from .cancels import cancel, is_cancelled
from .deletes import proven, request_delete
from .groups import Consumer, StreamEntry
from .ids import DEFAULT_SPEED, MAX_SPEED, MIN_SPEED, content_id, normalise_speed
from .keys import (
    CANCELS,
    DELETES,
    EDGE_SCOPE,
    EDGE_STREAMS_SCOPE,
    GROUP,
    HANDED_BACK,
    INTAKE_AUTH_SCOPE,
    INTAKE_SCOPE,
    INTAKE_SESSIONS_SCOPE,
    INTAKE_SPEECH_SCOPE,
    INTAKE_TEXT_SCOPE,
    JOBS,
    JOBS_DEAD,
    JOBS_LIVE,
    MAX_SEQ_NUM,
    PROGRESS_DONE,
    QUEUE_CLERK,
    SYNTH_CAPACITY,
    VOICES,
    cast_id_of,
    cast_key,
    catalog_key,
    is_cast_id,
    tally_key,
)
from .live import LiveStore, LiveText, TextEvent, TooManyOpen, client_tag
from .ratelimit import RateLimited, RateLimiter, Verdict
from .reader import ArchiveUnavailable, LogReader
from .records import (
    SAMPLE_RATE,
    Audio,
    Entry,
    Eos,
    Error,
    Meta,
    Queued,
    Record,
    Start,
    from_public,
    is_terminal,
    public_dict,
)
from .rowcache import RowCache
from .state import CastState, playable, summarize
from .store import CastStore, SeqMismatch, Stamped, SubmitResult
from .streams import (
    DeleteRequest,
    Done,
    Malformed,
    VoiceList,
    announce_done,
    dead_letter,
    decode_job,
    newest_id,
    now_ms,
    publish_voices,
    read_recipe,
    read_trash,
    read_voices,
)
from .view import Layout, LogView, StaleLayout
from .voicemeta import describe_voice, voice_order

__all__ = [
    "archive", "keys", "streams", "announce_done", "ArchiveUnavailable", "Audio", "blend_parts", "BlendError", "cancel",
    "CANCELS", "canonical_voice", "cast_id_of", "cast_key", "CastState", "CastStore", "catalog_key", "client_tag",
    "Consumer", "content_id", "dead_letter", "decode_job", "DEFAULT_SPEED", "DeleteRequest", "DELETES",
    "describe_voice", "Done", "EDGE_SCOPE", "EDGE_STREAMS_SCOPE", "Entry", "Eos", "Error", "from_public", "GROUP",
    "HANDED_BACK", "INTAKE_AUTH_SCOPE", "INTAKE_SCOPE", "INTAKE_SESSIONS_SCOPE", "INTAKE_SPEECH_SCOPE",
    "INTAKE_TEXT_SCOPE", "is_blend", "is_cancelled", "is_cast_id", "is_terminal", "JOBS", "JOBS_DEAD", "JOBS_LIVE",
    "Layout", "LiveStore", "LiveText", "LogReader", "LogView", "Malformed", "MAX_SEQ_NUM", "MAX_SPEED", "Meta",
    "MIN_SPEED", "newest_id", "normalise_speed", "now_ms", "playable", "PROGRESS_DONE", "proven", "public_dict",
    "publish_voices", "QUEUE_CLERK", "Queued", "RateLimited", "RateLimiter", "read_recipe", "read_trash", "read_voices",
    "Record", "request_delete", "RowCache", "SAMPLE_RATE", "SeqMismatch", "StaleLayout", "Stamped", "Start",
    "StreamEntry", "SubmitResult", "summarize", "SYNTH_CAPACITY", "tally_key", "TextEvent", "TooManyOpen", "Verdict",
    "voice_available", "voice_order", "VoiceList", "VOICES",
]
