"""The paste page's talk mode in headless Chromium with a real RTCPeerConnection: typed text goes
over the control channel, the track's audio is heard (a level meter on it, the stand-in model's
tone), the states say what is true, and Stop silences it. The real intake, edge, proxy and synth
with a stand-in model (tests/support/origin.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.edge.test_edge_browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.origin import Origin, running_origin

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

# Chromium offers its host candidates as mDNS names unless told not to; aiortc would have to
# resolve them (over multicast, which a test host may not carry).
TALK_ARGS = [*CHROMIUM_ARGS, "--disable-features=WebRtcHideLocalIpsWithMdns"]


@pytest.fixture
async def origin(redis: Redis, redis_url: str) -> AsyncIterator[Origin]:
    async with running_origin(redis, redis_url) as running:
        yield running


@pytest.fixture
async def chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=TALK_ARGS, headless=True)
        yield browser
        await browser.close()


async def talk_state(page: Any) -> dict[str, Any]:
    state: dict[str, Any] = await page.evaluate("() => ({...window.streamttsTalk.state})")
    return state


@pytest.mark.rule("webrtc-same-session")
async def test_talk_mode_speaks_typed_sentences_and_stop_silences_it(origin: Origin, chromium: Any) -> None:
    page = await (await chromium.new_context()).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{origin.url}/")
    assert await page.text_content("#talk-state") == "Not connected"
    await page.click("#talk-start")
    await page.wait_for_function("() => window.streamttsTalk.state.phase === 'listening'", timeout=20_000)
    assert (await talk_state(page))["url"].startswith("/c/")
    assert await page.is_visible("#talk-link") and await page.is_enabled("#talk-text")
    await page.wait_for_timeout(300)
    assert not (await talk_state(page))["heard"]  # connected, the track plays silence: nothing heard

    await page.type("#talk-text", "Hello there, this is a test of talking.", delay=5)
    await page.press("#talk-text", "Enter")
    await page.wait_for_function("() => window.streamttsTalk.state.heard", timeout=30_000)
    state = await talk_state(page)
    assert state["sentences"] >= 1 and state["level"] > 0.01
    assert state["phase"] in ("speaking", "listening")

    # a long sentence, then Stop while it plays: the state says stopped, the
    # connection is closed and nothing plays (the aiortc test measures the track going silent)
    await page.type("#talk-text", " " + "This sentence goes on for quite a while so that it is still playing. " * 3)
    await page.press("#talk-text", "Enter")
    await page.wait_for_function("() => window.streamttsTalk.state.phase === 'speaking'", timeout=30_000)
    await page.click("#talk-stop")
    await page.wait_for_function("() => window.streamttsTalk.state.phase === 'cancelled'", timeout=10_000)
    assert await page.evaluate("() => window.streamttsTalk.pc.connectionState") == "closed"
    assert await page.evaluate("() => document.getElementById('talk-audio').srcObject") is None
    assert await page.is_visible("#talk-start") and not await page.is_enabled("#talk-text")
    assert errors == []
