"""Lua snippets that more than one script embeds."""

from __future__ import annotations

# Milliseconds from Redis's own clock, so every service compares times on one clock.
NOW_MS = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
"""
