"""The HTTP side of the command-line client: submit, read a cast's state, follow its records.

Talks to the public origin only (the local front proxy or a deployment's), with httpx. Every
failure is one of three errors, each with the exit code the CLI returns and what to do next.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from castlog import Entry, describe_voice, from_public, is_cast_id, is_terminal
from servicekit.settings import declaration

from .config import Config

# Connecting fails fast (nothing listening is the common mistake); reads that follow a cast wait.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0  # edge sends a heartbeat every 15 s
# While the model loads (503 warming_up), a submit is retried for this long.
WARM_UP_WAIT_S = 300.0
# A dropped event stream is reopened from the next seq_num this many times in a row at most.
RECONNECTS = 5

EXIT_OK, EXIT_CAST_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class ClientError(Exception):
    exit_code = EXIT_CAST_ERROR


class UsageError(ClientError):
    """The request was refused as asked (an unknown voice, an empty text)."""

    exit_code = EXIT_USAGE


class Unreachable(ClientError):
    exit_code = EXIT_UNREACHABLE

    def __init__(self, url: str, why: str) -> None:
        super().__init__(
            f"cannot reach StreamTTS at {url} ({why}). Start it with `streamtts up`, or pass --url "
            f"(or set {declaration(Config, 'url').env}) to where it runs"
        )


def say(line: object) -> None:
    """A line for the user on stderr under the command's name: progress, a warning, why it failed."""
    print(f"streamtts: {line}", file=sys.stderr, flush=True)


def fail(why: object, exit_code: int) -> int:
    """Say why the command fails; its exit code, to return."""
    say(why)
    return exit_code


def split_link(id_or_link: str) -> tuple[str, str | None]:
    """``(cast id, the link's origin or None)`` from an id, ``/c/<id>`` or a full player link."""
    parts = urlsplit(id_or_link)
    path = parts.path.rstrip("/")
    cast_id = path.rsplit("/", 1)[-1]
    origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None
    if not is_cast_id(cast_id):
        raise UsageError(f"{id_or_link!r} is not a cast id or link (…/c/<12-character id>)")
    return cast_id, origin


class Api:
    """The public origin at ``url``."""

    def __init__(self, url: str, api_key: str | None = None) -> None:
        self.url = url.rstrip("/")
        timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.url, timeout=timeout, follow_redirects=False, headers=headers)

    def close(self) -> None:
        self.http.close()

    def link(self, cast_id: str) -> str:
        return f"{self.url}/c/{cast_id}"

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise Unreachable(self.url, _why(exc)) from None
        if response.status_code == 502:
            raise Unreachable(self.url, "its front proxy answers, but the service behind it does not")
        return response

    def voices(self) -> dict[str, Any]:
        response = self._warm(lambda: self._request("GET", "/api/voices"))
        return _json_or_raise(response)

    def submit(self, text: str, voice: str | None, title: str | None, speed: float | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"text": text, **({"voice": voice} if voice else {}), **({"title": title} if title else {})}
        if speed is not None:
            body["speed"] = speed
        response = self._warm(lambda: self._request("POST", "/api/casts", json=body))
        return _json_or_raise(response)

    def state(self, cast_id: str) -> dict[str, Any]:
        return _json_or_raise(self._request("GET", f"/api/casts/{cast_id}"))

    def _warm(self, send: Any) -> httpx.Response:
        """Send; while the system is warming up (503 warming_up), wait as told and send again."""
        deadline = time.monotonic() + WARM_UP_WAIT_S
        while True:
            response: httpx.Response = send()
            if response.status_code != 503 or time.monotonic() > deadline:
                return response
            if _error_of(response)[0] not in ("warming_up", "starting"):
                return response
            time.sleep(min(float(response.headers.get("Retry-After", "2")), 5.0))

    def records(self, cast_id: str, seq_num: int) -> Iterator[tuple[Entry, dict[str, Any]]]:
        """The cast's records from ``seq_num`` until its terminal record, each with its public JSON
        form (what edge sent), reopening a dropped stream where it broke off (records of kinds
        this version does not know are skipped)."""
        failures = 0
        while True:
            try:
                with self.http.stream("GET", f"/api/casts/{cast_id}/events", params={"seq_num": seq_num}) as response:
                    if response.status_code == 204:
                        return  # past the end of a finished log
                    if response.status_code != 200:
                        response.read()
                        _json_or_raise(response)
                    for seen, entry, public in _parse_sse(response.iter_lines()):
                        failures = 0
                        seq_num = seen + 1
                        if entry is None:
                            continue
                        yield entry, public
                        if is_terminal(entry.record):
                            return
            except (httpx.TransportError, httpx.StreamError) as exc:
                failures += 1
                if failures > RECONNECTS:
                    raise Unreachable(self.url, _why(exc)) from None
                time.sleep(min(2.0 * failures, 10.0))


def _parse_sse(lines: Iterator[str]) -> Iterator[tuple[int, Entry | None, dict[str, Any]]]:
    """Each event's seq_num, its record (None: an unknown kind) and castlog's public JSON form."""
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            record = json.loads("".join(data))
            data = []
            yield int(record["seq_num"]), from_public(record), record


def _error_of(response: httpx.Response) -> tuple[str, str]:
    try:
        body = response.json()
        return str(body.get("error", "")), str(body.get("message", response.text))
    except (ValueError, AttributeError):
        return "", response.text.strip() or response.reason_phrase


def _json_or_raise(response: httpx.Response) -> dict[str, Any]:
    if response.status_code < 400:
        return response.json()  # type: ignore[no-any-return]
    code, message = _error_of(response)
    if response.status_code == 401:
        # intake's 401 is OpenAI's error shape; the one thing to say is what to send
        raise UsageError("the server wants one of its API keys (401): pass --api-key KEY, or set $STREAMTTS_API_KEY")
    if response.status_code == 503 and code in ("warming_up", "starting"):
        raise ClientError(f"the server is still warming up: {message}")
    if code == "unknown_voice":
        raise UsageError(f"{message}; `streamtts voices` lists them")
    if 400 <= response.status_code < 500 and response.status_code != 429:
        raise UsageError(f"{message} ({code or response.status_code})")
    raise ClientError(f"the server answered {response.status_code}: {message}")


def _why(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError) and "refused" in text.lower():
        return "connection refused: nothing listens there"
    return text


def voice_traits(voice_id: str) -> tuple[str, str]:
    """(language, gender) from a Kokoro voice id (``jf_alpha``: Japanese, female), by castlog's
    voice metadata; ``"?"`` for what the id does not tell."""
    info = describe_voice(voice_id)
    return (info.language if info.lang else "?"), (info.gender or "?")
