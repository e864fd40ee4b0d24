"""The start page on a server that wants an API key (STREAMTTS_API_KEYS): in headless Chromium,
a submit without a key says what to do, a key typed once is sent as `Authorization: Bearer` and
kept in the browser for the next visit. The real intake, edge and proxy (tests/support/origin.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.edge.test_edge_browser import browser  # noqa: F401 - the fixture
from tests.support.origin import Origin, running_origin

pytestmark = pytest.mark.browser

KEY = "page-test-key-0123456789-of-32-chars"


@pytest.fixture
async def origin(redis: Redis, redis_url: str) -> AsyncIterator[Origin]:
    async with running_origin(redis, redis_url, frozenset({KEY})) as running:
        yield running


async def test_the_page_holds_a_key_and_sends_it(origin: Origin, browser: Any) -> None:  # noqa: F811
    page = await (await browser.new_context()).new_page()
    await page.goto(f"{origin.url}/")
    await page.fill("#text", "Hello there. A second sentence.")
    await page.click("#submit")
    await page.wait_for_function("() => document.getElementById('error').textContent.includes('API key')")
    assert await page.evaluate("document.getElementById('key-box').open")

    await page.fill("#api-key", "not-the-key")
    await page.click("#submit")
    await page.wait_for_function("() => document.getElementById('error').textContent.includes('refused')")

    await page.fill("#api-key", KEY)
    await page.click("#submit")
    await page.wait_for_url("**/c/*")
    assert await page.evaluate("localStorage.getItem('streamtts.apiKey')") == KEY

    await page.goto(f"{origin.url}/")  # the next visit: the key is there, the box open
    assert await page.input_value("#api-key") == KEY
    assert await page.evaluate("document.getElementById('key-box').open")
