"""The Lua scripts of the durable streams (``streams.py``): each one atomic step of one stream.

Every script takes the stream's three keys first: KEYS[1] its meta hash ``ds/{<family>}/meta/<path>``,
KEYS[2] its log ``ds/{<family>}/log/<path>`` (one entry per append: ``d`` the bytes; a close-only
marker ``c`` wakes blocking readers), KEYS[3] its producers hash ``ds/{<family>}/prod/<path>`` (id
-> epoch:seq). Every key a script is given carries the same family tag, so each runs in one slot
of a Redis Cluster (``keys.py``).
Times are Redis's own clock (``NOW_MS``); a stream lapses lazily when a script meets it past
its deadline ``dl`` [R:ds-expiry].
"""

from __future__ import annotations

from castlog.lua import NOW_MS

# A producer's epoch grows by at most this much at a time (and a new producer starts at most
# this high), so that no append can set it out of its producer's reach: 2^53-1 takes billions.
MAX_EPOCH_STEP = 1_000_000
# Native expiry of an idle stream's keys this long after its deadline: a backstop for streams
# that nobody touches again (the lazy check answers every request on time).
BACKSTOP_MS = 3_600_000

# Helpers: the meta hash as a table; the stream's state as a reply when it is not alive (missing,
# soft-deleted, or lapsed: then removed, or soft-deleted while forks still read it); the next
# entry id (never below `top`, the highest id written or inherited); the TTL's slide.
PRELUDE = (
    NOW_MS
    + """
local function load(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local m = {}
  for i = 1, #flat, 2 do m[flat[i]] = flat[i + 1] end
  return m
end
local function settle(m)
  if not m then return {'missing', ''} end
  if m.gone then return {'gone'} end
  if m.dl and tonumber(m.dl) <= now then
    if tonumber(m.refs or '0') > 0 then
      redis.call('HSET', KEYS[1], 'gone', '1')
      return {'gone'}
    end
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
    return {'missing', m.src or ''}
  end
  return nil
end
local function next_id(top)
  local ms, sq = string.match(top, '^(%d+)-(%d+)$')
  ms = tonumber(ms)
  if now > ms then return string.format('%d-0', now) end
  return string.format('%d-%d', ms, tonumber(sq) + 1)
end
local function backstop(m)
  if tonumber(m.refs or '0') == 0 and m.dl then
    for i = 1, 3 do redis.call('PEXPIREAT', KEYS[i], tonumber(m.dl) + """
    + str(BACKSTOP_MS)
    + """) end
  else
    for i = 1, 3 do redis.call('PERSIST', KEYS[i]) end
  end
end
local function touch(m)
  if m.ttl then
    m.dl = string.format('%d', now + tonumber(m.ttl) * 1000)
    redis.call('HSET', KEYS[1], 'dl', m.dl)
  end
  backstop(m)
end
local function add(m, payload, field)
  local id = next_id(m.top)
  redis.call('XADD', KEYS[2], id, field, payload)
  m.top = id
  return id
end
-- a <= b as bytes (Lua's own < compares by the locale's collation)
local function bytes_le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end
local function flat(m)
  local out = {}
  for k, v in pairs(m) do out[#out + 1] = k; out[#out + 1] = v end
  return out
end
"""
)

