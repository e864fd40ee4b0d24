from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.asyncio import Redis

from servicekit import address_in, client_address, connect, healthy, redact
from streamtts.redisserver import free_port, start_server


async def test_connect_retries_until_the_server_comes_up(tmp_path: Path) -> None:
    port = free_port()
    task = asyncio.create_task(connect(f"redis://127.0.0.1:{port}/0", attempts=40, backoff_s=0.05))
    await asyncio.sleep(0.3)
    assert not task.done()
    server = await asyncio.to_thread(start_server, tmp_path, port=port, aof=False)
    try:
        client = await asyncio.wait_for(task, 15)
        assert await healthy(client)
        await client.aclose()
    finally:
        server.stop()


async def test_connect_gives_up_with_an_error_that_says_what_to_check() -> None:
    with pytest.raises(ConnectionError, match="REDIS_URL"):
        await connect(f"redis://:secret@127.0.0.1:{free_port()}/0", attempts=2, backoff_s=0.01)


async def test_health_check_is_false_when_redis_is_gone() -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    assert not await healthy(client, timeout_s=0.5)
    await client.aclose()


def test_redact_hides_passwords() -> None:
    assert redact("redis://intake:s3cret@redis:6379/0") == "redis://intake:***@redis:6379/0"
    assert "s3cret" not in redact("redis://:s3cret@redis:6379/0")
    assert redact("redis://redis:6379/0") == "redis://redis:6379/0"



def test_forwarded_for_is_honoured_only_from_trusted_proxies() -> None:
    trusted = frozenset({"127.0.0.1"})
    assert client_address("127.0.0.1", "9.9.9.9, 10.0.0.7", trusted) == "10.0.0.7"
    assert client_address("203.0.113.5", "9.9.9.9", trusted) == "203.0.113.5"
    assert client_address("127.0.0.1", "not-an-ip", trusted) == "127.0.0.1"
    assert client_address("::ffff:127.0.0.1", "10.0.0.8", trusted) == "10.0.0.8"

    assert client_address("::ffff:203.0.113.5", None, trusted) == "203.0.113.5"
    pods = frozenset({"10.42.0.0/16", "::1"})
    assert client_address("10.42.3.17", "198.51.100.2", pods) == "198.51.100.2"
    assert client_address("10.43.0.1", "198.51.100.2", pods) == "10.43.0.1"


def test_an_address_is_in_an_allow_list_by_address_or_network() -> None:
    """One check for FORWARDED_ALLOW_IPS and INTAKE_WYOMING_ALLOW_FROM."""
    allowed = frozenset({"127.0.0.1", "::1", "10.42.0.0/16", "a-name"})
    assert address_in("127.0.0.1", allowed) and address_in("::ffff:127.0.0.1", allowed)  # a dual-stack socket's
    assert address_in("0:0::1", allowed)  # the same address written otherwise
    assert address_in("10.42.3.17", allowed) and not address_in("10.43.0.1", allowed)
    assert address_in("a-name", allowed)  # a name only as written
    assert not address_in("127.0.0.2", allowed) and not address_in(None, allowed) and not address_in("", allowed)
    assert not address_in("fe80::1%eth0", allowed) and address_in("fe80::1%eth0", frozenset({"fe80::/10"}))


@pytest.mark.rule("client-keyed")
def test_an_ipv6_client_is_keyed_by_its_64() -> None:
    """#21 finding 4: every address of one /64 got a fresh rate-limit bucket."""
    a = client_address("2001:db8:1:2:aaaa::1", None, frozenset())
    assert a == client_address("2001:db8:1:2:ffff:1:2:3", None, frozenset()) == "2001:db8:1:2::/64"
    assert client_address("2001:db8:1:3::1", None, frozenset()) != a
    assert client_address("::1", "2001:db8:1:2::9", frozenset({"::1"})) == a  # behind a trusted proxy too
    assert client_address("127.0.0.2", None, frozenset()) == "127.0.0.2"
