"""The guarded (conditional) append against a plain XADD of the same record.

Prints ratios measured side by side in one run, rounds interleaved so that noise hits both
sides alike. Target: one guarded append costs at most 1.5x a plain XADD.

    python bench/bench_castlog.py [--rounds 20] [--per-round 200]
"""

from __future__ import annotations

import asyncio
import statistics
import time

from castlog import Audio, CastStore, cast_key
from castlog.records import encode_fields
from servicekit import client_for

from common import RESULTS, arguments, print_rows, print_target, repo_text, temp_redis, write_results

TEXT = repo_text("paragraph").split(".")[0]
BODY = bytes(4_000)  # about one short sentence of 48 kbps MP3
BATCH = 20


def record(i: int) -> Audio:
    return Audio(i=i, t=TEXT, d=1200, o=1200 * i, body=BODY)


async def guarded_one(store: CastStore, cast: str, n: int) -> None:
    for k in range(n):
        await store.append(cast, k, [record(k)])


async def plain_one(store: CastStore, cast: str, n: int) -> None:
    key = cast_key(cast)
    for k in range(n):
        e, h, b = encode_fields(record(k))
        await store.redis.xadd(key, {"e": e, "h": h, "b": b}, id=f"0-{k + 1}")


async def guarded_batch(store: CastStore, cast: str, n: int) -> None:
    for k in range(0, n, BATCH):
        await store.append(cast, k, [record(k + j) for j in range(BATCH)])


async def plain_batch(store: CastStore, cast: str, n: int) -> None:
    await plain_one(store, cast, n)  # 20 plain XADDs, one round trip each


async def timed(fn, store: CastStore, cast: str, n: int) -> float:  # type: ignore[no-untyped-def]
    await store.redis.delete(cast_key(cast))
    start = time.perf_counter()
    await fn(store, cast, n)
    return (time.perf_counter() - start) / n


async def main(rounds: int, per_round: int) -> dict[str, float]:
    with temp_redis() as server:
        redis = client_for(server.url)
        store = CastStore(redis)
        cast = "benchBENCH01"
        samples: dict[str, list[float]] = {k: [] for k in ("guarded", "plain", "guarded_batch", "plain_batch")}
        try:
            await timed(guarded_one, store, cast, per_round)  # warm: loads the script
            for r in range(rounds):
                samples["guarded"].append(await timed(guarded_one, store, cast, per_round))
                samples["plain"].append(await timed(plain_one, store, cast, per_round))
                n = per_round // BATCH * BATCH
                samples["guarded_batch"].append(await timed(guarded_batch, store, cast, n))
                samples["plain_batch"].append(await timed(plain_batch, store, cast, n))
                print(f"\rround {r + 1}/{rounds}", end="", flush=True)
            print()
        finally:
            await redis.aclose()
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "guarded_vs_plain_xadd": med["guarded"] / med["plain"],
        "batch20_guarded_vs_20_plain_xadds": med["guarded_batch"] / med["plain_batch"],
        "batch20_guarded_vs_single_guarded": med["guarded_batch"] / med["guarded"],
    }


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-round", type=int, default=200)
    args = parser.parse_args()
    ratios = asyncio.run(main(args.rounds, args.per_round))
    print(f"{'comparison (per record, median of rounds)':<48} {'ratio':>7}")
    print_rows(ratios, 48, "{:>6.2f}x")
    print_target("guarded append <= 1.5x plain XADD", ratios["guarded_vs_plain_xadd"] <= 1.5)
    write_results(RESULTS / "castlog.json", {"ratios": ratios, "rounds": args.rounds, "per_round": args.per_round})
