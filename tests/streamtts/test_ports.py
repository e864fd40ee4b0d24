"""Ports for the processes that `streamtts up` and the tests start: picked free, then bound by
another process a moment later, so two picks must never collide (CI once saw synth's metrics
port handed out again for Redis) and an outgoing connection must not be able to take one."""

from __future__ import annotations

import socket
from pathlib import Path

from streamtts.redisserver import PORT_FLOOR, free_port


def ephemeral_floor() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_a_process_never_gets_the_same_port_twice() -> None:
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)


def test_ports_lie_below_the_kernels_ephemeral_range() -> None:
    ports = [free_port() for _ in range(100)]
    assert all(PORT_FLOOR <= port < ephemeral_floor() for port in ports)


def test_a_port_another_socket_holds_is_not_handed_out() -> None:
    held: list[socket.socket] = []
    try:
        for port in range(PORT_FLOOR, ephemeral_floor(), 64):  # one port in 64 (few descriptors)
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            held.append(sock)
        taken = {sock.getsockname()[1] for sock in held}
        assert len(taken) > 200
        assert not taken & {free_port() for _ in range(600)}
    finally:
        for sock in held:
            sock.close()
