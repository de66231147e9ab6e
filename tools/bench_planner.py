"""Benchmark the planner: one pass for a 4-tier x 4-class pool, and 1,000 pools in a row.

    .venv/bin/python tools/bench_planner.py [--pools 1000] [--repeat 200]

Prints the median and 90th percentile of one `plan()` call, the share of it spent in the
optimizer, and the wall time to plan N different pools one after another (what one
operator replica does per interval for N pools). A benchmark, not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))

from gpufleet.api.status import (  # noqa: E402
    ClassStatus,
    Decision,
    InferencePoolStatus,
    TierStatus,
    TierWeight,
)
from gpufleet.api.types import InferencePoolSpec  # noqa: E402
from gpufleet.planning import planner  # noqa: E402
from gpufleet.planning.records import (  # noqa: E402
    ClassDemand,
    MetricsState,
    Observation,
    TierObservation,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TIERS = [
    ("h100", "H100-PCIe-80GB", 1, "2.00", 1, 8),
    ("h100sxm", "H100-SXM-80GB", 1, "2.60", 0, 8),
    ("rtx4090", "RTX4090", 1, "0.25", 0, 32),
    ("rtx4090x2", "RTX4090", 2, "0.25", 0, 16),
]
CLASSES = [  # name, objective ms, priority, prompt, output
    ("realtime", 100, 100, 200, 200),
    ("chat", 300, 50, 600, 250),
    ("standard", 1000, 20, 1000, 200),
    ("batch", 5000, 0, 1200, 300),
]


def spec() -> InferencePoolSpec:
    body: dict[str, Any] = {
        "model": {"name": "meta-llama/Meta-Llama-3-8B-Instruct"},
        "tiers": [
            {
                "name": name,
                "accelerator": accelerator,
                "gpusPerReplica": gpus,
                "pricePerGPUHour": price,
                "minReplicas": low,
                "maxReplicas": high,
            }
            for name, accelerator, gpus, price, low, high in TIERS
        ],
        "trafficClasses": [
            {
                "name": name,
                "ttftP99Milliseconds": objective,
                "priority": priority,
                "meanPromptTokens": prompt,
                "meanOutputTokens": output,
                **(
                    {}
                    if name == "batch"
                    else {"match": {"headers": [{"name": "x-class", "value": name}]}}
                ),
            }
            for name, objective, priority, prompt, output in CLASSES
        ],
        "objectives": {"maxHourlyCost": "60.00", "maxCostPerMillionTokens": "0.10"},
    }
    return InferencePoolSpec.model_validate(body)


def world(rng: random.Random) -> tuple[Observation, InferencePoolStatus]:
    """A pool mid-life: some replicas running, live weights, a random demand."""
    running = {name: rng.randint(low, min(high, 6)) for name, _, _, _, low, high in TIERS}
    demand = {name: rng.choice([0, 1000, 5000, 20000, 40000]) for name, *_ in CLASSES}
    observation = Observation(
        now=NOW,
        tiers={
            n: TierObservation(name=n, desired_replicas=r, ready_replicas=r, ttft_p99_seconds=0.05)
            for n, r in running.items()
        },
        metrics=MetricsState.AVAILABLE,
        demand={n: ClassDemand(v / 2, v / 2) for n, v in demand.items()},
    )
    previous = InferencePoolStatus(
        tiers=[
            TierStatus(name=n, desired_replicas=r, ready_replicas=r) for n, r in running.items()
        ],
        classes=[
            ClassStatus(name=c, weights=[TierWeight(tier="h100", weight=100)]) for c, *_ in CLASSES
        ],
        last_decision=Decision(time=NOW, reason="Steady", message=""),
    )
    return observation, previous


def _optimizer_share(
    pool_spec: InferencePoolSpec, worlds: list[tuple[Observation, InferencePoolStatus]]
) -> float:
    profile = cProfile.Profile()
    profile.enable()
    for observation, previous in worlds:
        planner.plan(pool_spec, observation, previous)
    profile.disable()
    stats = pstats.Stats(profile)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = next(v[3] for k, v in raw.items() if k[2] == "plan" and k[0].endswith("planner.py"))
    solve = next(
        v[3] for k, v in raw.items() if k[2] == "optimize" and k[0].endswith("optimizer.py")
    )
    return float(solve / total)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    pool_spec = spec()
    rng = random.Random(1)
    planner.plan(pool_spec, *world(rng))  # warm imports and caches

    samples = []
    for _ in range(args.repeat):
        observation, previous = world(rng)
        started = time.perf_counter()
        planner.plan(pool_spec, observation, previous)
        samples.append(time.perf_counter() - started)
    share = _optimizer_share(pool_spec, [world(rng) for _ in range(50)])
    samples.sort()
    median = statistics.median(samples)
    print(f"plan() for 4 tiers x 4 classes, {args.repeat} passes:")
    print(f"  median {median * 1e3:.1f} ms   p90 {samples[int(0.9 * len(samples))] * 1e3:.1f} ms")
    print(f"  optimizer share {share:.0%} of plan time (cProfile, 50 passes)")

    worlds = [world(rng) for _ in range(args.pools)]
    started = time.perf_counter()
    for observation, previous in worlds:
        planner.plan(pool_spec, observation, previous)
    total = time.perf_counter() - started
    print(
        f"{args.pools} pools planned one after another: {total:.2f} s "
        f"({total / args.pools * 1e3:.1f} ms per pool)"
    )
    if not args.no_write:
        from tools.benchmarks_md import write_section

        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_section(
            "planner",
            f"## Planner: one pass, and 1,000 pools\n\n"
            f"`make bench-planner` ({when}, {os.cpu_count()} CPUs), which runs "
            f"`python tools/bench_planner.py --pools {args.pools} --repeat {args.repeat}`.\n\n"
            "| measure | value |\n|---|---|\n"
            f"| `plan()` for 4 tiers x 4 classes, median of {args.repeat} | "
            f"{median * 1e3:.1f} ms |\n"
            f"| `plan()`, 90th percentile | {samples[int(0.9 * len(samples))] * 1e3:.1f} ms |\n"
            f"| share spent in the optimizer (scipy milp / HiGHS) | {share:.0%} |\n"
            f"| {args.pools} pools planned one after another | {total:.2f} s "
            f"({total / args.pools * 1e3:.1f} ms per pool) |\n",
        )
        print("Wrote the planner section of BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
