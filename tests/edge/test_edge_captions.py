"""GET /api/casts/{id}/captions: words and sentences of the playable audio as WebVTT."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from castlog import Audio, CastStore, Eos, Meta, Start

Client = TestClient[Any, Any]
CAST = "CaptionsTest"


async def _cast(store: CastStore, *, finished: bool) -> None:
    records: list[Any] = [
        Meta(title="t", voice="af_heart", chars=20, sentences=2, created_at=0),
        Start(attempt=1, resume_from=0, at=0),
        Audio(i=0, t="Hello there.", d=1200, o=0, w=(("Hello", 60, 500), ("there", 520, 1100)), body=b"x"),
        Audio(i=1, t="Bye --> now.", d=900, o=1200, w=(("Bye", 50, 400), ("now", 420, 850)), body=b"y"),
    ]
    if finished:
        records.append(Eos(sentences=2, audio_ms=2100, attempts=1))
    await store.append(CAST, 0, records)


async def test_captions_have_a_cue_per_sentence_and_per_word_on_the_casts_timeline(
    edge: Client, store: CastStore
) -> None:
    await _cast(store, finished=True)
    resp = await edge.get(f"/api/casts/{CAST}/captions")
    assert resp.status == 200 and resp.content_type == "text/vtt"
    text = await resp.text()
    assert text.startswith("WEBVTT\n\n")
    cues = [block.split("\n") for block in text.split("\n\n")[1:] if block.strip()]
    assert [c[0] for c in cues] == ["s0", "w0.0", "w0.1", "s1", "w1.0", "w1.1"]
    assert cues[0][1:] == ["00:00:00.000 --> 00:00:01.200", "Hello there."]
    assert cues[4][1:] == ["00:00:01.250 --> 00:00:01.600", "Bye"]
    assert cues[3][2] == "Bye -> now.", "no cue text may hold the arrow"


async def test_captions_of_one_kind_and_of_a_cast_still_being_made(edge: Client, store: CastStore) -> None:
    await _cast(store, finished=False)
    words = await (await edge.get(f"/api/casts/{CAST}/captions?cues=words")).text()
    assert "w1.1" in words and "s0" not in words
    resp = await edge.get(f"/api/casts/{CAST}/captions?cues=sentences")
    assert resp.headers["Cache-Control"] == "no-cache" and "w0.0" not in await resp.text()
    assert (await edge.get(f"/api/casts/{CAST}/captions?cues=lines")).status == 400
    assert (await edge.get("/api/casts/NoSuchCast00/captions")).status == 404
