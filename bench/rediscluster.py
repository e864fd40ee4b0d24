"""A real Redis Cluster on loopback, for the tests (tests/support/cluster.py) and the benchmarks
(bench/bench_cluster.py): by default 3 masters and 3 replicas of Debian's redis-server, each node
in its own folder, joined by ``redis-cli --cluster create`` (as an operator would).

Every node is started with its own cluster bus port (``--cluster-port``) so no node depends on
``port + 10000`` being free. :meth:`Cluster.kill` sends SIGKILL to a node, for failover tests.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from streamtts.redisserver import die_with_parent, free_port, server_binaries

MASTERS = 3
REPLICAS_PER_MASTER = 1
# How long the cluster may take to agree (every slot served, every node sees the others).
READY_TIMEOUT_S = 60.0
# A master unreachable this long is failed over by its replica (Redis's default is 15 s).
NODE_TIMEOUT_MS = 2000


@dataclass
class Node:
    port: int
    bus_port: int
    data_dir: Path
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Cluster:
    nodes: list[Node] = field(default_factory=list)
    replicas: int = REPLICAS_PER_MASTER  # per master
    binary: str = ""  # the server every node runs (empty: the best here, server_binaries()[0])

    @property
    def url(self) -> str:
        """A REDIS_URL naming one node: a client finds the rest (and cluster mode) from it."""
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def cli(self, port: int, *args: str, timeout_s: float = 10.0) -> str:
        done = subprocess.run(
            [_cli_binary(), "-h", "127.0.0.1", "-p", str(port), *args],
            capture_output=True, text=True, timeout=timeout_s, check=True,
        )
        return done.stdout

    def masters(self) -> list[Node]:
        """The nodes that are masters now (a failover changes which)."""
        out = []
        for node in self.nodes:
            if node.alive() and "role:master" in self.cli(node.port, "INFO", "replication"):
                out.append(node)
        return out

    def master_of(self, key: str) -> Node:
        """The live node that serves ``key``'s slot now."""
        return self.master_of_slot(int(self.cli(self.live()[0].port, "CLUSTER", "KEYSLOT", key).strip()))

    def master_of_slot(self, slot: int) -> Node:
        """The live node that serves ``slot`` now."""
        for line in self.cli(self.live()[0].port, "CLUSTER", "NODES").splitlines():
            parts = line.split()
            if "master" not in parts[2] or "fail" in parts[2]:
                continue
            for span in parts[8:]:
                low, _, high = span.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    port = int(parts[1].split("@")[0].rsplit(":", 1)[1])
                    return next(n for n in self.nodes if n.port == port)
        raise LookupError(f"no master serves slot {slot}")

    def move_slot(self, slot: int, target: Node) -> None:
        """Move ``slot`` and its keys to the master ``target``, the steps of ``redis-cli --cluster
        reshard``: IMPORTING and MIGRATING, MIGRATE the keys, then every master names the new owner
        (a client still asking the old one gets MOVED)."""
        source = self.master_of_slot(slot)
        source_id, target_id = (self.cli(n.port, "CLUSTER", "MYID").strip() for n in (source, target))
        self.cli(target.port, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", source_id)
        self.cli(source.port, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", target_id)
        while keys := self.cli(source.port, "CLUSTER", "GETKEYSINSLOT", str(slot), "100").split():
            self.cli(source.port, "MIGRATE", "127.0.0.1", str(target.port), "", "0", "5000", "KEYS", *keys)
        for node in (target, source, *(m for m in self.masters() if m not in (target, source))):
            self.cli(node.port, "CLUSTER", "SETSLOT", str(slot), "NODE", target_id)

    def live(self) -> list[Node]:
        return [n for n in self.nodes if n.alive()]

    def kill(self, node: Node) -> None:
        """SIGKILL: no AOF flush, no goodbye to the cluster (a machine that died)."""
        node.process.send_signal(signal.SIGKILL)
        node.process.wait()

    def restart(self, node: Node) -> None:
        """Start a killed node again on its folder and ports: it rejoins (a replica, once failed over)."""
        binary = self.binary or server_binaries()[0]
        node.process = start_node(node.data_dir, binary, ports=(node.port, node.bus_port)).process

    def failed_over(self, node: Node) -> bool:
        """Another node now serves the slots ``node`` served (it is marked failed)."""
        live = self.live()
        if not live:
            return False
        nodes = self.cli(live[0].port, "CLUSTER", "NODES")
        mine = next((line for line in nodes.splitlines() if f":{node.port}@" in line), "")
        return "fail" in mine.split()[2] if mine else False

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until every live node says the cluster is ok and all 16384 slots are served."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(_ok(self.cli(n.port, "CLUSTER", "INFO")) for n in self.live()) and self._replicated():
                return
            time.sleep(0.1)
        raise RuntimeError(f"the cluster did not become ready within {timeout_s:g}s")

    def _replicated(self) -> bool:
        """Every master has its replicas connected and in sync (WAIT can be answered)."""
        for node in self.masters():
            info = self.cli(node.port, "INFO", "replication")
            if f"connected_slaves:{self.replicas}" not in info or (self.replicas and "state=online" not in info):
                return False
        return True

    def flushall(self) -> None:
        for node in self.masters():
            self.cli(node.port, "FLUSHALL")

    def stop(self) -> None:
        for node in self.nodes:
            if node.alive():
                node.process.terminate()
        for node in self.nodes:
            try:
                node.process.wait(10)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()


def _ok(info: str) -> bool:
    return "cluster_state:ok" in info and "cluster_slots_ok:16384" in info


def _cli_binary() -> str:
    found = shutil.which("redis-cli")
    if not found:
        raise RuntimeError("redis-cli is not installed (Debian: apt-get install redis-tools)")
    return found


def start_node(data_dir: Path, binary: str, *, ports: tuple[int, int] | None = None) -> Node:
    """A cluster node on ``ports`` (its port and bus port; None: two free ones)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if ports is None:
        port, bus_port = free_port(), free_port()
        while bus_port == port:
            bus_port = free_port()
    else:
        port, bus_port = ports
    args = [
        binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir),
        "--cluster-enabled", "yes", "--cluster-port", str(bus_port),
        "--cluster-config-file", str(data_dir / "nodes.conf"),
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
        "--logfile", str(data_dir / "redis.log"),
    ]
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=die_with_parent,
    )
    node = Node(port, bus_port, data_dir, proc)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not node.alive():
            raise RuntimeError(f"a cluster node exited at start; see {data_dir / 'redis.log'}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return node
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"a cluster node did not answer; see {data_dir / 'redis.log'}")


def start_cluster(
    base: Path, *, binary: str | None = None, masters: int = MASTERS, replicas: int = REPLICAS_PER_MASTER
) -> Cluster:
    """``masters`` nodes with ``replicas`` each; returns once every slot is served (and every
    replica is in sync)."""
    binary = binary or server_binaries()[0]
    cluster = Cluster(replicas=replicas, binary=binary)
    try:
        for i in range(masters * (1 + replicas)):
            cluster.nodes.append(start_node(base / f"node{i}", binary))
        addresses = [n.address for n in cluster.nodes]
        cluster.cli(
            cluster.nodes[0].port, "--cluster", "create", *addresses,
            "--cluster-replicas", str(replicas), "--cluster-yes", timeout_s=60,
        )
        cluster.wait_ready()
    except BaseException:
        cluster.stop()
        raise
    return cluster
