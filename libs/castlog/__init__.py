"""castlog: the shared contract of StreamTTS in code: everything that touches a Redis key (keys,
records, scripts, the store, the reader, views, the archive's format), nothing that touches HTTP
(that is ``servicekit``).

Imports only ``redis`` and ``msgspec``; every service imports it, it imports no service and none of
the libraries above it: ``fanout`` (the shared tail and its listeners), ``durablestreams``. The
splitter is ``chunking``. This face exports what the services, benchmarks and tests import; the
rest is reached through its module (``castlog.keys.Row``, ``castlog.marks.mark``).
"""

from . import archive, keys, streams
from .blends import BlendError, blend_parts, canonical_voice, is_blend, voice_available
from .cancels import cancel, is_cancelled
from .deletes import delete_proof, proven, request_delete
from .groups import Consumer, StreamEntry, ensure_group
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
    cancel_key,
    cast_id_of,
    cast_key,
    catalog_key,
    entry_id,
    is_cast_id,
    lane_jobs_of,
    lane_live_jobs_of,
    lane_of,
    tally_key,
)
from .live import LiveStore, LiveText, TextEvent, TooManyOpen, client_tag
from .marks import stamps
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
    decode_entry,
    encode_fields,
    encode_headers,
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
    Job,
    Malformed,
    Trash,
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
from .view import Chunk, Layout, LogView, StaleLayout
from .voicemeta import describe_voice, voice_order

__all__ = [
    "archive", "keys", "streams", "announce_done", "ArchiveUnavailable", "Audio", "blend_parts", "BlendError",
    "cancel", "cancel_key", "CANCELS", "canonical_voice", "cast_id_of", "cast_key", "CastState", "CastStore",
    "catalog_key", "Chunk", "client_tag", "Consumer", "content_id", "dead_letter", "decode_entry", "decode_job",
    "DEFAULT_SPEED", "delete_proof", "DeleteRequest", "DELETES", "describe_voice", "Done", "EDGE_SCOPE",
    "EDGE_STREAMS_SCOPE", "encode_fields", "encode_headers", "ensure_group", "Entry", "entry_id", "Eos", "Error",
    "from_public", "GROUP", "HANDED_BACK", "INTAKE_AUTH_SCOPE", "INTAKE_SCOPE", "INTAKE_SESSIONS_SCOPE",
    "INTAKE_SPEECH_SCOPE", "INTAKE_TEXT_SCOPE", "is_blend", "is_cancelled", "is_cast_id", "is_terminal", "Job", "JOBS",
    "JOBS_DEAD", "JOBS_LIVE", "lane_jobs_of", "lane_live_jobs_of", "lane_of", "Layout", "LiveStore", "LiveText",
    "LogReader", "LogView", "Malformed", "MAX_SEQ_NUM", "MAX_SPEED", "Meta", "MIN_SPEED", "newest_id",
    "normalise_speed", "now_ms", "playable", "PROGRESS_DONE", "proven", "public_dict", "publish_voices", "QUEUE_CLERK",
    "Queued", "RateLimited", "RateLimiter", "read_recipe", "read_trash", "read_voices", "Record", "request_delete",
    "RowCache", "SAMPLE_RATE", "SeqMismatch", "StaleLayout", "Stamped", "stamps", "Start", "StreamEntry",
    "SubmitResult", "summarize", "SYNTH_CAPACITY", "tally_key", "TextEvent", "TooManyOpen", "Trash", "Verdict",
    "voice_available", "voice_order", "VoiceList", "VOICES",
]
