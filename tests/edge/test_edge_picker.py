"""The paste page's voice picker in headless Chromium: grouped by language with English first,
and a voice preselected to fit the text's script until the listener picks one."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from castlog import describe_voice
from tests.edge import test_edge_browser as pages

pytestmark = pytest.mark.browser

site = pages.site
browser = pages.browser
VOICES = ["jf_alpha", "zf_xiaobei", "bf_emma", "af_heart", "am_adam", "ef_dora"]


async def picker_page(server: TestServer, browser: Any) -> Any:
    page = await browser.new_page()
    body = {"voices": VOICES, "default": "af_heart", "source": "worker", "backend": "onnx",
            "details": [dataclasses.asdict(describe_voice(v)) for v in VOICES]}  # what intake answers

    async def voices(route: Any) -> None:
        await route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    await page.route("**/api/voices", voices)
    await page.goto(str(server.make_url("/")))
    await page.wait_for_function(f"() => document.querySelectorAll('#voice option').length === {len(VOICES)}")
    return page


async def selected_after_typing(page: Any, text: str) -> str:
    await page.fill("#text", text)
    await page.wait_for_function("() => document.getElementById('estimate').textContent !== 'Nothing pasted yet'")
    await page.wait_for_timeout(100)  # the estimate and the pick run in the same frame
    value: str = await page.input_value("#voice")
    return value


async def test_voices_are_grouped_by_language_with_english_first(site: tuple[TestServer, Any], browser: Any) -> None:
    server, _ = site
    page = await picker_page(server, browser)
    groups = await page.eval_on_selector_all("#voice optgroup", "gs => gs.map(g => g.label)")
    assert groups == ["American English", "British English", "Japanese", "Mandarin", "Spanish"]
    labels = await page.eval_on_selector_all("#voice optgroup:first-child option", "os => os.map(o => o.text)")
    assert labels == ["Heart (female)", "Adam (male)"]
    assert await page.input_value("#voice") == "af_heart"  # the default
    await page.close()


async def test_the_picker_preselects_a_voice_for_the_text_script_until_one_is_chosen(
    site: tuple[TestServer, Any], browser: Any
) -> None:
    server, _ = site
    page = await picker_page(server, browser)
    assert await selected_after_typing(page, "今日はいい天気ですね。散歩に行きましょう。") == "jf_alpha"
    assert await selected_after_typing(page, "今天天气很好。我们去散步吧。") == "zf_xiaobei"
    assert await selected_after_typing(page, "The weather is fine today, with one word of 日本.") == "af_heart"
    await page.select_option("#voice", "bf_emma")  # the listener's choice stands
    assert await selected_after_typing(page, "今日はいい天気ですね。") == "bf_emma"
    await page.close()
