"""The client's address behind a trusted proxy (X-Forwarded-For): the key of its rate limits.

An IPv6 client is keyed by its /64: one host gets a whole /64 (SLAAC, privacy addresses), so a
key per address would give it 2**64 fresh buckets."""

from __future__ import annotations

import functools
import ipaddress


def client_address(remote: str | None, forwarded_for: str | None, trusted: frozenset[str]) -> str:
    """The client's address: the peer, or the last hop a trusted proxy put in X-Forwarded-For.

    ``trusted`` holds addresses and networks (``10.42.0.0/16``: a cluster's pod range, where
    the ingress has no fixed address).
    """
    peer = _plain(remote) if remote else "unknown"
    if forwarded_for and (peer in trusted or _in_networks(peer, trusted)):
        hop = forwarded_for.split(",")[-1].strip()
        try:
            return _keyed(_plain(hop, strict=True))
        except ValueError:
            return _keyed(peer)
    return _keyed(peer)


# The prefix that one IPv6 client holds.
IPV6_CLIENT_PREFIX = 64


@functools.lru_cache(maxsize=1024)
def _keyed(address: str) -> str:
    """The client key of a plain address: an IPv6 address as its /64, anything else as is."""
    if ":" not in address:
        return address
    try:
        return str(ipaddress.ip_network(f"{address}/{IPV6_CLIENT_PREFIX}", strict=False))
    except ValueError:
        return address


def _in_networks(address: str, trusted: frozenset[str]) -> bool:
    networks = _networks(trusted)
    if not networks:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


@functools.lru_cache(maxsize=16)
def _networks(trusted: frozenset[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(t, strict=False) for t in trusted if "/" in t)


# Clients come back, and behind a proxy every request names two addresses: each is parsed once.
@functools.lru_cache(maxsize=1024)
def _plain(address: str, strict: bool = False) -> str:
    """The canonical text of an address; IPv4-mapped IPv6 (``::ffff:127.0.0.1``) as IPv4."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        if strict:
            raise
        return address
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)
