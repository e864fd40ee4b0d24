"""castlog: the shared contract of StreamTTS in code: everything that touches a Redis key (keys,
records, scripts, the store, the reader), nothing that touches HTTP (that is ``servicekit``).

Imports only ``redis`` and ``msgspec``; every service imports it, it imports no service.
"""

from . import archive
from .blends import BlendError, blend_parts, canonical_voice, is_blend, voice_available
from .cancels import cancel, is_cancelled, last_cancel, read_cancels
from .deletes import delete_proof, last_delete, proven, read_deletes, request_delete
from .ids import DEFAULT_SPEED, MAX_SPEED, MIN_SPEED, content_id, normalise_speed
from .keys import (
    CANCELS,
    CAST_ID_LEN,
    DELETES,
    GROUP,
    HANDED_BACK,
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
    public_name,
    seq_of,
    tally_key,
)
from .live import (
    LiveStore,
    LiveText,
    OpenedCast,
    TextEvent,
    TooManyOpen,
    client_tag,
    open_cast_id,
    write_hash,
    write_token,
)
from .marks import Mark, holds, mark, stamps
from .ratelimit import RateLimited, RateLimiter, Verdict
from .reader import ArchiveSource, ArchiveUnavailable, LogReader, Page
from .records import (
    SAMPLE_RATE,
    TERMINAL,
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
    kind_of,
    public_dict,
)
from .rowcache import RowCache
from .state import CastState, playable, summarize
from .store import CastStore, SeqMismatch, Stamped, SubmitResult
from .view import Chunk, Layout, LogView, StaleLayout
from .voicemeta import VoiceInfo, describe_voice, voice_order

__all__ = [
    "archive",
    "CAST_ID_LEN", "GROUP", "JOBS", "JOBS_DEAD", "MAX_SEQ_NUM", "PROGRESS_DONE", "VOICES", "TERMINAL",
    "QUEUE_CLERK", "SYNTH_CAPACITY",
    "DEFAULT_SPEED", "MAX_SPEED", "MIN_SPEED", "normalise_speed",
    "Audio", "CastState", "CastStore", "Entry", "Eos", "Error", "Meta", "Queued", "Record",
    "RateLimited", "RateLimiter", "SeqMismatch", "Stamped", "Start", "SubmitResult", "Verdict",
    "cast_id_of", "cast_key", "catalog_key", "lane_jobs_of", "lane_live_jobs_of", "lane_of", "public_name", "content_id", "decode_entry", "encode_fields",
    "encode_headers", "entry_id", "is_cast_id", "is_terminal", "kind_of", "playable",
    "seq_of", "summarize",
    "JOBS_LIVE", "LiveStore", "LiveText", "OpenedCast", "TextEvent", "TooManyOpen", "open_cast_id",
    "client_tag", "write_hash", "write_token",
    "VoiceInfo", "describe_voice", "voice_order",
    "Mark", "holds", "mark", "stamps", "HANDED_BACK", "tally_key",
]
__all__ += ["from_public", "public_dict"]
__all__ += ["cancel", "is_cancelled", "last_cancel", "read_cancels", "CANCELS", "cancel_key"]
__all__ += ["delete_proof", "last_delete", "proven", "read_deletes", "request_delete", "DELETES", "DeleteRequest"]
__all__ += ["BlendError", "blend_parts", "canonical_voice", "is_blend", "voice_available"]

# The shared streams' schemas (streams.py) and the key names that go with them.
from . import streams  # noqa: E402
from .keys import (  # noqa: E402
    ARCHIVE_PLAYED,
    ARCHIVE_TRASH,
    CAST_ID_PATTERN,
    EDGE_SCOPE,
    EDGE_STREAMS_SCOPE,
    INTAKE_AUTH_SCOPE,
    INTAKE_LIVE_SCOPE,
    INTAKE_SCOPE,
    INTAKE_SESSIONS_SCOPE,
    INTAKE_SPEECH_SCOPE,
    INTAKE_TEXT_SCOPE,
    Fields,
    Row,
    Rows,
    limit_key,
)
from .streams import (  # noqa: E402
    DeadLetter,
    DeleteRequest,
    Done,
    Job,
    Malformed,
    Recipe,
    Trash,
    VoiceList,
    announce_done,
    dead_letter,
    decode_job,
    enqueue,
    now_ms,
    publish_voices,
    read_dead,
    read_done,
    read_jobs,
    read_recipe,
    read_trash,
    read_voices,
)

__all__ += [
    "streams", "ARCHIVE_PLAYED", "ARCHIVE_TRASH", "CAST_ID_PATTERN", "EDGE_SCOPE", "EDGE_STREAMS_SCOPE", "INTAKE_SCOPE",
    "INTAKE_AUTH_SCOPE", "INTAKE_LIVE_SCOPE", "INTAKE_SESSIONS_SCOPE", "INTAKE_SPEECH_SCOPE", "INTAKE_TEXT_SCOPE",
    "limit_key", "Fields", "Row", "Rows", "SAMPLE_RATE", "now_ms",
    "DeadLetter", "Done", "Job", "Malformed", "Recipe", "Trash", "VoiceList", "announce_done", "dead_letter",
    "decode_job", "enqueue", "publish_voices", "read_dead", "read_done", "read_jobs", "read_recipe",
    "read_trash", "read_voices",
]
# One consumer of a consumer group (jobs, the key lanes, the archiver's receipts).
from .groups import Consumer, StreamEntry, ensure_group  # noqa: E402

__all__ += ["Consumer", "StreamEntry", "ensure_group"]
__all__ += ["ArchiveSource", "ArchiveUnavailable", "Chunk", "Layout", "LogReader", "LogView", "Page", "RowCache", "StaleLayout"]
