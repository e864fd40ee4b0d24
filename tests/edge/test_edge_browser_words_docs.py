"""In headless Chromium: the player highlights the spoken word; /docs renders the API from this origin."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from castlog import Audio, CastStore, Eos, Start
from tests.edge.edge_helpers import Cast, mp3_chunk
from tests.edge.test_edge_browser import Worker, browser, site  # noqa: F401 - the fixtures

pytestmark = pytest.mark.browser

SENTENCES = [("Hello there, friend.", ["Hello", "there", "friend"]), ("Bye 1999 now.", ["Bye", "nineteen", "now"])]


async def test_the_spoken_word_is_highlighted_in_order(
    site: tuple[TestServer, Worker], browser: Any, store: CastStore  # noqa: F811 - fixtures
) -> None:
    server, _ = site
    cast = Cast(store, "WordsPlayer0")
    await cast.submit(len(SENTENCES))
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    o = 0
    for i, (text, words) in enumerate(SENTENCES):
        body, d = mp3_chunk(1500, 300.0 + 100 * i)
        w = tuple((word, 100 + k * 450, 450 + k * 450) for k, word in enumerate(words))
        await cast.append(Audio(i=i, t=text, d=d, o=o, w=w, body=body))
        o += d
    await cast.append(Eos(sentences=len(SENTENCES), audio_ms=o, attempts=1))
    page = await browser.new_page()
    # every change of the highlighted word, seen by the page itself (a poll from here can miss a
    # word that is spoken for less time than one poll takes on a loaded machine)
    await page.add_init_script("""
        window.spokenWords = [];
        new MutationObserver(() => {
            const el = document.querySelector('#captions .word.speaking');
            const word = el ? el.textContent : '';
            const seen = window.spokenWords;
            if (word && seen[seen.length - 1] !== word) seen.push(word);
        }).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ['class']});
    """)
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    await page.wait_for_function("() => window.streamttsPlayer && window.streamttsPlayer.state.ended", timeout=30_000)
    seen = await page.evaluate("window.spokenWords")
    # "1999" is read as "nineteen ninety-nine": a word that matches no written word is not marked
    assert seen == ["Hello", "there,", "friend.", "Bye", "now."]
    await page.close()


async def test_the_api_page_renders_the_document_from_this_origin_only(
    site: tuple[TestServer, Worker], browser: Any  # noqa: F811 - fixtures
) -> None:
    server, _ = site
    page = await browser.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    await page.goto(str(server.make_url("/docs")))
    await page.wait_for_selector("#operations-openai-createSpeech", timeout=20_000)
    assert await page.is_visible("#operations-edge-castCaptions")
    origin = str(server.make_url("/"))
    assert requested and all(url.startswith(origin) for url in requested), "no CDN: every asset from here"
    await page.close()
