"""The pages in headless Chromium (Debian's, driven by Playwright; no browser download).

Edge serves the pages; a small stand-in for intake's POST /generate and GET /api/voices writes
the cast log through castlog with real MP3 chunks, paced like a fast worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from castlog import Audio, CastStore, Eos, LogReader, Meta, Start, content_id
from chunking import split_text
from edge import Config, create_app
from tests.edge.edge_helpers import Cast, mp3_chunk

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--autoplay-policy=no-user-gesture-required",
]
PACE_S = 0.12  # one sentence appended this often: faster than it plays
MAX_GAP_S = 0.005
VOICES = ["af_heart", "jf_alpha"]


def sentence_ms(text: str) -> int:
    return max(300, min(700, 6 * len(text)))


class Worker:
    """Appends a cast's records like a worker would: start, one audio record per sentence, eos."""

    def __init__(self, store: CastStore) -> None:
        self.store = store
        self.tasks: set[asyncio.Task[None]] = set()
        self.pace_s = PACE_S

    async def run(self, cast: Cast, sentences: list[str], first: int = 0) -> None:
        o = 0
        if first == 0:
            await cast.append(Start(attempt=1, resume_from=0, at=0))
        for i, text in enumerate(sentences):
            body, d = mp3_chunk(sentence_ms(text), 200.0 + 30 * (i % 10))
            if i >= first:
                await cast.append(Audio(i=i, t=text, d=d, o=o, body=body))
                await asyncio.sleep(self.pace_s)
            o += d
        await cast.append(Eos(sentences=len(sentences), audio_ms=o, attempts=1))

    def spawn(self, cast: Cast, sentences: list[str], first: int = 0) -> None:
        task = asyncio.create_task(self.run(cast, sentences, first))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


def stand_in_intake(app: web.Application, store: CastStore, worker: Worker) -> None:
    async def voices(request: web.Request) -> web.Response:
        return web.json_response({"voices": VOICES, "default": VOICES[0]})

    async def generate(request: web.Request) -> web.Response:
        body = await request.json()
        text, voice = body["text"].strip(), body.get("voice") or VOICES[0]
        if "FORBIDDEN" in text:  # intake's refusals look like this
            return web.json_response({"error": "invalid_text", "message": "this text cannot be read out"}, status=422)
        cid = content_id(text, voice)
        sentences = split_text(text)
        meta = Meta(title=body.get("title") or text[:40], voice=voice, chars=len(text),
                    sentences=len(sentences), created_at=int(time.time() * 1000))
        result = await store.submit(cid, text, voice, meta)
        if result == "new":
            worker.spawn(Cast(store, cid, tail=1), sentences)
        return web.json_response({"id": cid, "url": f"/c/{cid}", "status": result}, status=201)

    app.router.add_get("/api/voices", voices)
    app.router.add_post("/generate", generate)


@pytest.fixture
async def site(edge_config: Config, store: CastStore) -> AsyncIterator[tuple[TestServer, Worker]]:
    worker = Worker(store)
    app = create_app(dataclasses.replace(edge_config, sse_heartbeat_s=1.0))
    stand_in_intake(app, store, worker)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield server, worker
    for task in list(worker.tasks):
        task.cancel()
    await server.close()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        await chromium.close()


async def player_state(page: Any) -> dict[str, Any]:
    state: dict[str, Any] = await page.evaluate("""() => {
        const s = window.streamttsPlayer.state;
        const li = document.querySelector('#captions li.current');
        s.highlighted = li ? Number(li.dataset.i) : -1;
        return s;
    }""")
    return state


