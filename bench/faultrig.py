"""The rig of the fault campaign (``bench/bench_faults.py``): real processes and the means to hurt them.

- :class:`Service`: one ``python -m intake|edge|synth`` process with its own log file, started,
  signalled (SIGKILL, SIGTERM, SIGSTOP/SIGCONT) and started again;
- :class:`RedisCtl`: a real redis-server with an AOF (``appendfsync everysec``), killed with -9,
  restarted on the same port and data, and a *power loss*: kill -9, then the AOF cut back to its
  size at a moment up to a second earlier (what the OS had not yet written to the disk);
- :class:`Proxy`: a TCP proxy between one worker and Redis; ``cut()`` holds every byte in both
  directions (a partition: no reset, the worker just stops hearing back), ``heal()`` lets them on.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from aiohttp import ClientSession, ClientTimeout

from streamtts.redisserver import RedisServer, start_server

# How often the AOF's size is sampled (the power loss cuts it back to one of these sizes).
AOF_SAMPLE_S = 0.05
# The longest a service may take to answer its health check after a start (a worker loads the model).
START_TIMEOUT_S = 180.0
# How long a SIGTERM'd process may take to exit before it is killed.
STOP_TIMEOUT_S = 40.0
PROXY_CHUNK = 65536


class Service:
    """One service process; ``health`` is its health URL (200 once it is ready)."""

    def __init__(self, name: str, module: str, env: dict[str, str], port: int, logs: Path) -> None:
        self.name, self.module, self.env, self.port = name, module, env, port
        self.log_path = logs / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def health(self) -> str:
        return f"http://127.0.0.1:{self.port}/healthz"

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module], env=self.env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()

    def send(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    async def exit(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Wait for the process to end (killing it after ``timeout_s``); its exit code."""
        if self.proc is None:
            return None
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self.proc.poll() is None:
            self.send(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    async def ready(self, http: ClientSession, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; its log ends:\n{tail}")
            try:
                async with http.get(self.health, timeout=ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        return
            except (OSError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready within {timeout_s:.0f}s; see {self.log_path}")

    async def stop(self) -> None:
        self.send(signal.SIGCONT)
        self.send(signal.SIGTERM)
        await self.exit()


class RedisCtl:
    """The campaign's Redis: AOF on, ``appendfsync everysec`` (the default this system ships)."""

    def __init__(self, data_dir: Path, appendfsync: str = "everysec") -> None:
        self.data_dir, self.appendfsync = data_dir, appendfsync
        self.server: RedisServer = start_server(data_dir, aof=True, appendfsync=appendfsync)
        self.port = self.server.port
        self._sizes: list[tuple[float, int]] = []  # (monotonic time, size of the newest incr AOF)
        self._sampler: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return self.server.url

    def start_sampling(self) -> None:
        self._sampler = asyncio.create_task(self._sample())

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        self.server.stop()

    def kill9(self) -> None:
        self.server.process.kill()
        self.server.process.wait()

    def restart(self) -> None:
        self._sizes.clear()
        self.server = start_server(self.data_dir, port=self.port, aof=True, appendfsync=self.appendfsync)

    def power_loss(self, cut_back_s: float) -> int:
        """kill -9, then cut the AOF back to its size ``cut_back_s`` ago; the bytes cut."""
        now = time.monotonic()
        self.kill9()
        aof = self._incr_aof()
        if aof is None:
            return 0
        times = [t for t, _ in self._sizes]
        k = bisect.bisect_right(times, now - cut_back_s) - 1
        keep = self._sizes[k][1] if k >= 0 else aof.stat().st_size
        size = aof.stat().st_size
        if keep < size:
            with aof.open("r+b") as f:
                f.truncate(keep)
        return max(0, size - keep)

    def _incr_aof(self) -> Path | None:
        files = sorted((self.data_dir / "appendonlydir").glob("*.incr.aof"), key=lambda p: p.stat().st_mtime)
        return files[-1] if files else None

    async def _sample(self) -> None:
        while True:
            aof = self._incr_aof()
            if aof is not None:
                try:
                    self._sizes.append((time.monotonic(), aof.stat().st_size))
                except OSError:
                    pass
            del self._sizes[:-400]  # 20 s of samples
            await asyncio.sleep(AOF_SAMPLE_S)


class Proxy:
    """A TCP proxy from a local port to Redis that can be cut (a partition) and healed."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True)
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(PROXY_CHUNK):
                await self._open.wait()  # cut: the bytes wait here, as in a partitioned network
                dst.write(data)
                await dst.drain()
        finally:
            dst.close()
