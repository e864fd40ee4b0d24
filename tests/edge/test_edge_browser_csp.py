"""Finding 7 of #21: no page or asset carried a CSP, nosniff, frame-ancestors or Referrer-Policy
(a cast's link, a capability to listen, leaked in Referer). Every answer of the real origin
(intake, edge and the front proxy: tests/support/origin.py) carries them now, and in headless
Chromium the pages still work under the CSP: a submit plays to the end, /docs renders, and the
browser reports no violation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientSession
from redis.asyncio import Redis

from servicekit.headers import SECURITY_HEADERS
from tests.edge.test_edge_browser import browser  # noqa: F401 - the fixture
from tests.support.origin import Origin, running_origin

# Every violation the page sees, and every console line (Chromium logs a refused script there).
# The page's own checks below are functions, not strings: a string is eval'd, which the CSP refuses.
WATCH = """
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation',
        (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


@pytest.fixture
async def origin(redis: Redis, redis_url: str) -> AsyncIterator[Origin]:
    async with running_origin(redis, redis_url) as running:
        yield running


@pytest.mark.rule("security-headers")
async def test_every_answer_carries_the_security_headers(origin: Origin) -> None:
    async with ClientSession() as http:
        async with http.post(f"{origin.url}/api/casts", json={"text": "Headers everywhere."}) as response:
            assert response.status in (200, 201), await response.text()
            cast_id = (await response.json())["id"]
        paths = ["/", f"/c/{cast_id}", "/static/app.js", "/static/style.css", "/docs", "/api/voices",
                 f"/api/casts/{cast_id}", "/api/casts/AAAAAAAAAAAA", "/no/such/route", "/healthz", "/readyz",
                 f"/api/casts/{cast_id}/records"]
        for path in paths:
            async with http.get(f"{origin.url}{path}") as response:
                await response.read()
                for name, value in SECURITY_HEADERS.items():
                    assert response.headers.getall(name, []) == [value], (path, name)
    csp = SECURITY_HEADERS["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp and "unsafe-eval" not in csp


@pytest.mark.browser
@pytest.mark.rule("security-headers")
async def test_the_pages_work_under_the_csp_without_a_violation(origin: Origin, browser: Any) -> None:  # noqa: F811
    page = await (await browser.new_context()).new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text))
    await page.add_init_script(WATCH)
    await page.goto(f"{origin.url}/")
    await page.wait_for_function("() => document.querySelectorAll('#voice option').length > 0", timeout=20_000)
    await page.fill("#text", "Hello there. A second sentence.")
    await page.click("#submit")
    await page.wait_for_url("**/c/*")
    await page.wait_for_function("() => window.streamttsPlayer && window.streamttsPlayer.state.ended", timeout=30_000)
    assert await page.evaluate("() => window.cspViolations") == []
    await page.goto(f"{origin.url}/docs")
    await page.wait_for_selector("#operations-openai-createSpeech", timeout=20_000)
    assert await page.evaluate("() => window.cspViolations") == []
    assert [line for line in console if "Content Security Policy" in line] == []
    await page.close()
