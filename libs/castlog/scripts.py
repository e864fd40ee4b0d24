"""The Lua scripts: each one short, each one atomic thing. Registered once per client."""

from __future__ import annotations

from .lua import FIELD, NOW_MS

# KEYS[1]: the cast log pub/casts/<id>
# ARGV[1]: match_seq_num, the tail the caller believes in; then e, h, b for each record
# Appends the records at seq match, match+1, ... only if the tail is exactly match_seq_num.
# Each record carries its predecessor's stamp in `p` (none before the first record, or where the
# predecessor has no ts): a reader that holds that stamp knows the log still continues what it read.
# Returns {1, new_tail, the records' ts} or {0, actual_tail}: the writer learns the stamp without
# reading its records back. XLEN is the tail: logs are never trimmed.
APPEND = (
    FIELD
    + """
local tail = redis.call('XLEN', KEYS[1])
if tail ~= tonumber(ARGV[1]) then return {0, tail} end
"""
    + NOW_MS
    + """
local prev = false
if tail > 0 then prev = field(redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1], 'ts') end
for i = 2, #ARGV, 3 do
  tail = tail + 1
  local f = {'e', ARGV[i], 'h', ARGV[i + 1]}
  if ARGV[i + 2] ~= '' then f[#f + 1] = 'b'; f[#f + 1] = ARGV[i + 2] end
  f[#f + 1] = 'ts'; f[#f + 1] = now
  if prev then f[#f + 1] = 'p'; f[#f + 1] = prev end
  redis.call('XADD', KEYS[1], '0-' .. tail, unpack(f))
  prev = now
end
return {1, tail, now}
"""
)

# KEYS[1]: pub/casts/{lN}/<id>, KEYS[2]: catalog/{lN}/<id>, KEYS[3]: jobs/lane/{lN} (one lane: one slot)
# ARGV[1]: id, ARGV[2]: voice, ARGV[3]: text, ARGV[4]: title, ARGV[5]: meta headers (JSON),
# ARGV[6]: the submitter's tag (the job carries it: workers admit clients in turn; the recipe keeps
# it: only its tenant's key cancels the cast)
# An empty log: write the recipe, meta at seq 0 and the job, answer 'new'. A log that ended
# in `error`: enqueue one new job per error record (the catalog remembers which error it
# answered, so concurrent resubmits enqueue once), answer 'reenqueued'. Else 'existing'.
SUBMIT = (
    NOW_MS
    + FIELD
    + """
local client = ARGV[6] or ''
local n = redis.call('XLEN', KEYS[1])
if n == 0 then
  redis.call('XADD', KEYS[2], '*', 'text', ARGV[3], 'voice', ARGV[2], 'title', ARGV[4], 'created_at', now,
             'client', client)
  redis.call('XADD', KEYS[1], '0-1', 'e', 'meta', 'h', ARGV[5], 'ts', now)
  redis.call('XADD', KEYS[3], '*', 'id', ARGV[1], 'voice', ARGV[2], 'enqueued_at', now, 'client', client)
  return 'new'
end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if field(last, 'e') ~= 'error' then return 'existing' end
local error_seq = tostring(n - 1)
local mark = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
if field(mark, 'requeued_for') == error_seq then return 'existing' end
redis.call('XADD', KEYS[2], '*', 'requeued_for', error_seq, 'at', now)
redis.call('XADD', KEYS[3], '*', 'id', ARGV[1], 'voice', ARGV[2], 'enqueued_at', now, 'client', client)
return 'reenqueued'
"""
)