# KEYS[4]: the source's meta hash for a fork, in the same family (else any key of it, unused);
# KEYS[5], only when the stream is created at home (its family is its path): the path's link.
# ARGV[1..9]: ct (as given), ctn (normalised), ttl, exp (as given), dl (ms), closed, src (fork
# source path), fofs (fork offset, an entry id), fsub, in that order ('' for absent);
# ARGV[10]: the most bytes the stream may hold; ARGV[11]: the most forks a chain may hold (a
# read walks the chain); ARGV[12]: its owner (who may write it, and fork it: a fork keeps its
# source while it lives); ARGV[13..]: the initial entries' bytes.
# A new stream: {'created', flat meta}. An existing alive one: {'exists', flat meta} (the caller
# compares configurations); soft-deleted: {'gone'}. A fork whose source is missing: {'nosrc'},
# soft-deleted: {'srcgone'}, of another owner: {'not_owner'}, one fork too deep: {'too_deep'}. A lapsed stream at the path is removed first: {..., src} tells the
# caller which source to release (last element, '' for none) [R:ds-create] [R:ds-fork].
# A path linked to another family meanwhile: {'linked', family}: the caller creates it there.
CREATE = (
    PRELUDE
    + """
if KEYS[5] then
  local family = redis.call('GET', KEYS[5])
  if family then return {'linked', family} end
end
local released = ''
local m = load(KEYS[1])
if m then
  local s = settle(m)
  if not s then return {'exists', flat(m)} end
  if s[1] == 'gone' then return {'gone'} end
  released = s[2]
end
local names = {'ct', 'ctn', 'ttl', 'exp', 'dl', 'closed', 'src', 'fofs', 'fsub'}
m = {top = '0-0', refs = '0', own = ARGV[12]}
for i = 1, #names do if ARGV[i] ~= '' then m[names[i]] = ARGV[i] end end
local size = 0
for i = 13, #ARGV do size = size + #ARGV[i] end
if size > tonumber(ARGV[10]) then return {'too_big', released} end
if m.src then
  local src = load(KEYS[4])
  if not src then return {'nosrc', released} end
  if src.gone then return {'srcgone', released} end
  if (src.own or '') ~= m.own then return {'not_owner', released} end
  local depth = tonumber(src.depth or '0') + 1
  if depth > tonumber(ARGV[11]) then return {'too_deep', released} end
  m.depth = tostring(depth)
  redis.call('HINCRBY', KEYS[4], 'refs', 1)
  redis.call('PERSIST', KEYS[4])
  m.top = m.fofs
end
m.tail = m.top
m.size = tostring(size)
redis.call('DEL', KEYS[2], KEYS[3])
for i = 13, #ARGV do m.tail = add(m, ARGV[i], 'd') end
m.created = string.format('%d', now)
redis.call('HSET', KEYS[1], unpack(flat(m)))
touch(m)
return {'created', flat(m), released}
"""
)

# ARGV[1]: the request's content type, normalised ('' when the body is empty)
# ARGV[2]: Stream-Seq ('' none); ARGV[3..5]: producer id, epoch, seq ('' none); ARGV[6]: '1' to
# close; ARGV[7]: the most bytes the stream may hold; ARGV[8]: who asks; ARGV[9..]: the entries'
# bytes (none: close only).
# Only the stream's owner writes ({'not_owner'}, before anything else is told; a stream stored
# before owners has none: only a caller of this library that names none, never a client of intake). Then the checks in the protocol's order (closed,
# content type, producer, Stream-Seq), then appends,
# records the producer's and the writer's sequence, and closes, all at once [R:ds-append]
# [R:ds-producer] [R:ds-close]. Replies {status, flat meta, detail...}.
APPEND = (
    PRELUDE
    + """
local m = load(KEYS[1])
local s = settle(m)
if s then return s end
local pid, epoch, pseq = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local closing = ARGV[6] == '1'
local has_body = #ARGV >= 9
if (m.own or '') ~= ARGV[8] then return {'not_owner', flat(m)} end
if m.closed then
  if pid ~= '' and m.cby == ARGV[4] .. ':' .. ARGV[5] .. ':' .. pid then
    return {'duplicate', flat(m), ARGV[5]}
  end
  if closing and not has_body and pid == '' then return {'ok', flat(m)} end
  return {'closed', flat(m)}
end
if has_body and ARGV[1] ~= m.ctn then return {'ct_mismatch', flat(m)} end
if pid ~= '' then
  local state = redis.call('HGET', KEYS[3], pid)
  if state then
    -- the numbers go back as the strings they were stored as (tostring of one past 10^14 is a float's)
    local se_text, ss_text = string.match(state, '^(%d+):(%d+)$')
    local se, ss = tonumber(se_text), tonumber(ss_text)
    if epoch < se then return {'stale_epoch', flat(m), se_text} end
    if epoch == se then
      if pseq <= ss then return {'duplicate', flat(m), ss_text} end
      if pseq ~= ss + 1 then return {'gap', flat(m), string.format('%d', ss + 1), ARGV[5]} end
    elseif epoch - se > """ + str(MAX_EPOCH_STEP) + """ then
      return {'epoch_jump', flat(m), se_text}
    elseif pseq ~= 0 then
      return {'epoch_seq', flat(m)}
    end
  elseif epoch > """ + str(MAX_EPOCH_STEP) + """ then
    return {'epoch_jump', flat(m), '0'}
  elseif pseq ~= 0 then
    return {'gap', flat(m), '0', ARGV[5]}
  end
end
if ARGV[2] ~= '' then
  if m.sseq and bytes_le(ARGV[2], m.sseq) then return {'seq_conflict', flat(m)} end
end
local size = tonumber(m.size or '0')
for i = 9, #ARGV do size = size + #ARGV[i] end
if size > tonumber(ARGV[7]) then return {'too_big', flat(m)} end
if ARGV[2] ~= '' then m.sseq = ARGV[2] end
m.size = tostring(size)
for i = 9, #ARGV do m.tail = add(m, ARGV[i], 'd') end
if pid ~= '' then redis.call('HSET', KEYS[3], pid, ARGV[4] .. ':' .. ARGV[5]) end
if closing then
  m.closed = '1'
  if pid ~= '' then m.cby = ARGV[4] .. ':' .. ARGV[5] .. ':' .. pid end
  if not has_body then add(m, '1', 'c') end
end
redis.call('HSET', KEYS[1], unpack(flat(m)))
touch(m)
return {'ok', flat(m)}
"""
)