async def play_to_the_end(page: Any, sentences: int, timeout_s: float = 40.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Sample the player every 50 ms until it played the whole cast; the last state and samples."""
    samples: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = await player_state(page)
        samples.append(state)
        if state["ended"] and state["chunks"] == sentences:
            return state, samples
        await asyncio.sleep(0.05)
    raise AssertionError(f"the player did not reach the end: {samples[-1]}")


def assert_gapless_and_followed(state: dict[str, Any], samples: list[dict[str, Any]], sentences: int) -> None:
    assert state["status"] == "done"
    assert state["chunks"] == state["decoded"] == sentences  # every chunk decoded
    scheduled = state["scheduled"]
    assert [s["i"] for s in scheduled] == list(range(sentences))  # each scheduled once, in order
    for before, after in zip(scheduled, scheduled[1:]):
        gap = after["start"] - (before["start"] + before["duration"])
        assert abs(gap) <= MAX_GAP_S, (before, after, gap)
    seen = [s["currentIndex"] for s in samples if s["currentIndex"] >= 0]
    assert seen == sorted(seen)  # captions only move forward while playing
    assert set(seen) == set(range(sentences))  # and each sentence was highlighted
    for sample in samples:
        if sample["currentIndex"] >= 0 and not sample["ended"]:
            assert sample["highlighted"] in (sample["currentIndex"], sample["currentIndex"] - 1)


async def test_submit_on_the_start_page_then_listen_gaplessly_and_again_from_the_start(
    site: tuple[TestServer, Worker], browser: Any, texts: dict[str, str]
) -> None:
    server, _ = site
    text = texts["paragraph"]
    sentences = len(split_text(text))
    page = await browser.new_page()
    await page.goto(str(server.make_url("/")))
    await page.wait_for_function("() => document.querySelectorAll('#voice option').length === 2")
    await page.fill("#text", text)
    await page.wait_for_function("() => document.getElementById('estimate').textContent.includes('sentences')")
    # the page estimates the chunks as the splitter plans them (the first clause is one)
    assert f"≈ {sentences} sentences" in await page.inner_text("#estimate")
    await page.select_option("#voice", "jf_alpha")
    await page.fill("#title", "Browser test")
    await page.click("#submit")
    await page.wait_for_url("**/c/*")
    state, samples = await play_to_the_end(page, sentences)
    assert_gapless_and_followed(state, samples, sentences)
    assert await page.inner_text("#cast-title") == "Browser test"
    assert await page.is_visible("#download")

    url = page.url  # reopen the finished cast: it plays from the start
    await page.goto(url)
    await page.wait_for_function("() => window.streamttsPlayer && window.streamttsPlayer.state.scheduled.length > 0")
    first = await player_state(page)
    assert first["scheduled"][0]["i"] == 0 and first["scheduled"][0]["offset"] == 0
    assert first["position"] < 500
    state, samples = await play_to_the_end(page, sentences)
    assert_gapless_and_followed(state, samples, sentences)
    await page.close()


@pytest.mark.parametrize(("name", "pace_s", "ahead"), [("article", PACE_S, 3), ("paragraph", 0.9, 1)],
                         ids=["faster", "slower"])
async def test_a_page_opened_mid_generation_plays_from_the_start_and_catches_up(
    site: tuple[TestServer, Worker], browser: Any, store: CastStore, texts: dict[str, str],
    name: str, pace_s: float, ahead: int,
) -> None:
    """Generation faster than playback, and slower: then the player waits at the tail with
    its clock stopped, and the timeline stays gapless."""
    server, worker = site
    worker.pace_s = pace_s
    text = texts[name]
    sentences = split_text(text)
    cast = Cast(store, content_id(text, VOICES[0]))
    await cast.submit(len(sentences))
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    o = 0
    for i, sentence in enumerate(sentences[:ahead]):
        body, d = mp3_chunk(sentence_ms(sentence), 200.0 + 30 * (i % 10))
        await cast.append(Audio(i=i, t=sentence, d=d, o=o, body=body))
        o += d
    worker.spawn(cast, sentences, first=ahead)  # keeps appending while the page loads and plays
    page = await browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    state, samples = await play_to_the_end(page, len(sentences))
    if pace_s > PACE_S:
        assert state["stalls"] >= 1  # it caught up with generation and waited, clock stopped
    assert any(s["status"] == "generating" for s in samples)  # it was live when it started
    assert_gapless_and_followed(state, samples, len(sentences))
    await page.close()


async def test_an_unknown_cast_says_so(site: tuple[TestServer, Worker], browser: Any) -> None:
    """No controls for a cast that is not there: only the title, the status and what to do."""
    server, _ = site
    page = await browser.new_page()
    await page.goto(str(server.make_url("/c/AAAAAAAAAAAA")))
    await page.wait_for_function("() => document.getElementById('cast-title').textContent === 'No such cast'")
    assert await page.text_content("#status") == "not found"
    assert "Check the link" in (await page.text_content("#notice") or "")
    hidden = "['play', 'bar', 'captions'].map((name) => document.getElementById(name).hidden)"
    assert await page.evaluate(hidden) == [True, True, True]
    await page.close()


async def test_a_refused_submission_shows_the_reason_inline(site: tuple[TestServer, Worker], browser: Any) -> None:
    server, _ = site
    page = await browser.new_page()
    await page.goto(str(server.make_url("/")))
    await page.fill("#text", "This is FORBIDDEN text.")
    await page.click("#submit")
    await page.wait_for_function("() => document.getElementById('error').textContent.length > 0")
    assert await page.inner_text("#error") == "this text cannot be read out"
    assert page.url.endswith("/")
    await page.close()


async def test_clicking_a_sentence_seeks_and_space_pauses(
    site: tuple[TestServer, Worker], browser: Any, store: CastStore, texts: dict[str, str]
) -> None:
    server, worker = site
    text = texts["short"]
    sentences = split_text(text)
    cast = Cast(store, content_id(text, VOICES[0]))
    await cast.submit(len(sentences))
    worker.pace_s = 0
    await worker.run(cast, sentences)
    page = await browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    await page.wait_for_function("() => window.streamttsPlayer.state.done && window.streamttsPlayer.state.decoded === 3")
    await page.click("#captions li[data-i='2']")
    state = await player_state(page)
    assert [s["i"] for s in state["scheduled"]] == [2] and state["generation"] >= 1
    starts = [r.record.o for r in await LogReader(store.redis).read(cast.id) if r.kind == "audio"]
    assert abs(state["position"] - starts[2]) < 100
    await page.keyboard.press("Space")
    await page.wait_for_function("() => window.streamttsPlayer.state.contextState === 'suspended'")
    paused = await player_state(page)
    await asyncio.sleep(0.3)
    assert not paused["playing"] and (await player_state(page))["position"] == paused["position"]
    await page.keyboard.press("Space")
    await page.wait_for_function(f"() => window.streamttsPlayer.state.position > {paused['position'] + 100}")
    await page.close()


async def test_the_start_page_estimates_the_planned_sentences_like_the_splitter(
    site: tuple[TestServer, Worker], browser: Any, texts: dict[str, str]
) -> None:
    server, _ = site
    page = await browser.new_page()
    await page.goto(str(server.make_url("/")))
    for name, text in texts.items():
        await page.fill("#text", "")
        await page.wait_for_function("() => document.getElementById('estimate').textContent === 'Nothing pasted yet'")
        await page.fill("#text", text)
        await page.wait_for_function("() => document.getElementById('estimate').textContent.includes('sentence')")
        estimate = await page.inner_text("#estimate")
        assert f"≈ {len(split_text(text))} sentences" in estimate, (name, estimate)
    await page.close()
