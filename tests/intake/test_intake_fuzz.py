"""Property-based fuzz of POST /api/casts through the real app: whatever the body, never a 5xx;
a refusal is JSON {error, message} and writes nothing; an acceptance names the content id."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from castlog import content_id
from intake.validate import normalise_text

from .conftest import PUBLISHED_VOICES, key_names, publish

Client = TestClient[Any, Any]
VOICES = ["af_heart", "jm_kumo", "jf_alpha"]



class Huge:
    """A huge string, kept as (piece, count) until sent, so that reports of examples stay short."""

    def __init__(self, piece: str, count: int) -> None:
        self.piece, self.count = piece, count

    def expand(self) -> str:
        return self.piece * self.count

    def __repr__(self) -> str:
        return f"Huge({self.piece!r} * {self.count})"


def expanded(value: Any) -> Any:
    return value.expand() if isinstance(value, Huge) else value


# Up to past the 100 000-character and the body limits.
huge_text = st.builds(Huge, st.text(min_size=1, max_size=4), st.integers(1, 300_000))
strings = st.one_of(st.text(), st.text(alphabet=st.characters(codec="utf-8")), huge_text, st.sampled_from(VOICES))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), strings
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
field = st.one_of(strings, json_values)
cast_bodies = st.fixed_dictionaries(
    {},
    optional={
        "text": field,
        "voice": st.one_of(st.sampled_from(VOICES), field),
        "title": field,
        "extra": json_values,
    },
)
bodies = st.one_of(cast_bodies, json_values)


def expected_id(body: Any) -> str:
    voice = expanded(body.get("voice")) or "af_heart"
    return content_id(normalise_text(expanded(body["text"])), voice)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(body=bodies)
@pytest.mark.rule("refusal-json-no-key")
async def test_any_json_body_gets_a_json_answer_and_never_a_5xx(client: Client, redis: Redis, body: Any) -> None:
    await redis.flushdb()
    await publish(redis, PUBLISHED_VOICES, "af_heart")  # as the fixture did
    raw = json.dumps(body, ensure_ascii=False, default=expanded).encode("utf-8", "surrogatepass")
    resp = await client.post("/api/casts", data=io.BytesIO(raw), headers={"Content-Type": "application/json"})
    assert resp.status < 500, await resp.text()
    answer = await resp.json()
    # The spread of answers shows with --hypothesis-show-statistics.
    event(f"{resp.status} {answer.get('error', answer.get('status'))}")
    if resp.status >= 400:
        assert set(answer) == {"error", "message"}
        assert await key_names(redis) == set()
    else:
        assert resp.status == 201 and answer["status"] == "new"
        assert answer["id"] == expected_id(body)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=2000), form=st.booleans())
async def test_any_bytes_get_a_json_answer_and_never_a_5xx(
    client: Client, redis: Redis, raw: bytes, form: bool
) -> None:
    await redis.flushdb()
    await publish(redis, PUBLISHED_VOICES, "af_heart")  # as the fixture did
    ctype = "application/x-www-form-urlencoded" if form else "application/json"
    resp = await client.post("/generate", data=raw, headers={"Content-Type": ctype}, allow_redirects=False)
    assert resp.status < 500, await resp.text()
    if resp.status >= 400:
        assert set(await resp.json()) == {"error", "message"}
        assert await key_names(redis) == set()
