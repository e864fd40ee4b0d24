"""The player tells the truth, in headless Chromium: it waits (and says for which sentence) when
the next sentence has not arrived and resumes by itself, shows Play until sound starts, starts on
the first click under the browser's default autoplay policy, estimates the live total from the
plan, and shows what is wrong with an unknown or failed cast instead of controls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, Error, Meta, Queued, Start, content_id
from tests.edge import test_edge_browser as pages
from tests.edge import test_edge_shrunk_log as shrunk
from tests.edge.edge_helpers import Cast, mp3_chunk

pytestmark = pytest.mark.browser

site = pages.site  # the edge app with a stand-in intake, as in test_edge_browser
browser = pages.browser
SENTENCES = [f"Sentence number {n} of the stalling cast." for n in range(1, 7)]
MS_PER_CHAR = 8  # the stand-in's audio length per character: what the live total must learn


async def new_cast(store: CastStore, sentences: list[str], tag: str = "") -> Cast:
    text = " ".join(sentences) + tag
    cast = Cast(store, content_id(text, pages.VOICES[0]))
    meta = Meta(title="States", voice=pages.VOICES[0], chars=len(text), sentences=len(sentences), created_at=0)
    assert await store.submit(cast.id, text, pages.VOICES[0], meta) == "new"
    cast.tail = 1
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    return cast


def audio(sentences: list[str], first: int, last: int) -> list[Audio]:
    """Audio records for sentences[first:last], each MS_PER_CHAR ms per character long."""
    out, o = [], 0
    for i, text in enumerate(sentences[:last]):
        body, d = mp3_chunk(MS_PER_CHAR * len(text), 200.0 + 30 * i)
        if i >= first:
            out.append(Audio(i=i, t=text, d=d, o=o, body=body))
        o += d
    return out


async def state(page: Any) -> dict[str, Any]:
    return await pages.player_state(page)


async def wait_for(page: Any, condition: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """Poll the player's state until ``condition`` (a Python expression over ``s``) holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = await state(page)
        if eval(condition, {}, {"s": s}):  # noqa: S307 - test conditions written here
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {condition}: {s}")
        await asyncio.sleep(0.05)


async def stalled_page(server: TestServer, browser: Any, store: CastStore) -> tuple[Any, Cast]:
    """A page playing a cast whose worker stopped after two of six sentences, now waiting."""
    cast = await new_cast(store, SENTENCES)
    await cast.append(*audio(SENTENCES, 0, 2))
    page = await browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    await wait_for(page, "s['look'] == 'pause'")  # sound started by itself (autoplay allowed)
    return page, cast


async def test_a_stall_shows_waiting_and_the_sentence_it_waits_for(
    site: tuple[TestServer, Any], browser: Any, store: CastStore
) -> None:
    server, _ = site
    page, _ = await stalled_page(server, browser, store)
    # the button is drawn on the next frame after the state changes: wait for both
    s = await wait_for(page, "s['look'] == 'waiting' and s['button'].startswith('Waiting')")
    assert s["stalled"] and s["contextState"] == "suspended"
    assert s["line"] == "Generating sentence 3 of 6…"
    await asyncio.sleep(0.4)
    later = await state(page)
    assert later["position"] == s["position"] and later["look"] == "waiting"  # the clock stands still
    assert await page.inner_text("#waiting") == "Generating sentence 3 of 6…"
    await page.close()


async def test_playback_resumes_by_itself_when_the_audio_arrives(
    site: tuple[TestServer, Any], browser: Any, store: CastStore
) -> None:
    server, _ = site
    page, cast = await stalled_page(server, browser, store)
    await wait_for(page, "s['look'] == 'waiting'")
    rest = audio(SENTENCES, 2, len(SENTENCES))
    await cast.append(*rest)  # the worker goes on
    await cast.append(Eos(sentences=len(SENTENCES), audio_ms=rest[-1].o + rest[-1].d, attempts=1))
    s = await wait_for(page, "s['look'] == 'pause' and s['currentIndex'] >= 2 and s['button'] == 'Pause'")
    assert s["line"] == ""
    s, _ = await pages.play_to_the_end(page, len(SENTENCES))
    assert s["stalls"] >= 1 and s["look"] == "play" and s["decoded"] == len(SENTENCES)
    scheduled = s["scheduled"]
    assert [x["i"] for x in scheduled] == list(range(len(SENTENCES)))  # one timeline: the wait left no gap
    for before, after in zip(scheduled, scheduled[1:]):
        assert abs(after["start"] - before["start"] - before["duration"]) <= pages.MAX_GAP_S
    await page.close()