# ARGV[1]: '1' to slide the TTL (a read), '0' not (HEAD).
# {'ok', flat meta}, or the state reply of a stream that is not alive [R:ds-expiry].
OPEN = (
    PRELUDE
    + """
local m = load(KEYS[1])
local s = settle(m)
if s then return s end
if ARGV[1] == '1' then touch(m) end
return {'ok', flat(m)}
"""
)

# ARGV[1]: who asks: only the owner deletes ({'not_owner'}).
# A stream with forks reading it is soft-deleted (410 from now on, its data kept); else its keys
# go: {'deleted', source} tells the caller which source to release [R:ds-delete].
DELETE = (
    PRELUDE
    + """
local m = load(KEYS[1])
local s = settle(m)
if s then return s end
if (m.own or '') ~= ARGV[1] then return {'not_owner'} end
if tonumber(m.refs or '0') > 0 then
  redis.call('HSET', KEYS[1], 'gone', '1')
  return {'soft'}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return {'deleted', m.src or ''}
"""
)

# KEYS[4]: the path's link; KEYS[1..3] its keys at home; ARGV[1]: the family a fork of it joins.
# Claims the path for that family: {'linked', family, released} (the family it is linked to now,
# this one or an earlier, and the source of a lapsed stream removed from home, '' for none), or
# {'home'} while a stream (alive or soft-deleted) is at home: a path is never both.
LINK = (
    PRELUDE
    + """
local family = redis.call('GET', KEYS[4])
if family then return {'linked', family, ''} end
local released = ''
local m = load(KEYS[1])
if m then
  local s = settle(m)
  if not s or s[1] == 'gone' then return {'home'} end
  released = s[2]
end
redis.call('SET', KEYS[4], ARGV[1])
return {'linked', ARGV[1], released}
"""
)

# A fork of this stream went: one reference fewer. A soft-deleted stream that nobody reads any
# more goes too, and its own source is the caller's to release next: {'deleted', source}.
RELEASE = (
    PRELUDE
    + """
local m = load(KEYS[1])
if not m then return {'missing', ''} end
local refs = redis.call('HINCRBY', KEYS[1], 'refs', -1)
if refs < 0 then redis.call('HSET', KEYS[1], 'refs', '0'); refs = 0 end
m.refs = tostring(refs)
if refs == 0 and m.gone then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {'deleted', m.src or ''}
end
backstop(m)
return {'ok'}
"""
)

# KEYS[1]: a path's link; ARGV[1]: the family it should lead to; ARGV[2]: 'del' (the stream
# there went), '' (it lives on: no expiry), or the ms its keys expire at (its backstop). Changes
# the link only while it still leads to that family (another may have claimed the path since):
# 1 when it did, else 0.
LINK_LIFE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'del' then
  redis.call('DEL', KEYS[1])
elseif ARGV[2] == '' then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[2]))
end
return 1
"""
