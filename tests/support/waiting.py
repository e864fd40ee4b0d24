"""Waiting with a deadline: until a condition holds, or until a started server answers its health
check."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request
from collections.abc import Callable

# How long one health probe may take before it counts as "not yet".
PROBE_TIMEOUT_S = 1.0


async def wait_until(check: Callable[[], object], timeout_s: float = 30.0, interval_s: float = 0.02) -> None:
    """Poll ``check`` (sync, or returning an awaitable) until it is truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        await asyncio.sleep(interval_s)


def wait_healthy(
    url: str, proc: subprocess.Popen[bytes], name: str, timeout_s: float, interval_s: float = 0.2
) -> None:
    """Block until ``url`` answers 200; fail at once if ``proc`` (the server) exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{name} exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:
                if response.status == 200:
                    return
        except OSError:  # refused while it starts, or a 5xx while it warms up
            pass
        time.sleep(interval_s)
    raise AssertionError(f"{name} not healthy at {url} after {timeout_s}s")
