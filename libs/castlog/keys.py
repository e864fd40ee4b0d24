"""Key names and the mapping between a cast's ``seq_num`` and its stream entry id.

The entries of the streams named here are typed in ``streams.py`` (and the cast log's in
``records.py``); the k3s ACL (k3s/base/redis/render-acl.sh) grants by these names.
"""

from __future__ import annotations

import re
import zlib

# An entry as XRANGE and XREAD give it to a client with decode_responses=False (redis-py types
# them loosely): its raw id and its fields. Every module that handles raw entries uses these.
Fields = dict[bytes, bytes]
Row = tuple[bytes, Fields]
Rows = list[Row]

JOBS = "jobs"
JOBS_LIVE = "jobs/live"  # open casts' jobs, same group and delivery as `jobs`
JOBS_DEAD = "jobs/dead"
PROGRESS_DONE = "progress/done"
VOICES = "synth/voices"
ARCHIVE_TRASH = "archive/trash"  # blob keys of deleted casts, for the archiver to remove
ARCHIVE_PLAYED = "archive/played"  # sorted set: cast id -> ms of its last read
CANCELS = "cancels"  # cast ids cancelled, for every worker to hear at once (cancels.py)
DELETES = "deletes"  # the admin's deletes, for the workers to carry out (deletes.py): intake only adds
# Capacity-aware admission: each worker's measured capacity and its casts' needs (hash: consumer
# -> JSON), and the lock of the one worker at a time that notes queued casts' places (string).
SYNTH_CAPACITY = "synth/capacity"
QUEUE_CLERK = "synth/queue-clerk"
GROUP = "synth"

# Lanes: co-location of the keys one atomic step touches, for Redis Cluster (and the same layout
# on a single Redis). A cast's lane is a stable hash of its id into LANES lanes; its log, its
# catalog entry and its lane's job streams carry the lane's hash tag ``{lN}``, so the submit
# (claim + catalog + job) stays one script in one slot. LANES is part of the stored layout, not
# a per-process setting: every process must agree on it, and changing it renames every key
# (`streamtts migrate-keys` would have to move them), so it is a constant of the key layout.
LANES = 64
JOBS_LANE_PREFIX = "jobs/lane/"
JOBS_LIVE_LANE_PREFIX = "jobs/live/lane/"
LANE_GROUP = "lanes"  # the group through which synth moves lane jobs into `jobs` / `jobs/live`
# On a cluster, where no read blocks across key lanes: {s: a key lane's job stream} after each new
# job, so the movers read the lanes that have one (lanes.py). Read by plain XREAD, capped.
JOBS_BELL = "jobs/bell"

CAST_PREFIX = "pub/casts/"
RATE_LIMIT_PREFIX = "rl/"
CATALOG_PREFIX = "catalog/"
TALLY_PREFIX = "synth/tally/"
CANCEL_PREFIX = "cancel/"
# Scopes of the per-client keys rl/<scope>/<client>: intake's submit buckets (hash), edge's read
# buckets (hash) and edge's open-stream slots (sorted set, slots.py).
INTAKE_SCOPE = "intake"
# intake's per-client limits beside it (#21): the open casts a client holds (sorted set: cast id
# -> opened at), its live text's characters (a bucket), its live sessions and /v1 streams (slots).
INTAKE_LIVE_SCOPE = "intake-live"
INTAKE_TEXT_SCOPE = "intake-text"
INTAKE_SESSIONS_SCOPE = "intake-sessions"
INTAKE_SPEECH_SCOPE = "intake-speech"
INTAKE_AUTH_SCOPE = "intake-auth"  # a bucket of failed credentials (API keys, write tokens)
EDGE_SCOPE = "edge"
EDGE_STREAMS_SCOPE = "edge-streams"
# The consumer of group `synth` that holds jobs handed back by a stopping worker, for any worker
# to claim at once (no lease to wait for).
HANDED_BACK = "handed-back"

# content_id() yields 12 characters of URL-safe base64; nothing else is a cast id.
CAST_ID_LEN = 12
CAST_ID_PATTERN = r"[A-Za-z0-9_-]{%d}" % CAST_ID_LEN
_CAST_ID = re.compile(CAST_ID_PATTERN)


def decoded(value: object) -> str:
    """A reply's bytes (or str: a client with decode_responses) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def id_order(entry_id: str | bytes) -> tuple[int, int]:
    """A stream entry id (``<ms>-<seq>``) as numbers, which sort as Redis sorts the ids."""
    ms, _, seq = decoded(entry_id).partition("-")
    return int(ms), int(seq or 0)


def is_cast_id(value: str) -> bool:
    return _CAST_ID.fullmatch(value) is not None


def lane_of(cast_id: str) -> int:
    """The cast's lane: CRC-32 of its id, modulo LANES (stable across processes and versions)."""
    return zlib.crc32(cast_id.encode()) % LANES


