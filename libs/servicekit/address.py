"""The client's address behind a trusted proxy (X-Forwarded-For): the key of its rate limits.

An IPv6 client is keyed by its /64: one host gets a whole /64 (SLAAC, privacy addresses), so a
key per address would give it 2**64 fresh buckets. A peer on a Unix socket has no address: it is
``unix``, and ``FORWARDED_ALLOW_IPS=unix`` believes the proxy that alone can reach that socket
(``streamtts up``'s, whose services listen on nothing else)."""

from __future__ import annotations

import functools
import ipaddress
import socket

from aiohttp import web

# What FORWARDED_ALLOW_IPS calls a peer on a Unix socket.
UNIX_PEER = "unix"


def request_client(request: web.BaseRequest, trusted: frozenset[str]) -> str:
    """The client of ``request``: its peer, or the last hop in X-Forwarded-For when the peer is
    one of ``trusted`` (``client_address``)."""
    return client_address(request_peer(request), request.headers.get("X-Forwarded-For"), trusted)


def request_peer(request: web.BaseRequest) -> str | None:
    """The peer's address, or ``unix`` on a Unix socket (whatever path a client bound its own
    end to: that names no proxy)."""
    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None and sock.family == socket.AF_UNIX:
        return UNIX_PEER
    return request.remote


def client_address(remote: str | None, forwarded_for: str | None, trusted: frozenset[str]) -> str:
    """The client's address: the peer, or the last hop a trusted proxy put in X-Forwarded-For.

    ``trusted`` holds addresses and networks (``10.42.0.0/16``: a cluster's pod range, where
    the ingress has no fixed address).
    """
    peer = _plain(remote) if remote else "unknown"
    if forwarded_for and address_in(peer, trusted):
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


def address_in(address: str | None, allowed: frozenset[str]) -> bool:
    """Whether ``address`` (a peer's own, not a client key) is one of ``allowed``'s addresses or in
    one of its networks (CIDR); an IPv4-mapped IPv6 peer (a dual-stack socket's) as its IPv4."""
    if not address:
        return False
    plain = _plain(address.split("%", 1)[0])  # an IPv6 zone (fe80::1%eth0) names no other host
    if plain in allowed:
        return True
    try:
        ip = ipaddress.ip_address(plain)
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in _networks(allowed))


@functools.lru_cache(maxsize=16)
def _networks(allowed: frozenset[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Each entry that is an address or a network, as a network (a bare address: its /32 or /128)."""
    out = []
    for entry in allowed:
        try:
            out.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:  # a name only ever matched as written
            continue
    return tuple(out)


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
