"""audio.mp3: the playable audio as one MP3, live while it is made, byte ranges once done."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from castlog import Audio, CastStore, Eos, Error, LogReader, Start
from tests.edge.edge_helpers import SAMPLE_RATE, Cast, audio_records, cast_id, decode_mp3, write_cast

TEXTS = [f"Sentence {i}." for i in range(6)]


def body(records: list[Audio]) -> bytes:
    return b"".join(r.body for r in records)


async def test_audio_of_a_finished_cast_decodes_to_the_sum_of_its_durations(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(len(TEXTS))
    audio = audio_records(TEXTS, ms=700)
    await cast.append(Start(attempt=1, resume_from=0, at=0), *audio)
    await cast.append(Eos(sentences=len(TEXTS), audio_ms=sum(a.d for a in audio), attempts=1))
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "audio/mpeg"
    assert resp.headers["Accept-Ranges"] == "bytes"
    data = await resp.read()
    assert int(resp.headers["Content-Length"]) == len(data) == len(body(audio))
    samples = len(decode_mp3(data))
    assert samples * 1000 / SAMPLE_RATE == sum(a.d for a in audio)


async def test_byte_ranges_of_a_finished_cast(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    whole = await (await edge.get(f"/api/casts/{cid}/audio.mp3")).read()
    for header, lo, hi in (("bytes=100-2999", 100, 2999), ("bytes=5000-", 5000, len(whole) - 1),
                           ("bytes=-700", len(whole) - 700, len(whole) - 1)):
        resp = await edge.get(f"/api/casts/{cid}/audio.mp3", headers={"Range": header})
        assert resp.status == 206, header
        assert resp.headers["Content-Range"] == f"bytes {lo}-{hi}/{len(whole)}"
        assert await resp.read() == whole[lo : hi + 1]
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3", headers={"Range": f"bytes={len(whole)}-"})
    assert resp.status == 416
    assert resp.headers["Content-Range"] == f"bytes */{len(whole)}"
    head = await edge.head(f"/api/casts/{cid}/audio.mp3")
    assert head.status == 200 and int(head.headers["Content-Length"]) == len(whole)


async def test_audio_follows_a_live_cast_until_eos(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = await write_cast(store, cid, TEXTS[:2], finish=False)
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3")
    assert resp.status == 200 and "Content-Length" not in resp.headers
    reader = asyncio.create_task(resp.read())
    later = audio_records(TEXTS[2:], start_i=2, start_o=0)
    for record in later:
        await asyncio.sleep(0.03)
        await cast.append(record)
    await asyncio.sleep(0.03)
    assert not reader.done()  # still following: no eos yet
    await cast.append(Eos(sentences=len(TEXTS), audio_ms=1, attempts=1))
    data = await asyncio.wait_for(reader, 10)
    records = await LogReader(store.redis).read(cid)
    expected = body([e.record for e in records if isinstance(e.record, Audio)])
    assert data == expected
    assert len(decode_mp3(data)) * 1000 / SAMPLE_RATE == sum(
        e.record.d for e in records if isinstance(e.record, Audio)
    )


@pytest.mark.rule("playable-view")
async def test_a_finished_cast_plays_the_latest_attempt_after_resume_from(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(4)
    first = audio_records(TEXTS[:3], body_bytes=10)
    second = audio_records(TEXTS[1:4], body_bytes=20, start_i=1)
    await cast.append(Start(attempt=1, resume_from=0, at=0), *first)
    await cast.append(Error(reason="lost", attempts=1))
    await cast.append(Start(attempt=2, resume_from=1, at=0), *second)
    await cast.append(Eos(sentences=4, audio_ms=1, attempts=2))
    data = await (await edge.get(f"/api/casts/{cid}/audio.mp3")).read()
    assert data == first[0].body + body(second)


async def test_a_live_follower_keeps_what_it_sent_when_a_new_attempt_rewrites_it(
    edge: TestClient[Any, Any], store: CastStore
) -> None:
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(4)
    first = audio_records(TEXTS[:3], body_bytes=10)
    await cast.append(Start(attempt=1, resume_from=0, at=0), *first)
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3")
    reader = asyncio.create_task(resp.read())
    await asyncio.sleep(0.1)
    second = audio_records(TEXTS[1:4], body_bytes=20, start_i=1)
    await cast.append(Start(attempt=2, resume_from=1, at=0), *second)
    await cast.append(Eos(sentences=4, audio_ms=1, attempts=2))
    # sentences 0-2 were on the wire already; the new attempt continues the stream at 3
    assert await asyncio.wait_for(reader, 10) == body(first) + second[-1].body


async def test_audio_of_a_cast_without_audio_yet_waits_for_it(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(1)
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3")
    assert resp.status == 200
    reader = asyncio.create_task(resp.read())
    audio = audio_records(TEXTS[:1])
    await cast.append(Start(attempt=1, resume_from=0, at=0), *audio, Eos(sentences=1, audio_ms=1, attempts=1))
    assert await asyncio.wait_for(reader, 10) == body(audio)


@pytest.mark.rule("range-416")
async def test_a_range_of_absurd_positions_is_416_or_the_whole_never_500(edge: TestClient[Any, Any], store: CastStore) -> None:
    """#21 finding 8: `Range: bytes=<5000 digits>-` was a 500 and a logged traceback."""
    cid = cast_id()
    await write_cast(store, cid, TEXTS)
    whole = await (await edge.get(f"/api/casts/{cid}/audio.mp3")).read()
    huge = "9" * 5000
    resp = await edge.get(f"/api/casts/{cid}/audio.mp3", headers={"Range": f"bytes={huge}-"})
    assert resp.status == 416 and (await resp.json())["error"] == "range_not_satisfiable"
    for header in (f"bytes=0-{huge}", f"bytes=-{huge}"):
        resp = await edge.get(f"/api/casts/{cid}/audio.mp3", headers={"Range": header})
        assert resp.status == 206 and await resp.read() == whole, header


@pytest.mark.rule("downloads-metered")
async def test_downloads_of_a_finished_cast_count_against_the_clients_streams(
    make_edge: Any, store: CastStore
) -> None:
    """#21 finding 4: finished-cast downloads skipped the per-client stream cap."""
    edge = await make_edge(max_streams_per_client=1)
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(40)
    big = b"\xff" * 256 * 1024  # 10 MB in all: more than the socket buffers hold
    audio = [Audio(i=i, t=f"S{i}.", d=100, o=100 * i, body=big) for i in range(40)]
    await cast.append(Start(attempt=1, resume_from=0, at=0), *audio)
    await cast.append(Eos(sentences=40, audio_ms=4000, attempts=1))
    first = await edge.get(f"/api/casts/{cid}/audio.mp3")  # its body not read yet: it holds the seat
    assert first.status == 200
    second = await edge.get(f"/api/casts/{cid}/audio.mp3")
    assert (second.status, (await second.json())["error"]) == (429, "too_many_streams")
    first.close()
