"""The running compose stack, checked from the host as its users reach it (scripts/compose-check).

Every request goes through Caddy's published port (Wyoming through intake's); Prometheus is read
on its loopback port; `docker compose` (the command after `--`) restarts containers and runs
redis-cli inside the Redis container, the only place Redis can be reached from. Texts are short:
the model runs on a shared CPU inside a container.

    python -m tests.deploy.compose_probe --origin http://127.0.0.1:8080 --wyoming-port 10210 \\
        --prometheus http://127.0.0.1:9090 --settings compose/streamtts.env -- docker compose -f ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import yaml
from aiohttp import ClientSession, ClientTimeout
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeVoice

from .dashboard import dashboard_queries

REPO = Path(__file__).resolve().parents[2]
CAST_S = 240.0  # one short cast on a shared CPU, with a restart in the middle
SCRAPE_S = 90.0  # Prometheus scrapes every 15 s and finds services by DNS every 15 s
# redis-py announces itself with CLIENT SETINFO and ignores a refusal; the ACL does not grant it.
TOLERATED_REFUSALS = {"client|setinfo"}
# What each service's Redis user must be refused (docs/deploy.md, "Redis users (ACL)").
FORBIDDEN = {
    "default": ["PING", "GET catalog/x", "XADD jobs * k v"],  # off: refused before any ACL check (NOAUTH)
    "edge": ["XADD pub/casts/compose-check * k v", "XRANGE jobs - +", "CLIENT UNBLOCK 1", "FLUSHALL"],
    "intake": ["DEL catalog/compose-check", "XRANGE deletes - +", "XADD synth/voices * k v", "CONFIG GET maxmemory",
               "CLIENT UNBLOCK 1"],
    "synth": ["XADD deletes * k v", "XADD jobs/lane/compose-check * k v", "CONFIG GET maxmemory", "KEYS *",
              "CLIENT UNBLOCK 1"],
}
MULTI_SENTENCE = "First, a short sentence. Then a second one. A third follows it. And the last one ends the cast."


class Probe:
    def __init__(self, args: argparse.Namespace, http: ClientSession) -> None:
        settings = dict(line.split("=", 1) for line in Path(args.settings).read_text().splitlines()
                        if "=" in line and not line.startswith("#"))
        self.origin: str = args.origin
        self.wyoming_port: int = args.wyoming_port
        self.prometheus: str = args.prometheus
        self.compose: list[str] = args.compose
        self.key = settings["STREAMTTS_API_KEYS"].split(",")[0]
        self.auth = {"Authorization": f"Bearer {self.key}"}
        self.http = http
        self.voice = ""
        self.casts: list[str] = []  # every acknowledged cast, checked again after Redis restarts

    def docker(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run([*self.compose, *args], input=stdin, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    async def json(self, method: str, path: str, payload: Any = None, want: int = 200) -> Any:
        async with self.http.request(method, self.origin + path, json=payload, headers=self.auth) as response:
            body = await response.read()
            assert response.status == want, f"{method} {path}: {response.status} {body[:300]!r}"
            return json.loads(body)

    async def submit(self, text: str) -> str:
        reply = await self.json("POST", "/api/casts", {"text": text}, want=201)
        self.casts.append(reply["id"])
        return str(reply["id"])

    async def events(self, cast_id: str, on_first_audio: Callable[[], Awaitable[None]] | None = None) -> list[str]:
        """The cast's SSE event kinds from its start to its end."""
        kinds: list[str] = []
        async with self.http.get(f"{self.origin}/api/casts/{cast_id}/events?seq_num=0",
                                 timeout=ClientTimeout(total=CAST_S)) as response:
            assert response.status == 200, response.status
            assert response.headers["Content-Type"].startswith("text/event-stream")
            async for raw in response.content:
                if raw.startswith(b"event:"):
                    kinds.append(raw.split(b":", 1)[1].strip().decode())
                    if kinds[-1] == "audio" and on_first_audio is not None:
                        await on_first_audio()
                        on_first_audio = None
                    if kinds[-1] in ("eos", "error"):
                        break
        return kinds

    async def done(self, cast_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + CAST_S
        while True:
            state = await self.json("GET", f"/api/casts/{cast_id}")
            if state["status"] in ("done", "error"):
                return dict(state)
            assert time.monotonic() < deadline, state
            await asyncio.sleep(0.5)

    async def mp3(self, path: str) -> bytes:
        async with self.http.get(self.origin + path) as response:
            audio = await response.read()
            assert response.status == 200, f"GET {path}: {response.status}"
        assert len(audio) > 1000 and (audio[:3] == b"ID3" or (audio[0] == 0xFF and audio[1] & 0xE0 == 0xE0)), audio[:4]
        return audio

    async def whole(self, cast_id: str) -> None:
        """The cast ended done, every planned part made, and plays."""
        state = await self.done(cast_id)
        assert state["status"] == "done" and state["finished"] == state["planned"] >= 1, state
        await self.mp3(f"/api/casts/{cast_id}/audio.mp3")

    # -- the checks, in order -------------------------------------------------------------------

    async def cast_plays_over_sse_mp3_and_page(self) -> None:
        self.voice = (await self.json("GET", "/api/voices"))["default"]
        cast_id = await self.submit("Hello from the compose check. It ends here.")
        kinds = await self.events(cast_id)
        assert kinds[0] == "meta" and "audio" in kinds and kinds[-1] == "eos", kinds
        await self.whole(cast_id)
        async with self.http.get(f"{self.origin}/c/{cast_id}") as response:
            assert response.status == 200 and response.headers["Content-Type"].startswith("text/html")

    async def openai_client_streams_speech(self) -> None:
        client = openai.AsyncOpenAI(base_url=f"{self.origin}/v1", api_key=self.key, max_retries=0, timeout=CAST_S)
        audio = b""
        async with client.audio.speech.with_streaming_response.create(
                model="tts-1", voice=self.voice, input="Spoken for an OpenAI client.",  # type: ignore[arg-type]
                response_format="mp3") as response:
            async for chunk in response.iter_bytes():
                audio += chunk
        await client.close()
        assert len(audio) > 1000 and (audio[:3] == b"ID3" or audio[0] == 0xFF), audio[:4]

    async def live_websocket_turn(self) -> None:
        async with self.http.ws_connect(self.origin.replace("http", "ws", 1) + "/v1/audio/speech/live",
                                        headers=self.auth, timeout=CAST_S) as ws:
            await ws.send_json({"type": "start"})
            cast_id = json.loads((await ws.receive(timeout=30)).data)["id"]
            for word in "A live turn, word by word.".split(" "):
                await ws.send_json({"type": "text", "text": word + " "})
            await ws.send_json({"type": "close"})
            audio = b"".join([msg.data async for msg in ws if msg.type == aiohttp.WSMsgType.BINARY])
        assert len(audio) > 1000, len(audio)
        self.casts.append(cast_id)
        await self.whole(cast_id)

    async def speak_turn(self) -> None:
        url = self.origin.replace("http", "ws", 1) + "/v1/speak?encoding=linear16&sample_rate=16000"
        async with self.http.ws_connect(url, headers=self.auth, timeout=CAST_S) as ws:
            assert json.loads((await ws.receive(timeout=30)).data)["type"] == "Metadata"
            await ws.send_json({"type": "Speak", "text": "A spoken turn."})
            await ws.send_json({"type": "Flush"})
            audio = b""
            while True:
                msg = await ws.receive(timeout=CAST_S)
                if msg.type == aiohttp.WSMsgType.BINARY:
                    audio += msg.data
                    continue
                assert msg.type == aiohttp.WSMsgType.TEXT, msg
                if json.loads(msg.data)["type"] == "Flushed":
                    break
            await ws.send_json({"type": "Close"})
        assert len(audio) > 8000, len(audio)  # a quarter of a second of 16 kHz PCM at least

    async def wyoming_synthesize(self) -> None:
        async with AsyncTcpClient("127.0.0.1", self.wyoming_port) as client:
            request = Synthesize(text="Home Assistant speaks.", voice=SynthesizeVoice(name=self.voice)).event()
            request.data["api_key"] = self.key  # STREAMTTS_API_KEYS are set: the first event carries one
            await client.write_event(request)
            audio = b""
            while (event := await asyncio.wait_for(client.read_event(), CAST_S)) is not None:
                assert event.type != "error", event.data
                if AudioChunk.is_type(event.type):
                    audio += AudioChunk.from_event(event).audio
                elif event.type == "audio-stop":
                    break
        assert len(audio) > 8000, len(audio)

    async def durable_streams_read(self) -> None:
        url = f"{self.origin}/v1/stream/compose-check-{secrets.token_hex(4)}"
        async with self.http.put(url, data=b"hello", headers={**self.auth, "Content-Type": "text/plain"}) as response:
            assert response.status == 201, response.status
        async with self.http.get(url, headers=self.auth) as response:  # a read: edge (keys set: with one)
            assert (response.status, await response.read()) == (200, b"hello")
        async with self.http.get(url) as response:  # without a key, refused
            assert response.status == 401, response.status
        async with self.http.get(f"{self.origin}/v1/stream/casts/{self.casts[0]}") as response:  # public
            assert response.status == 200 and response.headers["Content-Type"] == "audio/mpeg", response.status
            assert len(await response.read()) > 1000

    async def prometheus_targets_rules_and_dashboard(self) -> None:
        deadline = time.monotonic() + SCRAPE_S
        while True:  # every job found by DNS and scraped at least once
            async with self.http.get(f"{self.prometheus}/api/v1/targets") as response:
                targets = (await response.json())["data"]["activeTargets"]
            health = sorted((t["labels"]["job"], t["labels"]["instance"], t["health"], t["lastError"]) for t in targets)
            jobs = {t[0] for t in health}
            if jobs >= {"intake", "edge", "synth", "prometheus"} and all(t[2] == "up" for t in health):
                break
            assert time.monotonic() < deadline, health
            await asyncio.sleep(2)
        print(f"  targets up: {', '.join(f'{t[0]}@{t[1]}' for t in health)}")
        async with self.http.get(f"{self.prometheus}/api/v1/rules") as response:
            loaded = {r["name"] for g in (await response.json())["data"]["groups"] for r in g["rules"]}
        alerts = yaml.safe_load((REPO / "compose/prometheus/alerts.yml").read_text())
        written = {r["alert"] for g in alerts["groups"] for r in g["rules"] if "alert" in r}
        assert written and written <= loaded, written - loaded
        print(f"  alert rules loaded: {len(written)}")
        queries = dashboard_queries()
        while True:  # a rate() has series once two scrapes saw its counter: wait for them
            empty = []
            for query in queries:
                async with self.http.get(f"{self.prometheus}/api/v1/query", params={"query": query.promql}) as response:
                    reply = await response.json()
                assert reply["status"] == "success", (query, reply)
                if not reply["data"]["result"]:
                    empty.append(f"{query.panel} [{query.ref_id}]")
            if not empty:
                break
            assert time.monotonic() < deadline + SCRAPE_S, f"dashboard queries without series: {empty}"
            await asyncio.sleep(5)
        print(f"  dashboard queries with series: {len(queries)} of {len(queries)}")

    async def redis_users_are_refused_what_they_must_not_do(self) -> None:
        # First the ACL log: every command Redis refused the services since it started.
        log = self.redis_cli('REDISCLI_AUTH="$REDIS_PASSWORD_ADMIN" ', "--user admin --json ", "ACL LOG 200", raw=False)
        refused = {(entry["username"], entry["object"]) for entry in json.loads(log or "[]")}
        assert {r for r in refused if r[1] not in TOLERATED_REFUSALS} == set(), f"Redis refused the services: {refused}"
        for user, commands in FORBIDDEN.items():
            auth = "" if user == "default" else f'REDISCLI_AUTH="$REDIS_PASSWORD_{user.upper()}" '
            login = "" if user == "default" else f"--user {user} "
            if user != "default":
                assert self.redis_cli(auth, login, "PING") == "PONG", user  # the password works
            for command in commands:
                reply = self.redis_cli(auth, login, command)
                assert reply.startswith("NOAUTH" if user == "default" else "NOPERM"), f"{user}: {command}: {reply}"

    def redis_cli(self, auth: str, login: str, command: str, raw: bool = True) -> str:
        script = f"{auth}redis-cli {login}{'--raw ' if raw else ''}{command}"
        return self.docker("exec", "-T", "redis", "sh", "-c", script).strip()

    async def synth_restart_mid_cast_ends_whole(self) -> None:
        cast_id = await self.submit(MULTI_SENTENCE)

        async def restart() -> None:
            await asyncio.to_thread(self.docker, "restart", "synth")

        kinds = await self.events(cast_id, on_first_audio=restart)
        assert kinds[-1] == "eos", kinds
        await self.whole(cast_id)

    async def redis_restart_keeps_acknowledged_casts(self) -> None:
        latest = await self.submit("Acknowledged just before Redis restarts.")
        await asyncio.to_thread(self.docker, "restart", "redis")
        deadline = time.monotonic() + CAST_S
        while True:  # the services reconnect on their own
            try:
                await self.json("GET", "/api/voices")
                break
            except (AssertionError, aiohttp.ClientError):
                assert time.monotonic() < deadline, "intake never answered after Redis restarted"
                await asyncio.sleep(1)
        await self.whole(latest)
        for cast_id in self.casts:
            state = await self.json("GET", f"/api/casts/{cast_id}")
            assert state["status"] == "done", state


CHECKS = [
    Probe.cast_plays_over_sse_mp3_and_page,
    Probe.openai_client_streams_speech,
    Probe.live_websocket_turn,
    Probe.speak_turn,
    Probe.wyoming_synthesize,
    Probe.durable_streams_read,
    Probe.redis_users_are_refused_what_they_must_not_do,
    Probe.synth_restart_mid_cast_ends_whole,
    Probe.redis_restart_keeps_acknowledged_casts,
    Probe.prometheus_targets_rules_and_dashboard,  # last: by then every counter has been scraped twice
]


async def main(args: argparse.Namespace) -> int:
    failed = 0
    async with ClientSession(timeout=ClientTimeout(total=CAST_S)) as http:
        probe = Probe(args, http)
        for check in CHECKS:
            started = time.monotonic()
            try:
                await check(probe)
            except Exception as e:  # noqa: BLE001 - report every check, then fail once
                failed += 1
                print(f"FAIL {check.__name__} ({time.monotonic() - started:.0f} s): {type(e).__name__}: {e}", flush=True)
                if check is CHECKS[0]:
                    break  # nothing else can pass without the first cast
            else:
                print(f"ok   {check.__name__} ({time.monotonic() - started:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--origin", required=True, help="Caddy's published origin, http://127.0.0.1:PORT")
    parser.add_argument("--wyoming-port", type=int, required=True)
    parser.add_argument("--prometheus", required=True, help="Prometheus' published origin")
    parser.add_argument("--settings", required=True, help="the stack's streamtts.env (its API key)")
    parser.add_argument("compose", nargs="+", help="the docker compose command, after --")
    sys.exit(asyncio.run(main(parser.parse_args())))
