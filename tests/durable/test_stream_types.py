"""Finding 4 of #35: a stream's Content-Type was whatever its creator sent, and edge served it back
on the origin: a `text/html` stream loading an `application/javascript` stream ran script under
the pages' `script-src 'self'` and read the API key the page keeps. A stream's type is now one of
the passive ones (415 otherwise), a stream stored before that is served as bytes, and every
answer under /v1/stream is `nosniff`, sandboxed and, opened directly, a download."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import ClientSession
from redis.asyncio import Redis

from durablestreams import protocol
from durablestreams.streams import DurableStreams, Spec
from tests.durable.conftest import serving_origin
from tests.edge.test_edge_browser import browser  # noqa: F401 - the fixture

ACTIVE = ("text/html", "application/javascript", "text/javascript", "image/svg+xml", "application/xhtml+xml",
          "text/xml", "text/plain;a=b,text/html", "TEXT/HTML; charset=utf-8")
STOLEN = "stolen"
OWNER = "addr:127.0.0.1"  # intake.durable.stream_owner of this test's client
# What the attack stored: a page that loads a script stream, which sends the page's key away.
PAGE = b'<script src="/v1/stream/legacy/evil.js"></script><script>window.pwned = "inline"</script>'
SCRIPT = (b"window.pwned = 'script'; fetch('/v1/stream/" + STOLEN.encode()
          + b"', {method: 'PUT', headers: {'Content-Type': 'text/plain'}, body: localStorage.getItem('streamtts.apiKey')})")


async def _legacy(redis: Redis) -> None:
    """Streams of active types as a server before the allow-list stored them (this test's own:
    created from 127.0.0.1 through the proxy)."""
    streams = DurableStreams(redis)
    for path, kind, body in (("legacy/evil.html", "text/html", PAGE), ("legacy/evil.js", "application/javascript", SCRIPT)):
        assert (await streams.create(path, Spec(kind, owner=OWNER), [body])).status == "created"


@pytest.mark.rule("ds-passive-types", "ds-security-headers")
async def test_an_active_type_is_refused_and_one_stored_before_is_served_as_bytes(redis: Redis, redis_url: str) -> None:
    async with serving_origin(redis, redis_url) as base, ClientSession() as http:
        for kind in ACTIVE:
            async with http.put(f"{base}/v1/stream/page", headers={"Content-Type": kind}, data=b"<b>x</b>") as response:
                assert response.status == 415, kind
                error = (await response.json())["error"]
                assert error["code"] == "unsupported_type" and "text/plain" in error["message"], kind
        assert await redis.keys("ds/*") == []
        async with http.put(f"{base}/v1/stream/ok", headers={"Content-Type": "text/plain; charset=utf-8"},
                            data=b"<b>x</b>") as response:
            assert response.status == 201
        await _legacy(redis)
        for name, kind in (("ok", "text/plain; charset=utf-8"), ("legacy/evil.html", "application/octet-stream"),
                           ("legacy/evil.js", "application/octet-stream")):
            for method in ("GET", "HEAD"):
                async with http.request(method, f"{base}/v1/stream/{name}") as response:
                    assert response.status == 200, (name, method)
                    assert response.headers["Content-Type"] == kind, (name, method)
                    assert response.headers["X-Content-Type-Options"] == "nosniff"
                    assert response.headers.getall("Content-Security-Policy") == [protocol.STREAM_CSP]
                    assert response.headers["Content-Disposition"] == "attachment"
        async with http.put(f"{base}/v1/stream/legacy/fork", headers={"Stream-Forked-From": "/v1/stream/legacy/evil.html"},
                            skip_auto_headers=["Content-Type"]) as response:  # a fork takes its source's type
            assert response.status == 201
        async with http.get(f"{base}/v1/stream/legacy/fork") as response:
            assert response.headers["Content-Type"] == "application/octet-stream"
            assert await response.read() == PAGE


@pytest.mark.browser
@pytest.mark.rule("ds-passive-types")
async def test_no_script_runs_from_a_stream_in_chromium(redis: Redis, redis_url: str, browser: Any) -> None:  # noqa: F811
    async with serving_origin(redis, redis_url) as base:
        await _legacy(redis)
        page = await (await browser.new_context(accept_downloads=True)).new_page()
        await page.goto(f"{base}/")
        await page.evaluate("() => localStorage.setItem('streamtts.apiKey', 'the-key-of-this-browser')")
        # The page's own CSP allows a script of this origin: only the stream's type stops it.
        loaded = await page.evaluate("""() => new Promise((done) => {
            const s = document.createElement('script');
            s.src = '/v1/stream/legacy/evil.js';
            s.onload = () => done('ran');
            s.onerror = () => done('refused');
            document.head.appendChild(s);
        })""")
        assert loaded == "refused"
        assert await page.evaluate("() => window.pwned === undefined")
        # Opened directly, the page stream is a download: no document, so none of its script runs.
        async with page.expect_download() as download:
            with pytest.raises(Exception, match="net::ERR_ABORTED|Download is starting"):
                await page.goto(f"{base}/v1/stream/legacy/evil.html")
        assert await (await download.value).path() is not None
        await page.close()
    assert await redis.keys(f"*{STOLEN}*") == []
