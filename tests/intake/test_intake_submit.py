"""Accepting casts: one atomic write, the id is the content id, meta plans the sentences."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, Error, LogReader, Meta, Start, cast_key, catalog_key, content_id
from castlog.keys import lane_jobs_of
from castlog.streams import read_recipe
from chunking import count_chunks
from intake.validate import default_title

from .conftest import MakeClient, key_names, keys_besides_rate_limits

Client = TestClient[Any, Any]


async def post(client: Client, body: Any, path: str = "/api/casts") -> tuple[int, Any, Any]:
    resp = await client.post(path, json=body)
    return resp.status, await resp.json(), resp.headers


async def test_new_cast_answers_201_with_its_link(client: Client, redis: Redis, texts: dict[str, str]) -> None:
    text = texts["paragraph"]
    status, body, headers = await post(client, {"text": text, "voice": "af_heart"})
    cast_id = content_id(text.strip(), "af_heart")
    assert status == 201
    assert body == {"id": cast_id, "url": f"/c/{cast_id}", "status": "new"}
    assert headers["Location"] == f"/c/{cast_id}"
    assert await keys_besides_rate_limits(redis) == {cast_key(cast_id), catalog_key(cast_id), lane_jobs_of(cast_id)}


@pytest.mark.rule("repeat-is-cache-hit")
async def test_second_identical_submit_gets_same_link(client: Client, redis: Redis, texts: dict[str, str]) -> None:
    first = await post(client, {"text": texts["short"], "voice": "jf_alpha"})
    second = await post(client, {"text": texts["short"], "voice": "jf_alpha", "title": "other"})
    assert (first[0], second[0]) == (201, 200)
    assert second[1] == {**first[1], "status": "existing"}
    assert len(await read_jobs(redis)) == 1


async def test_same_text_in_another_voice_is_another_cast(client: Client, texts: dict[str, str]) -> None:
    a = await post(client, {"text": texts["short"], "voice": "af_heart"})
    b = await post(client, {"text": texts["short"], "voice": "jm_kumo"})
    assert a[0] == b[0] == 201
    assert a[1]["id"] != b[1]["id"]


@pytest.mark.rule("claim-once")
async def test_200_concurrent_identical_posts_make_exactly_one_cast(
    client: Client, redis: Redis, store: CastStore, texts: dict[str, str]
) -> None:
    body = {"text": texts["article"], "voice": "af_heart"}
    replies = await asyncio.gather(*(post(client, body) for _ in range(200)))
    statuses = sorted(r[0] for r in replies)
    assert statuses == [200] * 199 + [201]
    assert sorted(r[1]["status"] for r in replies) == ["existing"] * 199 + ["new"]
    ids = {r[1]["id"] for r in replies}
    cast_id = content_id(texts["article"], "af_heart")
    assert ids == {cast_id}
    assert len(await read_jobs(redis)) == 1
    jobs = await read_jobs(redis)
    assert jobs[0].id == cast_id and jobs[0].voice == "af_heart"
    entries = await LogReader(store.redis).read(cast_id)
    assert [e.kind for e in entries] == ["meta"]
    assert await redis.xlen(catalog_key(cast_id)) == 1
    assert await keys_besides_rate_limits(redis) == {cast_key(cast_id), catalog_key(cast_id), lane_jobs_of(cast_id)}


@pytest.mark.rule("content-id")
async def test_id_is_content_id_of_the_normalised_stored_text(client: Client, store: CastStore) -> None:
    # CRLF, a NUL, a C1 control, a decomposed é (e + U+0301) and surrounding white space.
    raw = "  \r\nCafe\u0301 au\x00 lait.\r\nSecond\x85 line.\t \n"
    expected = "Café au lait.\nSecond line."
    status, body, _ = await post(client, {"text": raw, "voice": "af_heart"})
    assert status == 201
    assert body["id"] == content_id(expected, "af_heart")
    recipe = await read_recipe(store.redis, body["id"])
    assert recipe is not None and recipe.text == expected and recipe.voice == "af_heart"


async def test_control_between_letter_and_mark_does_not_block_composition(client: Client, store: CastStore) -> None:
    status, body, _ = await post(client, {"text": "e\x07\u0301te", "voice": "af_heart"})
    recipe = await read_recipe(store.redis, body["id"])
    assert status == 201 and recipe is not None and recipe.text == "éte"


async def test_meta_plans_sentences_chars_and_title(client: Client, store: CastStore, texts: dict[str, str]) -> None:
    text = texts["article"].strip()
    before = time.time_ns() // 1_000_000
    status, body, _ = await post(client, {"text": text, "voice": "jf_nezumi"})
    after = time.time_ns() // 1_000_000
    assert status == 201
    entries = await LogReader(store.redis).read(body["id"])
    meta = entries[0].record
    assert isinstance(meta, Meta)
    assert meta.sentences == count_chunks(text) and meta.sentences > 1
    assert meta.chars == len(text)
    assert meta.voice == "jf_nezumi"
    assert meta.title == texts["article"].splitlines()[0]  # a short first line: a heading
    assert before <= meta.created_at <= after
    recipe = await read_recipe(store.redis, body["id"])
    assert recipe is not None and recipe.title == meta.title


async def test_given_title_is_kept_on_one_line(client: Client, store: CastStore) -> None:
    _, body, _ = await post(client, {"text": "Hello.", "voice": "af_heart", "title": "  My\n\tfirst\x00 cast  "})
    recipe = await read_recipe(store.redis, body["id"])
    assert recipe is not None and recipe.title == "My first cast"


async def test_blank_title_falls_back_to_first_words(client: Client, store: CastStore) -> None:
    _, body, _ = await post(client, {"text": "Hello there, world.", "voice": "af_heart", "title": " \n "})
    recipe = await read_recipe(store.redis, body["id"])
    assert recipe is not None and recipe.title == "Hello there, world."


def test_default_title_is_a_short_first_sentence_without_its_stop(texts: dict[str, str]) -> None:
    assert default_title(texts["paragraph"]) == "The lighthouse keeper climbed the stairs at sunset"
    assert default_title("Is it late? " + "word " * 100) == "Is it late"


def test_default_title_leaves_out_markdowns_marks() -> None:
    assert default_title("## Release **notes**\n\nSome text.") == "Release notes"
    assert default_title("- `pip install` it. " + "word " * 100) == "pip install it"
    assert default_title("**Hi**") == "Hi"


def test_default_title_cuts_long_text_on_a_word_boundary() -> None:
    text = "The quick brown fox jumps over the lazy dog and keeps running far beyond the hills and the rivers and the sea."
    title = default_title(text)
    assert title == "The quick brown fox jumps over the lazy dog and keeps…"
    assert len(title) <= 61 and title.endswith("…")
    assert default_title("一" * 200) == "一" * 60 + "…"
    assert default_title("Short  text\n\nhere") == "Short text"
    assert default_title("  A\ttitle  line\nThe body follows.") == "A title line"


async def test_missing_or_empty_voice_means_the_default_voice(client: Client) -> None:
    a = await post(client, {"text": "Hello."})
    b = await post(client, {"text": "Hello.", "voice": ""})
    c = await post(client, {"text": "Hello.", "voice": None, "title": None})
    assert a[0] == 201 and b[0] == c[0] == 200
    assert a[1]["id"] == content_id("Hello.", "af_heart")


async def test_unknown_fields_are_refused_naming_the_field(client: Client, redis: Redis) -> None:
    for field in ("response_format", "x"):
        status, body, _ = await post(client, {"text": "Hi.", "voice": "af_heart", field: {"deep": [1, [2]]}})
        assert status == 422 and body["error"] == "invalid_field" and f"`{field}`" in body["message"]
    assert await key_names(redis) == set()  # (the workers' voice list aside)


@pytest.mark.rule("speed-in-id")
async def test_speed_is_part_of_the_cast_and_its_meta(client: Client, store: CastStore) -> None:
    status, body, _ = await post(client, {"text": "Hi.", "voice": "af_heart", "speed": 2})
    assert status == 201 and body["id"] == content_id("Hi.", "af_heart", 2.0) != content_id("Hi.", "af_heart")
    meta = (await LogReader(store.redis).read(body["id"]))[0].record
    assert isinstance(meta, Meta) and meta.speed == 2.0
    one = await post(client, {"text": "Hi.", "voice": "af_heart", "speed": 1.001})
    assert one[1]["id"] == content_id("Hi.", "af_heart"), "speed 1.0 keeps the ids of old casts"
    for bad in (0.1, 4.5):
        status, body, _ = await post(client, {"text": "Hi.", "speed": bad})
        assert status == 422 and "`speed`" in body["message"]


async def test_text_at_the_char_limit_is_accepted(make_client: MakeClient, store: CastStore) -> None:
    client = await make_client(max_chars=50)
    text = "word " * 9 + "fifty"  # exactly 50 characters
    status, body, _ = await post(client, {"text": f"  {text}  ", "voice": "af_heart"})
    assert status == 201
    meta = (await LogReader(store.redis).read(body["id"]))[0].record
    assert isinstance(meta, Meta) and meta.chars == 50


@pytest.mark.rule("plan-equals-synthesis")
async def test_a_maximal_text_is_planned_like_the_worker_splits_it(client: Client, store: CastStore) -> None:
    text = ("Ein langer Satz ohne Ende, " * 4000)[:100_000].strip()
    status, body, _ = await post(client, {"text": text, "voice": "af_heart"})
    assert status == 201
    meta = (await LogReader(store.redis).read(body["id"]))[0].record
    assert isinstance(meta, Meta) and meta.sentences == count_chunks(text) and meta.chars == len(text)


@pytest.mark.rule("repeat-is-cache-hit")
async def test_resubmit_of_a_finished_cast_enqueues_nothing(client: Client, redis: Redis, store: CastStore) -> None:
    _, body, _ = await post(client, {"text": "Done already.", "voice": "af_heart"})
    cast_id = body["id"]
    await store.append(cast_id, 1, [Start(1, 0, 1), Audio(0, "Done already.", 900, 0, b"mp3"), Eos(1, 900, 1)])
    status, again, _ = await post(client, {"text": "Done already.", "voice": "af_heart"})
    assert status == 200 and again["status"] == "existing"
    assert len(await read_jobs(redis)) == 1
    assert await LogReader(store.redis).tail(cast_id) == 4


@pytest.mark.rule("error-is-retried")
async def test_resubmit_of_an_errored_cast_enqueues_one_job(client: Client, redis: Redis, store: CastStore) -> None:
    _, body, _ = await post(client, {"text": "Failed once.", "voice": "af_heart"})
    cast_id = body["id"]
    await store.append(cast_id, 1, [Start(1, 0, 1), Error("model crashed", 3)])
    replies = await asyncio.gather(*(post(client, {"text": "Failed once.", "voice": "af_heart"}) for _ in range(20)))
    assert sorted(r[1]["status"] for r in replies) == ["existing"] * 19 + ["reenqueued"]
    assert sorted(r[0] for r in replies) == [200] * 19 + [202]
    jobs = await read_jobs(redis)
    assert [j.id for j in jobs] == [cast_id] * 2
    assert await LogReader(store.redis).tail(cast_id) == 3  # the log itself is untouched: the worker appends the new start


async def test_form_post_answers_303_to_the_cast_page(client: Client, redis: Redis) -> None:
    resp = await client.post(
        "/generate", data={"text": "Pasted in a form.", "voice": "jm_kumo", "title": ""}, allow_redirects=False
    )
    cast_id = content_id("Pasted in a form.", "jm_kumo")
    assert resp.status == 303
    assert resp.headers["Location"] == f"/c/{cast_id}"
    assert len(await read_jobs(redis)) == 1
    form = {"text": "Pasted in a form.", "voice": "jm_kumo"}
    again = await client.post("/generate", data=form, allow_redirects=False)
    assert again.status == 303 and again.headers["Location"] == f"/c/{cast_id}"
    assert len(await read_jobs(redis)) == 1


async def test_form_post_with_utf8_text_keeps_it(client: Client, store: CastStore) -> None:
    form = {"text": "こんにちは。元気ですか？"}
    resp = await client.post("/generate", data=form, allow_redirects=False)
    cast_id = content_id("こんにちは。元気ですか？", "af_heart")
    assert resp.status == 303 and resp.headers["Location"] == f"/c/{cast_id}"
    recipe = await read_recipe(store.redis, cast_id)
    assert recipe is not None and recipe.text == "こんにちは。元気ですか？"


async def test_generate_with_json_answers_like_api_casts(client: Client) -> None:
    status, body, headers = await post(client, {"text": "From a script.", "voice": "af_heart"}, path="/generate")
    assert status == 201 and body["status"] == "new" and headers["Location"] == body["url"]


@pytest.mark.rule("content-id-keyed")
async def test_with_a_content_key_an_id_does_not_tell_a_guessed_text(make_client: MakeClient, redis: Redis) -> None:
    """#21: anyone could hash a guessed text and look its id up to learn whether it was cast."""
    from castlog import content_id as plain_id

    text = "A private note nobody should be able to confirm."
    old = await (await make_client()).post("/api/casts", json={"text": "Cast before the key.", "voice": "af_heart"})
    old_id = (await old.json())["id"]
    key = "k" * 32
    client = await make_client(content_key=key)
    resp = await client.post("/api/casts", json={"text": text, "voice": "af_heart"})
    cast_id = (await resp.json())["id"]
    assert cast_id == plain_id(text, "af_heart", key=key.encode()) != plain_id(text, "af_heart")
    assert not await redis.exists(cast_key(plain_id(text, 'af_heart')))  # the guess finds nothing
    again = await client.post("/api/casts", json={"text": text, "voice": "af_heart"})
    assert (again.status, (await again.json())["id"]) == (200, cast_id)  # repeats stay one cast
    assert await redis.exists(cast_key(old_id))  # an existing link is untouched
