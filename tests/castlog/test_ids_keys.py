from __future__ import annotations

import zlib

import pytest

from castlog import MAX_SEQ_NUM, cast_id_of, content_id, is_cast_id
from castlog.keys import entry_id, seq_of


@pytest.mark.parametrize(
    ("text", "voice", "expected"),
    [
        ("Hello there.", "af_heart", "pHanHO6047OT"),
        ("Hello there.", "jf_alpha", "QoXLeO0EE74P"),
        ("東京は晴れ。café", "jf_alpha", "H6p7WzfhlwqF"),
        ("", "af_heart", "fei17Edkab8o"),
    ],
)
@pytest.mark.rule("content-id")
def test_content_id_matches_fixed_vectors(text: str, voice: str, expected: str) -> None:
    assert content_id(text, voice) == expected


@pytest.mark.rule("content-id")
def test_content_id_ignores_surrounding_white_space() -> None:
    assert content_id("  Hello there.\n", "af_heart") == content_id("Hello there.", "af_heart")


def test_content_id_keeps_inner_white_space_and_voice_apart() -> None:
    assert content_id("Hello  there.", "af_heart") != content_id("Hello there.", "af_heart")
    # the NUL separator keeps "a"+"bc" and "ab"+"c" apart
    assert content_id("bc", "a") != content_id("c", "ab")


def test_content_id_is_url_safe_and_valid() -> None:
    for i in range(200):
        cid = content_id(f"text {i}", "v")
        assert len(cid) == 12 and is_cast_id(cid)
        assert "=" not in cid and "/" not in cid and "+" not in cid


@pytest.mark.rule("seq-entry-id")
def test_seq_num_maps_to_explicit_entry_ids() -> None:
    assert entry_id(0) == "0-1"
    assert entry_id(41) == "0-42"
    assert seq_of(b"0-42") == 41
    for n in (0, 1, 9_999_999):
        assert seq_of(entry_id(n)) == n
    with pytest.raises(ValueError):
        entry_id(-1)
    assert entry_id(MAX_SEQ_NUM) == "0-18446744073709551615"  # the largest id Redis takes
    with pytest.raises(ValueError):
        entry_id(MAX_SEQ_NUM + 1)
    with pytest.raises(ValueError):
        seq_of("1700000000000-0")


@pytest.mark.parametrize(
    "name",
    ["jobs", "catalog/pHanHO6047OT", "progress/done", "pub/casts/../jobs", "pub/casts/*",
     "pub/casts/pHanHO6047O", "pub/casts/pHanHO6047OTx", "pub/casts/pHan HO6047OT", "pub/casts/pHanHO60%2FOT"],
)
@pytest.mark.rule("only-cast-logs-readable")
def test_only_well_formed_cast_streams_name_a_cast(name: str) -> None:
    assert cast_id_of(name) is None


def test_cast_stream_name_gives_its_id() -> None:
    assert cast_id_of("pub/casts/pHanHO6047OT") == "pHanHO6047OT"


@pytest.mark.rule("content-id-keyed")
def test_a_keyed_content_id_is_an_hmac_of_the_same_material() -> None:
    import base64
    import hashlib
    import hmac

    from castlog import content_id

    key = b"k" * 32
    want = hmac.new(key, b"af_heart\x00Hello.\x00speed=1.50", hashlib.sha256).digest()
    assert content_id(" Hello. ", "af_heart", 1.5, key=key) == base64.urlsafe_b64encode(want).decode()[:12]
    assert content_id("Hello.", "af_heart") != content_id("Hello.", "af_heart", key=key)


@pytest.mark.rule("one-slot-per-step")
def test_a_cast_s_keys_share_its_lane_s_hash_tag() -> None:
    from castlog import keys

    cid = "pHanHO6047OT"
    lane = keys.lane_of(cid)
    assert 0 <= lane < keys.LANES and lane == zlib.crc32(cid.encode()) % keys.LANES  # stable: a stored layout
    tag = "{l%d}" % lane
    assert keys.cast_key(cid) == f"pub/casts/{tag}/{cid}" and keys.catalog_key(cid) == f"catalog/{tag}/{cid}"
    assert keys.cancel_key(cid) == f"cancel/{tag}/{cid}"
    assert keys.lane_jobs_of(cid) == f"jobs/lane/{tag}" and keys.lane_live_jobs_of(cid) == f"jobs/live/lane/{tag}"
    assert cast_id_of(keys.cast_key(cid)) == cid == cast_id_of(f"pub/casts/{cid}")
    assert cast_id_of(f"pub/casts/{{l{(lane + 1) % keys.LANES}}}/{cid}") is None  # a wrong lane is no cast log
