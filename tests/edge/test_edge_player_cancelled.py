"""The player says when a cast was cut short, in headless Chromium: a cancelled cast (its `eos`
marked `cancelled`) shows "cancelled" and how much was spoken of how much was asked, not "done"
with the spoken part as the whole; a cast that ended whole still says "done"."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from castlog import CastStore, Eos, Meta, Start, content_id
from tests.edge import test_edge_browser as pages
from tests.edge import test_edge_player_states as states
from tests.edge.edge_helpers import Cast

pytestmark = pytest.mark.browser

site, browser = pages.site, pages.browser
SENTENCES = states.SENTENCES  # six


async def opened(server: TestServer, browser: Any, cast: Cast) -> tuple[Any, dict[str, Any]]:
    page = await browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    return page, await states.wait_for(page, "s['done'] and s['chunks'] >= 1")


async def test_a_cancelled_cast_says_so_and_how_much_was_spoken(
    site: tuple[TestServer, Any], browser: Any, store: CastStore
) -> None:
    server, _ = site
    cast = await states.new_cast(store, SENTENCES, tag=" cut")
    spoken = states.audio(SENTENCES, 0, 2)
    ms = spoken[-1].o + spoken[-1].d
    await cast.append(*spoken, Eos(sentences=2, audio_ms=ms, attempts=1, cancelled=True))
    page, s = await opened(server, browser, cast)
    assert s["status"] == "cancelled" and s["progress"] == f"2 of 6 sentences, {ms / 1000:.1f} s"
    assert (await page.inner_text("#status")).lower() == "cancelled"  # shown upper-case
    assert await page.get_attribute("#status", "data-status") == "cancelled"
    await page.close()


async def test_a_cancelled_live_cast_says_how_much_was_spoken(
    site: tuple[TestServer, Any], browser: Any, store: CastStore
) -> None:
    server, _ = site
    cast = Cast(store, content_id("a live one", pages.VOICES[0]))
    meta = Meta(title="Live cast", voice=pages.VOICES[0], chars=0, sentences=0, created_at=0, live=True)
    assert await store.submit(cast.id, "a live one", pages.VOICES[0], meta) == "new"
    cast.tail = 1
    spoken = states.audio(SENTENCES, 0, 3)
    ms = spoken[-1].o + spoken[-1].d
    await cast.append(Start(attempt=1, resume_from=0, at=0), *spoken,
                      Eos(sentences=3, audio_ms=ms, attempts=1, cancelled=True))
    page, s = await opened(server, browser, cast)
    assert s["status"] == "cancelled" and s["progress"] == f"3 sentences, {ms / 1000:.1f} s"
    await page.close()


async def test_a_cast_that_ended_whole_still_says_done(
    site: tuple[TestServer, Any], browser: Any, store: CastStore
) -> None:
    server, _ = site
    cast = await states.new_cast(store, SENTENCES[:2], tag=" whole")
    spoken = states.audio(SENTENCES[:2], 0, 2)
    await cast.append(*spoken, Eos(sentences=2, audio_ms=spoken[-1].o + spoken[-1].d, attempts=1))
    page, s = await opened(server, browser, cast)
    assert s["status"] == "done" and s["progress"] == "2 of 2 sentences"
    assert (await page.inner_text("#status")).lower() == "done"
    await page.close()