@pytest.mark.rule("follower-moved-back")
async def test_a_live_player_takes_the_log_redone_after_redis_lost_its_tail(
    site: tuple[TestServer, Any], browser: Any, store: CastStore, redis: Redis
) -> None:
    """Redis lost the last records (a power loss cut the AOF back) and the cast was redone from
    there: edge moves the player back, and the player drops what it had from the lost attempt."""
    server, _ = site
    page, cast = await stalled_page(server, browser, store)  # meta 0, start 1, audio 0-1 at 2-3
    await wait_for(page, "s['chunks'] == 2 and s['seqs'] == [2, 3]")
    await shrunk.cut_back(redis, cast.id, 2)  # both audio records lost
    cast.tail = 2
    await cast.append(Start(attempt=2, resume_from=0, at=1))  # seq 2: the redo's start
    redone = audio(SENTENCES, 0, len(SENTENCES))  # seq 3-8
    await cast.append(*redone, Eos(sentences=len(SENTENCES), audio_ms=redone[-1].o + redone[-1].d, attempts=2))
    s = await wait_for(page, "s['done'] and s['chunks'] == 6")
    assert s["seqs"] == [3, 4, 5, 6, 7, 8]  # the redone audio only: none kept from the lost attempt
    await page.close()


@pytest.fixture
async def default_policy_browser() -> AsyncIterator[Any]:
    """Chromium as people run it: no autoplay flag, so sound needs a click."""
    from playwright.async_api import async_playwright

    args = [a for a in pages.CHROMIUM_ARGS if not a.startswith("--autoplay-policy")]
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=pages.CHROMIUM, args=args, headless=True)
        yield chromium
        await chromium.close()


async def test_under_the_default_autoplay_policy_play_shows_until_sound_and_the_first_click_plays(
    site: tuple[TestServer, Any], default_policy_browser: Any, store: CastStore
) -> None:
    server, _ = site
    cast = await new_cast(store, SENTENCES[:3])
    page = await default_policy_browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    s = await wait_for(page, "s['status'] == 'generating'")
    await asyncio.sleep(0.3)
    assert (await state(page))["button"] == "Play"  # no audio exists: nothing claims to play
    await page.click("#play")  # the first click starts playback: it waits for the first sentence
    s = await wait_for(page, "s['look'] == 'waiting' and s['line']")
    assert s["playing"] and s["line"] == "Generating sentence 1 of 3…"
    first = audio(SENTENCES, 0, 3)
    await cast.append(*first)
    await cast.append(Eos(sentences=3, audio_ms=first[-1].o + first[-1].d, attempts=1))
    s = await wait_for(page, "s['look'] == 'pause' and s['position'] > 200 and s['button'] == 'Pause'")
    assert s["contextState"] == "running"
    await page.click("#play")  # and the next one pauses
    await wait_for(page, "s['look'] == 'play' and not s['playing']")
    await page.close()


async def test_a_finished_cast_under_the_default_policy_starts_on_the_first_click(
    site: tuple[TestServer, Any], default_policy_browser: Any, store: CastStore
) -> None:
    server, _ = site
    cast = await new_cast(store, SENTENCES[:2], tag=" done")
    records = audio(SENTENCES, 0, 2)
    await cast.append(*records, Eos(sentences=2, audio_ms=records[-1].o + records[-1].d, attempts=1))
    page = await default_policy_browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    s = await wait_for(page, "s['done'] and s['decoded'] == 2")
    assert s["button"] == "Play" and s["position"] < 200
    await page.click("#play")
    s = await wait_for(page, "s['look'] == 'pause' and s['position'] > 150")
    assert s["playing"]
    await page.close()