def lane_tag(lane: int) -> str:
    """``{lN}``: Redis Cluster hashes only what is inside the braces, so a lane is one slot."""
    return "{l%d}" % lane


def cast_key(cast_id: str) -> str:
    """``pub/casts/{lN}/<id>``; the public stream name stays ``pub/casts/<id>`` (cast_id_of reads both)."""
    return f"{CAST_PREFIX}{lane_tag(lane_of(cast_id))}/{cast_id}"


def catalog_key(cast_id: str) -> str:
    """``catalog/{lN}/<id>``: in the slot of the cast's log."""
    return f"{CATALOG_PREFIX}{lane_tag(lane_of(cast_id))}/{cast_id}"


def cast_key_pattern() -> str:
    """A SCAN pattern that matches every cast log's key (and no other key)."""
    return CAST_PREFIX + "{l*}/*"


def jobs_lane_key(lane: int) -> str:
    """``jobs/lane/{lN}``: the submits' jobs of one lane, moved by synth into ``jobs``."""
    return JOBS_LANE_PREFIX + lane_tag(lane)


def jobs_live_lane_key(lane: int) -> str:
    """``jobs/live/lane/{lN}``: the open casts' jobs of one lane, moved into ``jobs/live``."""
    return JOBS_LIVE_LANE_PREFIX + lane_tag(lane)


def lane_jobs_of(cast_id: str) -> str:
    return jobs_lane_key(lane_of(cast_id))


def lane_live_jobs_of(cast_id: str) -> str:
    return jobs_live_lane_key(lane_of(cast_id))


def cancel_key(cast_id: str) -> str:
    """``cancel/{lN}/<id>``: the cast was cancelled (a flag with a TTL, read when a job is
    admitted); in the slot of the cast's log, which the cancel script reads."""
    return f"{CANCEL_PREFIX}{lane_tag(lane_of(cast_id))}/{cast_id}"


def limit_key(scope: str, client: str) -> str:
    """``rl/<scope>/<client>``: a client's token bucket or its leased slots in one scope."""
    return f"{RATE_LIMIT_PREFIX}{scope}/{client}"


def tally_key(job_entry_id: str) -> str:
    """A job's tally: its failed attempts and the deaths of workers while a chunk was in hand."""
    return TALLY_PREFIX + job_entry_id


def cast_id_of(stream: str) -> str | None:
    """The cast id of a public stream name (``pub/casts/<id>``) or of a cast log's key
    (``pub/casts/{lN}/<id>``, its lane checked), or None for any other stream."""
    if not stream.startswith(CAST_PREFIX):
        return None
    rest = stream[len(CAST_PREFIX) :]
    if rest.startswith("{"):
        tag, _, rest = rest.partition("/")
        if not is_cast_id(rest) or tag != lane_tag(lane_of(rest)):
            return None
    return rest if is_cast_id(rest) else None


# A stream id's sequence part is an unsigned 64-bit number and record n has n+1 there; Redis
# refuses any id beyond it, so a reader must refuse a larger seq_num before asking.
MAX_SEQ_NUM = 2**64 - 2


def entry_id(seq_num: int) -> str:
    """Record ``n`` lives at stream id ``0-(n+1)`` so a reader seeks by seq_num in O(log n)."""
    if not 0 <= seq_num <= MAX_SEQ_NUM:
        raise ValueError(f"seq_num must be between 0 and {MAX_SEQ_NUM}, not {seq_num}")
    return f"0-{seq_num + 1}"


def seq_of(stream_id: str | bytes) -> int:
    """The seq_num of an entry id written by :func:`entry_id`."""
    ms, _, seq = decoded(stream_id).partition("-")
    if ms != "0" or not seq:
        raise ValueError(f"not a cast log entry id: {stream_id!r}")
    return int(seq) - 1


def seq_bounds(low: str, high: str) -> tuple[int, int]:
    """The seq range an XRANGE ``low``..``high`` covers (ids ``0-(n+1)``, ``(`` exclusive)."""
    if low in ("-", "0-0"):
        first = 0
    elif low.startswith("("):
        first = seq_of(low[1:]) + 1
    else:
        first = seq_of(low)
    last = 2**63 if high == "+" else (seq_of(high[1:]) - 1 if high.startswith("(") else seq_of(high))
    return max(0, first), last
