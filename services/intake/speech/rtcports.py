"""Media through the ports an operator opened: a peer connection's ICE sockets bound inside
WEBRTC_UDP_PORTS, and WEBRTC_PUBLIC_IP offered for a host behind NAT.

aioice binds each host candidate's socket to an ephemeral port and has no port-range option, so
``confine`` replaces, on the connections of one peer connection only, the step that gathers host
candidates: the same sockets and candidates aioice makes, bound to a free port of the range. A
STUN server's reflexive candidates come from those sockets (as aioice does); a TURN allocation is
left to aioice (its socket talks only to the TURN server, an outbound flow).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
import socket
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aioice import Candidate
from aioice import turn as aioice_turn
from aioice.candidate import candidate_foundation, candidate_priority
from aioice.ice import Connection, StunProtocol, server_reflexive_candidate
from aiortc import RTCPeerConnection

log = logging.getLogger(__name__)

Gather = Callable[[int, list[str], int], Awaitable[list[Candidate]]]
# Takes one port of the client's share (WEBRTC_PORTS_PER_CLIENT) for an ICE connection, which binds
# one on each host address (each address has the whole range: the share is per address); False: full.
Admit = Callable[[], bool]


class NoFreePort(Exception):
    """Every port of the range is taken on every host address."""


class ShareFull(Exception):
    """The client's peer connections hold its whole share of the range."""


def connections(pc: RTCPeerConnection) -> list[Connection]:
    """The ICE connections of ``pc``'s transports (one when bundled), once each. aiortc keeps
    aioice's Connection private (``_connection``): there is no other handle on its sockets."""
    gatherers = [t.sender.transport.transport.iceGatherer for t in pc.getTransceivers() if t.sender.transport]
    if pc.sctp is not None:
        gatherers.append(pc.sctp.transport.transport.iceGatherer)
    found: dict[int, Connection] = {}
    for gatherer in gatherers:
        found.setdefault(id(gatherer._connection), gatherer._connection)
    return list(found.values())


def confine(pc: RTCPeerConnection, ports: tuple[int, int], public_ip: str, admit: Admit) -> None:
    """Gather ``pc``'s host candidates inside ``ports``, each connection's admitted to the client's
    share first (call after setRemoteDescription, before setLocalDescription, which gathers)."""
    for conn in connections(pc):
        original: Gather = conn.get_component_candidates
        conn.get_component_candidates = partial(_gather, conn, original, ports, public_ip, admit)  # type: ignore[method-assign]


async def _gather(conn: Connection, original: Gather, ports: tuple[int, int], public_ip: str, admit: Admit,
                  component: int, addresses: list[str], timeout: int = 5) -> list[Candidate]:
    candidates: list[Candidate] = []
    protocols: list[StunProtocol] = []
    if addresses and not admit():
        raise ShareFull("the client holds its share of the media ports")
    for address in addresses:
        protocol = await _bind(conn, address, ports)
        if protocol is None:
            continue
        host, port = protocol.transport.get_extra_info("sockname")[:2]
        protocol.local_candidate = Candidate(
            foundation=candidate_foundation("host", "udp", host), component=component, transport="udp",
            priority=candidate_priority(component, "host"), host=host, port=port, type="host",
        )
        protocols.append(protocol)
        candidates.append(protocol.local_candidate)
        if public_ip and _version(host) == _version(public_ip):
            # the same socket as seen through the NAT: the port is published as the same number
            candidates.append(Candidate(
                foundation=candidate_foundation("srflx", "udp", host), component=component, transport="udp",
                priority=candidate_priority(component, "srflx"), host=public_ip, port=port, type="srflx",
                related_address=host, related_port=port,
            ))
    if addresses and not protocols:
        raise NoFreePort(f"no free UDP port in {ports[0]}-{ports[1]}")
    conn._protocols += protocols
    if conn.stun_server:
        found = [server_reflexive_candidate(p, conn.stun_server) for p in protocols if _version(p) == 4]
        for result in await asyncio.gather(*(asyncio.wait_for(f, timeout) for f in found), return_exceptions=True):
            if isinstance(result, tuple):
                candidates.append(result[0])
    if conn.turn_server:  # aioice's own relay allocation; no host addresses asked for
        candidates += await original(component, [], timeout)
    return candidates


async def _bind(conn: Connection, address: str, ports: tuple[int, int]) -> StunProtocol | None:
    """A socket on ``address`` at a free port of the range (tried from a random one on), or None."""
    loop = asyncio.get_running_loop()
    first, last = ports
    count = last - first + 1
    start = random.randrange(count)
    for k in range(count):
        port = first + (start + k) % count
        try:
            transport, protocol = await loop.create_datagram_endpoint(
                lambda: StunProtocol(conn), local_addr=(address, port))
        except OSError:
            continue  # taken (or the address cannot be bound: every port fails alike, bounded by count)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, aioice_turn.UDP_SOCKET_BUFFER_SIZE)
        return protocol  # type: ignore[no-any-return]
    log.warning("no free UDP port in %d-%d on %s", first, last, address)
    return None


def _version(where: Any) -> int:
    host = where.local_candidate.host if isinstance(where, StunProtocol) else where
    return ipaddress.ip_address(host.split("%")[0]).version