async def test_the_live_total_comes_from_the_plan_and_is_refined_by_the_audio(
    site: tuple[TestServer, Any], browser: Any, store: CastStore
) -> None:
    server, _ = site
    sentences = ["A short first clause, then.", *[f"A much longer sentence follows here, number {n}, with many more words." for n in range(9)]]
    cast = await new_cast(store, sentences)
    truth = sum(a.d for a in audio(sentences, 0, len(sentences)))
    page = await browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    s = await wait_for(page, "s['status'] == 'generating'")
    chars = len(" ".join(sentences))
    assert abs(s["estimatedTotal"] - chars * 1000 / 14) < 1  # the plan at a prior speed
    assert (await page.inner_text("#time-total")).startswith("~")
    await cast.append(*audio(sentences, 0, 1))  # the first, short sentence: 1/10 of the cast
    s = await wait_for(page, "s['chunks'] == 1")
    # within 15 % (one short MP3 chunk's frame rounding); sentences x the first one's length: -55 %
    assert abs(s["estimatedTotal"] - truth) / truth < 0.15, (s["estimatedTotal"], truth)
    await page.close()


async def test_an_unknown_cast_shows_no_controls_and_no_null(site: tuple[TestServer, Any], browser: Any) -> None:
    server, _ = site
    page = await browser.new_page()
    await page.goto(str(server.make_url("/c/AAAAAAAAAAAA")))
    await page.wait_for_function("() => document.getElementById('cast-title').textContent === 'No such cast'")
    for control in ("#play", "#bar", "#times", "#actions", "#captions"):
        assert not await page.is_visible(control), control
    body = await page.inner_text("body")
    assert "null" not in body and "failed" not in body.lower()
    assert "Check the link" in await page.inner_text("#notice")
    await page.close()


async def test_a_failed_cast_shows_its_error(site: tuple[TestServer, Any], browser: Any, store: CastStore) -> None:
    server, _ = site
    cast = await new_cast(store, SENTENCES[:3], tag=" fails")
    await cast.append(*audio(SENTENCES, 0, 1))
    await cast.append(Error(reason="the model ran out of memory", attempts=3))
    page = await browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    s = await wait_for(page, "s['status'] == 'error' and s['decoded'] == 1")
    notice = await page.inner_text("#notice")
    assert "Generation failed: the model ran out of memory" in notice and "null" not in notice
    s = await wait_for(page, "s['position'] > 300 and s['ended']", timeout_s=10)  # played what exists
    assert s["look"] == "play" and s["line"] == ""  # and waits for nothing
    assert await page.get_attribute("#status", "data-status") == "error"
    await page.close()


@pytest.mark.rule("queue-noted")
async def test_a_queued_cast_says_its_place_and_starts_in_about_then_plays(
    site: tuple[TestServer, Any], browser: Any, store: CastStore
) -> None:
    server, _ = site
    text = " ".join(SENTENCES[:2]) + " queued"
    cast = Cast(store, content_id(text, pages.VOICES[0]))
    meta = Meta(title="Queued", voice=pages.VOICES[0], chars=len(text), sentences=2, created_at=0)
    assert await store.submit(cast.id, text, pages.VOICES[0], meta) == "new"
    cast.tail = 1
    await cast.append(Queued(pos=2, eta_ms=12_000))  # the worker's note
    page = await browser.new_page()
    await page.goto(str(server.make_url(f"/c/{cast.id}")))
    s = await wait_for(page, "'starts in about' in s['line']")
    assert s["status"] == "queued" and s["line"].startswith("Queued: 2nd in line, starts in about "), s["line"]
    seconds = int(s["line"].split("about ")[1].split(" s")[0])
    assert 0 < seconds <= 12  # counted down from the note's stamp
    shown = await page.inner_text("#waiting")  # on the page, before anyone pressed play
    assert shown.startswith("Queued: 2nd in line, starts in about "), shown
    await cast.append(Queued(pos=1, eta_ms=4_000))
    s = await wait_for(page, "'next in line' in s['line']")
    assert "starts in about" in s["line"]
    await cast.append(Start(attempt=1, resume_from=0, at=0), *audio(SENTENCES, 0, 2))
    # the line is drawn on the player's next frame after the status moves: wait for both
    s = await wait_for(page, "s['status'] == 'generating' and 'Queued' not in s['line']")
    await page.close()