# KEYS[1]: pub/casts/<id>, KEYS[2]: catalog/<id>
# ARGV[1]: the tail n of the packed log, ARGV[2]: the descriptor (zlib-compressed JSON),
# ARGV[3]: the blob key
# Only if the log is still the whole finished log of tail n: rewrite it into its eos entry (same
# id 0-n, same e, h, ts and p) carrying the descriptor in `a` and the blob key in `k`, and drop the
# catalog (the recipe is not needed again). DUMP and RESTORE give the one-entry stream an exactly
# sized node: a new stream's node is preallocated (4 KB), more than the entry it holds.
# Returns 1 done, 0 already archived, -1 not that log (changed, deleted or not finished).
ARCHIVE = (
    """
local n = tonumber(ARGV[1])
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if not last or last[1] ~= '0-' .. n then return -1 end
local f = {}
for i = 1, #last[2], 2 do f[last[2][i]] = last[2][i + 1] end
if f['a'] then return 0 end
if f['e'] ~= 'eos' or redis.call('XLEN', KEYS[1]) ~= n then return -1 end
redis.call('DEL', KEYS[1], KEYS[2])
local eos = {'e', f['e'], 'h', f['h'], 'ts', f['ts'] or '0'}
if f['p'] then eos[#eos + 1] = 'p'; eos[#eos + 1] = f['p'] end
eos[#eos + 1] = 'a'; eos[#eos + 1] = ARGV[2]; eos[#eos + 1] = 'k'; eos[#eos + 1] = ARGV[3]
redis.call('XADD', KEYS[1], '0-' .. n, unpack(eos))
local packed = redis.call('DUMP', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('RESTORE', KEYS[1], 0, packed)
return 1
"""
)

# KEYS[1]: pub/casts/{lN}/<id>, KEYS[2]: catalog/{lN}/<id> (one lane: one slot)
# Removes the log and the catalog (the claim goes with them) in one step. Returns {existed (1 or
# 0), an archived log's blob key (field `k` of its last entry) or false}: the caller then trashes
# the blob and drops the played mark (global keys, other slots in a cluster).
DELETE = (
    FIELD
    + """
local existed = redis.call('EXISTS', KEYS[1])
local blob = field(redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1], 'k')
redis.call('DEL', KEYS[1], KEYS[2])
return {existed, blob}
"""
)

# KEYS[i]: a cast log pub/casts/<id> (a key may repeat); ARGV[i]: a seq_num in it (-1: none)
# For each pair, the stamp (ts) of the record at ARGV[i], false where absent, -1 where the log
# is archived (its records are in the archive, unchanged). Lets a reader check what it read
# against what the log holds now, without the bodies: a log can shrink (a power loss cut Redis's
# AOF back, a failover reached a replica that lagged).
STAMP_FIELD = FIELD + """
local function ts(entry) return field(entry, 'ts') end
local function archived(key)
  return field(redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1], 'a') and true or false
end
local function stamp(key, seq)
  if seq < 0 then return false end
  local id = '0-' .. (seq + 1)
  local entry = redis.call('XRANGE', key, id, id)[1]
  if not entry and archived(key) then return -1 end
  return ts(entry)
end
"""
STAMPS = (
    STAMP_FIELD
    + """
local out = {}
for i = 1, #KEYS do out[i] = stamp(KEYS[i], tonumber(ARGV[i])) end
return out
"""
)

# KEYS[1]: a cast log, ARGV[1]: a seq_num in it (-1: none)
# {length, id of the last entry, its ts, STAMPS' answer for ARGV[1]}, false where absent. The
# length is XLEN, or the seq after the last entry for an archived log (one entry stands for all).
MARK = (
    STAMP_FIELD
    + """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
local n = redis.call('XLEN', KEYS[1])
if field(last, 'a') then n = tonumber(string.sub(last[1], 3)) end
return {n, last and last[1] or false, ts(last), stamp(KEYS[1], tonumber(ARGV[1]))}
"""
)

# KEYS[1]: a cast log; ARGV[1]: XRANGE or XREVRANGE; ARGV[2], ARGV[3]: its two ids; ARGV[4]: COUNT
# The rows as the range gives them, each body `b` replaced by its size `n`: a layout, a state or
# captions need the headers alone, and the bodies (about 30 KB each) stay in Redis.
HEADERS = """
local rows = redis.call(ARGV[1], KEYS[1], ARGV[2], ARGV[3], 'COUNT', ARGV[4])
for _, row in ipairs(rows) do
  local f = row[2]
  for i = 1, #f, 2 do
    if f[i] == 'b' then f[i] = 'n'; f[i + 1] = tostring(#f[i + 1]) end
  end
end
return rows
"""
