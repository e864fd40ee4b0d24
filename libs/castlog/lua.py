"""Lua snippets that more than one script embeds."""

from __future__ import annotations

# Milliseconds from Redis's own clock, so every service compares times on one clock.
NOW_MS = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
"""

# A field of a stream entry's flat field list; false where the entry or the field is absent (false,
# not nil: a nil inside a reply table would cut the table short).
FIELD = """
local function field(entry, name)
  if not entry then return false end
  local f = entry[2]
  for i = 1, #f, 2 do if f[i] == name then return f[i + 1] end end
  return false
end
"""
