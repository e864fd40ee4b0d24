"""Benchmark: Redis's AOF with ``appendfsync always`` vs ``everysec`` at this system's write rates.

Two real redis-servers with an AOF on this machine's disk, one per policy, side by side in one run.
On each: intake's submit (the claim script: catalog entry, `meta`, job) from ``--clients``
concurrent clients, and a worker's conditional append of audio records of ``--body-bytes`` (a
sentence of MP3) from ``--casts`` casts at once. Prints, per policy, submits and appends per
second and the ratio always / everysec, next to what the system needs (a CPU worker appends about
one chunk a second per cast; a GPU worker a few dozen); writes bench/results/persistence.json.

    .venv/bin/python bench/bench_persistence.py [--submits 2000] [--appends 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from castlog import Audio, CastStore, Meta, Start, content_id
from servicekit import client_for
from streamtts.redisserver import start_server

RESULTS = Path(__file__).resolve().parent / "results" / "persistence.json"
POLICIES = ("everysec", "always")


async def submits(store: CastStore, n: int, clients: int, tag: str) -> float:
    """Submits per second of ``n`` new casts from ``clients`` concurrent clients."""
    async def client(k: int) -> None:
        for j in range(k, n, clients):
            text = f"{tag} persistence bench text {j}."
            meta = Meta(title="t", voice="af_heart", chars=len(text), sentences=1, created_at=0)
            await store.submit(content_id(text, "af_heart"), text, "af_heart", meta)

    started = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return n / (time.perf_counter() - started)


async def appends(store: CastStore, n: int, casts: int, body_bytes: int, tag: str) -> float:
    """Audio appends per second, ``casts`` casts appending at once, one record per append."""
    body = bytes(range(256)) * (body_bytes // 256)

    async def cast(k: int) -> None:
        cid = content_id(f"{tag} append cast {k}", "af_heart")
        tail = await store.append(cid, 0, [Start(attempt=1, resume_from=0, at=0)])
        for i in range(n // casts):
            tail = await store.append(cid, tail, [Audio(i=i, t="s", d=1000, o=1000 * i, body=body)])

    started = time.perf_counter()
    await asyncio.gather(*(cast(k) for k in range(casts)))
    return n / (time.perf_counter() - started)


async def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="persistence-", dir=args.dir) as tmp:
        servers = {p: start_server(Path(tmp) / p, aof=True, appendfsync=p) for p in POLICIES}
        try:
            for round_ in range(args.rounds):  # alternate, so that neither gets the quieter moments
                for policy, server in servers.items():
                    redis = client_for(server.url)
                    store = CastStore(redis)
                    tag = f"{policy}{round_}"
                    got = out.setdefault(policy, {"submits_per_s": 0.0, "appends_per_s": 0.0})
                    got["submits_per_s"] += await submits(store, args.submits, args.clients, tag) / args.rounds
                    got["appends_per_s"] += await appends(store, args.appends, args.casts, args.body_bytes, tag) / args.rounds
                    await redis.aclose()
        finally:
            for server in servers.values():
                server.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submits", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--appends", type=int, default=600)
    parser.add_argument("--casts", type=int, default=3)
    parser.add_argument("--body-bytes", type=int, default=12_288)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None, help="where the AOFs go (default: the temp folder)")
    args = parser.parse_args()
    got = asyncio.run(measure(args))
    print("| policy | submits/s | appends/s |\n|---|---|---|")
    for policy in POLICIES:
        print(f"| {policy} | {got[policy]['submits_per_s']:.0f} | {got[policy]['appends_per_s']:.0f} |")
    ratios = {k: got["always"][k] / got["everysec"][k] for k in ("submits_per_s", "appends_per_s")}
    print(f"| always / everysec | {ratios['submits_per_s']:.2f} | {ratios['appends_per_s']:.2f} |")
    RESULTS.write_text(json.dumps({"args": vars(args), "results": got, "ratios": ratios}, indent=2) + "\n")


if __name__ == "__main__":
    main()
