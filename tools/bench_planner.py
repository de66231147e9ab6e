"""Benchmark the planner: one pass for a 4-tier x 4-class pool, and 1,000 pools in a row.

    .venv/bin/python tools/bench_planner.py [--pools 1000] [--repeat 200]

Prints the median and 90th percentile of one `plan()` call with the planner's solver
caches off and on, side by side, for three streams of passes (worlds drawn from five
demand levels, a demand never seen before, ten unchanged worlds in turn), the share of a
pass spent in the optimizer and in the routing LP; then a pool whose demand drifts a few
percent a pass, its status carried, with the reuse of the optimizer's last answer off and
on (`planning/reuse.py`) and the share of passes that skipped the optimizer; how soon a
pool with steady demand is planned from the cache, and the wall time to plan N pools one
after another (what one operator replica does per interval for N pools), a first
interval and an unchanged one.
A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))

from gpufleet.api.status import (  # noqa: E402
    ClassStatus,
    Decision,
    InferencePoolStatus,
    Recommendation,
    TierStatus,
    TierWeight,
)
from gpufleet.api.types import InferencePoolSpec  # noqa: E402
from gpufleet.planning import memo, optimizer, planner, reuse  # noqa: E402
from gpufleet.planning.forecast import to_status  # noqa: E402
from gpufleet.planning.records import (  # noqa: E402
    ClassDemand,
    MetricsState,
    Observation,
    Plan,
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


def world(rng: random.Random, *, jitter: bool = False) -> tuple[Observation, InferencePoolStatus]:
    """A pool mid-life: some replicas running, live weights, a random demand (one of five
    levels per class; with `jitter`, moved by up to 10% so that no two passes share one)."""
    running = {name: rng.randint(low, min(high, 6)) for name, _, _, _, low, high in TIERS}
    demand = {name: rng.choice([0, 1000, 5000, 20000, 40000]) for name, *_ in CLASSES}
    if jitter:
        demand = {n: v * rng.uniform(0.9, 1.1) for n, v in demand.items()}
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


World = tuple[Observation, InferencePoolStatus]


def _shares(
    pool_spec: InferencePoolSpec, worlds: list[World], *, clear: bool = False
) -> tuple[float, float]:
    """Shares of plan time in the optimizer's MILP and in the routing LP (cProfile); with
    `clear`, the caches emptied before each pass (outside the profile)."""
    profile = cProfile.Profile()
    for observation, previous in worlds:
        if clear:
            memo.clear_all()
        profile.enable()
        planner.plan(pool_spec, observation, previous)
        profile.disable()
    stats = pstats.Stats(profile)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]

    def cumulative(module: str, function: str) -> float:
        return float(
            sum(v[3] for k, v in raw.items() if k[2] == function and k[0].endswith(module))
        )

    total = cumulative("planner.py", "plan")
    return (
        cumulative("optimizer.py", "optimize") / total,
        cumulative("stabilization.py", "route_on_ready") / total,
    )


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p90_ms: float
    optimizer: float  # share of plan time in the optimizer (cProfile)
    routing: float  # share of plan time routing on Ready replicas (its LP)
    hits: float  # share of optimizer calls answered from its cache


def _timing(samples: list[float], shares: tuple[float, float], hits: float) -> Timing:
    samples = sorted(samples)
    return Timing(
        statistics.median(samples) * 1e3,
        samples[int(0.9 * len(samples))] * 1e3,
        *shares,
        hits,
    )


def _time(pool_spec: InferencePoolSpec, worlds: list[World]) -> tuple[Timing, Timing]:
    """Each world planned twice in a row, caches off then on (they start empty), so that
    the two are timed side by side under the same load; then each way profiled."""
    memo.clear_all()
    off, on = [], []
    for observation, previous in worlds:
        with memo.bypassed():
            started = time.perf_counter()
            planner.plan(pool_spec, observation, previous)
            off.append(time.perf_counter() - started)
        started = time.perf_counter()
        planner.plan(pool_spec, observation, previous)
        on.append(time.perf_counter() - started)
    stats = optimizer.SOLUTIONS.stats()
    hits = stats.hits / (stats.hits + stats.misses) if stats.hits + stats.misses else 0.0
    with memo.bypassed():
        shares_off = _shares(pool_spec, worlds[:50])
    memo.clear_all()
    shares_on = _shares(pool_spec, worlds[:50])
    return _timing(off, shares_off, 0.0), _timing(on, shares_on, hits)


def _carried(plan: Plan, observation: Observation) -> InferencePoolStatus:
    """What the next pass finds as previous: replicas, weights and the demand forecast."""
    return InferencePoolStatus(
        tiers=[
            TierStatus(
                name=t.name,
                desired_replicas=t.replicas,
                ready_replicas=t.replicas,
                capacity_factor_percent=t.capacity_factor_percent,
                recommendations=[Recommendation(time=w, replicas=r) for w, r in t.recommendations],
            )
            for t in plan.tiers.values()
        ],
        classes=[
            ClassStatus(
                name=c.name,
                weights=[TierWeight(tier=t, weight=w) for t, w in c.weights.items()],
                demand_tokens_per_second=None
                if c.demand_tokens_per_second is None
                else round(c.demand_tokens_per_second),
                forecast=None if c.forecast is None else to_status(c.forecast),
            )
            for c in plan.classes.values()
        ],
        last_decision=Decision(time=observation.now, reason=plan.reason, message=plan.message),
        sizing=plan.sizing,
    )


def _steady(pool_spec: InferencePoolSpec, rng: random.Random, passes: int) -> tuple[int, float]:
    """A pool whose demand holds still, each pass 30 s after the last and given the status
    the last one wrote (its forecast settles): the first pass from which every pass is
    answered from the optimizer's cache, and the median plan time from then on."""
    observation, previous = world(rng, jitter=True)
    memo.clear_all()
    settled, samples = passes, []
    for i in range(passes):
        misses = optimizer.SOLUTIONS.stats().misses
        started = time.perf_counter()
        plan = planner.plan(pool_spec, observation, previous)
        samples.append(time.perf_counter() - started)
        if optimizer.SOLUTIONS.stats().misses > misses:
            settled = i + 1
        previous = _carried(plan, observation)
        observation = dataclasses.replace(
            observation,
            now=NOW + timedelta(seconds=30 * (i + 1)),
            tiers={
                n: TierObservation(n, t.replicas, t.replicas, ttft_p99_seconds=0.05)
                for n, t in plan.tiers.items()
            },
        )
    after = samples[settled:] or samples[-1:]
    return settled, statistics.median(after) * 1e3


BASE_DEMAND = {"realtime": 2000.0, "chat": 5000.0, "standard": 10000.0, "batch": 20000.0}


def drifting(rng: random.Random, passes: int) -> list[dict[str, float]]:
    """Per-class demand, tokens/s, pass after pass: each class moved by up to 2% either way
    each pass, and in one pass out of 20 one class steps by x0.7 or x1.4 (a class stays
    between half and twice its base level)."""
    level = dict(BASE_DEMAND)
    out = []
    for _ in range(passes):
        for name in level:
            level[name] *= rng.uniform(0.98, 1.02)
        if rng.random() < 0.05:
            name = rng.choice(list(level))
            level[name] *= rng.choice([0.7, 1.4])
        level = {
            n: min(max(v, 0.5 * BASE_DEMAND[n]), 2.0 * BASE_DEMAND[n]) for n, v in level.items()
        }
        out.append(dict(level))
    return out


@dataclass(frozen=True)
class Drift:
    median_ms: float
    p90_ms: float
    skipped: float  # share of passes that kept the last answer (no solve)
    solves: float  # optimizer solves per pass (misses of its cache, cleared each pass)
    optimizer: float  # share of plan time in the optimizer (cProfile)
    routing: float  # share of plan time routing on Ready replicas (its LP)


def _drift(pool_spec: InferencePoolSpec, demands: list[dict[str, float]]) -> tuple[Drift, Drift]:
    """Two pools through the same drifting demand, 30 s a pass, each pass given the status
    the last one wrote and its replicas Ready: one as the operator runs it (the status
    carries the last answer: reuse on), one whose status never carries it (reuse off: a
    solve every pass, the planner before reuse). Their passes alternate, so both are timed
    under the same load; the caches are emptied before each pass, so that neither pool
    finds a program the other solved (a drifting demand never repeats its own)."""
    rng = random.Random(7)
    start = world(rng)
    samples: dict[bool, list[float]] = {True: [], False: []}
    skipped, solves = {True: 0, False: 0}, {True: 0, False: 0}
    replay: dict[bool, list[World]] = {True: [], False: []}
    state = {True: start, False: start}
    for i, demand in enumerate(demands):
        for on in (False, True):
            observation = dataclasses.replace(
                state[on][0],
                now=NOW + timedelta(seconds=30 * (i + 1)),
                demand={n: ClassDemand(v / 2, v / 2) for n, v in demand.items()},
            )
            previous = state[on][1]
            if not on:
                previous = previous.model_copy(update={"sizing": None})
            replay[on].append((observation, previous))
            memo.clear_all()
            started = time.perf_counter()
            plan = planner.plan(pool_spec, observation, previous)
            samples[on].append(time.perf_counter() - started)
            solves[on] += optimizer.SOLUTIONS.stats().misses
            skipped[on] += plan.sizing is not None and plan.sizing.time < observation.now
            ready = {
                n: TierObservation(n, t.replicas, t.replicas, ttft_p99_seconds=0.05)
                for n, t in plan.tiers.items()
            }
            state[on] = (
                dataclasses.replace(observation, tiers=ready),
                _carried(plan, observation),
            )
    result = []
    for on in (False, True):
        ordered = sorted(samples[on])
        shares = _shares(pool_spec, replay[on][:50], clear=True)
        result.append(
            Drift(
                statistics.median(ordered) * 1e3,
                ordered[int(0.9 * len(ordered))] * 1e3,
                skipped[on] / len(demands),
                solves[on] / len(demands),
                *shares,
            )
        )
    return result[0], result[1]


def _interval(pool_spec: InferencePoolSpec, worlds: list[World]) -> float:
    started = time.perf_counter()
    for observation, previous in worlds:
        planner.plan(pool_spec, observation, previous)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    pool_spec = spec()
    rng = random.Random(1)
    planner.plan(pool_spec, *world(rng))  # warm imports

    # Three streams of passes, each timed with the caches off (as before) and on:
    # worlds drawn from the five demand levels (the benchmark as it always ran; equal
    # draws repeat a program), every demand new (no pass can reuse one), and ten worlds
    # planned in turn, over and over (idle pools: the operator's steady state).
    drawn = [world(rng) for _ in range(args.repeat)]
    fresh = [world(rng, jitter=True) for _ in range(args.repeat)]
    quiet = [world(rng, jitter=True) for _ in range(10)]
    idle = [quiet[i % len(quiet)] for i in range(args.repeat)]
    rows = []
    for label, worlds in (
        ("every pass a world drawn from 5 demand levels per class", drawn),
        ("every pass a demand never seen before", fresh),
        ("10 idle pools planned in turn (each world unchanged)", idle),
    ):
        off, on = _time(pool_spec, worlds)
        rows.append((label, off, on))
        print(f"plan() for 4 tiers x 4 classes, {args.repeat} passes, {label}:")
        for name, t in (("caches off", off), ("caches on ", on)):
            print(
                f"  {name}: median {t.median_ms:.1f} ms   p90 {t.p90_ms:.1f} ms   "
                f"optimizer {t.optimizer:.0%}, routing LP {t.routing:.0%} of plan time   "
                f"cache hits {t.hits:.0%}"
            )

    drift = _drift(pool_spec, drifting(random.Random(11), args.repeat))
    print(
        f"plan() for 4 tiers x 4 classes, {args.repeat} passes, a pool whose demand drifts "
        "(+-2% a pass, a x0.7 or x1.4 step in 5% of passes), its status carried:"
    )
    for name, d in zip(("reuse off", "reuse on "), drift, strict=True):
        print(
            f"  {name}: median {d.median_ms:.1f} ms   p90 {d.p90_ms:.1f} ms   "
            f"optimizer skipped in {d.skipped:.0%} of passes, {d.solves:.2f} solves a pass   "
            f"optimizer {d.optimizer:.0%}, routing LP {d.routing:.0%} of plan time"
        )

    steady_from, steady_ms = _steady(pool_spec, rng, passes=60)
    print(
        f"a pool whose demand holds still, its status carried: every pass from pass "
        f"{steady_from + 1} on answered without a solve (the cache, or its last answer kept), "
        f"median {steady_ms:.1f} ms from then on"
    )

    # An operator's intervals over N pools, each with its own demand: the first plans
    # them all, the next finds nothing changed (the caches hold N pools' programs).
    pools = [world(rng, jitter=True) for _ in range(args.pools)]
    memo.clear_all()
    with memo.bypassed():
        uncached = _interval(pool_spec, pools)
    first = _interval(pool_spec, pools)
    again = _interval(pool_spec, pools)
    print(f"{args.pools} pools, each with its own demand, planned one after another:")
    print(f"  caches off {uncached:.2f} s   first interval {first:.2f} s   next {again:.2f} s")
    if not args.no_write:
        from tools.benchmarks_md import write_section

        write_section(
            "planner",
            _section(args, rows, drift, (steady_from, steady_ms), (uncached, first, again)),
        )
        print("Wrote the planner section of BENCHMARKS.md")
    return 0


def _section(
    args: argparse.Namespace,
    rows: list[tuple[str, Timing, Timing]],
    drift: tuple[Drift, Drift],
    steady: tuple[int, float],
    intervals: tuple[float, float, float],
) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    fresh_off, fresh_on = rows[1][1], rows[1][2]
    idle_off, idle_on = rows[2][1], rows[2][2]
    rest = 1 - fresh_off.optimizer - fresh_off.routing
    body = (
        f"## Planner: one pass, and {args.pools:,} pools\n\n"
        f"`make bench-planner` ({when}, {os.cpu_count()} CPUs), which runs "
        f"`python tools/bench_planner.py --pools {args.pools} --repeat {args.repeat}`. "
        "Caches off is the planner without its solver caches (`planning/memo.py`), as it "
        "was before them; each world is planned both ways in a row, so the two columns are "
        "timed side by side under the same load. The shares are cProfile's over a stream's "
        "first 50 passes, caches on starting empty.\n\n"
        f"Where a pass goes (cProfile, caches off, a new demand each pass): the optimizer's "
        f"MILP (scipy milp / HiGHS) {fresh_off.optimizer:.0%}, the LP that routes on Ready "
        f"replicas {fresh_off.routing:.0%}, everything else (replica models, class "
        f"capacities, bounds, forecasts, weights, the explanation) {rest:.0%}.\n\n"
        "| `plan()` for 4 tiers x 4 classes | caches off: median (p90) | "
        "caches on: median (p90) | optimizer / routing LP share, off | same, on | "
        "optimizer cache hits |\n"
        "|---|---|---|---|---|---|\n"
    )
    for label, off, on in rows:
        body += (
            f"| {label} | {off.median_ms:.1f} ms ({off.p90_ms:.1f}) | "
            f"{on.median_ms:.1f} ms ({on.p90_ms:.1f}) | {off.optimizer:.0%} / "
            f"{off.routing:.0%} | {on.optimizer:.0%} / {on.routing:.0%} | {on.hits:.0%} |\n"
        )
    solving, reusing = drift
    body += (
        "\n| a pool whose demand drifts, its status carried | median (p90) | optimizer "
        "skipped | solves a pass | optimizer / routing LP share |\n"
        "|---|---|---|---|---|\n"
    )
    for label, d in (("reuse off (a solve every pass)", solving), ("reuse on", reusing)):
        body += (
            f"| {label} | {d.median_ms:.1f} ms ({d.p90_ms:.1f}) | {d.skipped:.0%} of passes | "
            f"{d.solves:.2f} | {d.optimizer:.0%} / {d.routing:.0%} |\n"
        )
    body += (
        f"\nThe drifting pool ({args.repeat} passes, 30 s apart, each given the status the "
        "last wrote and its replicas Ready): each class's demand moves by up to 2% either "
        "way each pass, and in one pass out of 20 one class steps by x0.7 or x1.4. The "
        "caches are emptied before each pass (a drifting demand never repeats a program). "
        "Reuse (`planning/reuse.py`) keeps the optimizer's last answer, carried in "
        "`status.sizing`, while nothing else it reads changed (the classes' measured "
        "service times and limits: not beyond a step of a 5% grid), every class's demand is "
        f"within {reuse.TOLERANCE:.0%} of what the answer was solved for and the answer "
        "(its split moved onto tiers with room where needed) still holds the demand: "
        f"the median pass goes from {solving.median_ms:.1f} ms to {reusing.median_ms:.1f} "
        "ms; the "
        "p90 is still a pass that solves.\n"
    )
    uncached, first, again = intervals
    per = 1e3 / args.pools
    body += (
        f"\n| {args.pools:,} pools, each its own demand, one after another | time |\n"
        "|---|---|\n"
        f"| caches off | {uncached:.2f} s ({uncached * per:.1f} ms per pool) |\n"
        f"| caches on, first interval | {first:.2f} s ({first * per:.1f} ms per pool) |\n"
        f"| caches on, next interval, nothing changed | {again:.2f} s "
        f"({again * per:.1f} ms per pool) |\n\n"
        "What helped, by how much: remembering each solver's answer by its exact inputs "
        "(no rounding, no tolerance: a hit returns what the solve would) takes an "
        f"unchanged pool's pass from {idle_off.median_ms:.1f} ms to "
        f"{idle_on.median_ms:.1f} ms ({idle_off.median_ms / idle_on.median_ms:.0f}x). "
        "A pass whose demand moved solves what it solved before "
        f"({fresh_off.median_ms:.1f} ms off, {fresh_on.median_ms:.1f} ms on; a miss adds "
        "only the building of its key). Cheaper HiGHS settings were tried on the programs "
        "of these passes (symmetry detection off, cuts off, a shorter LP age, heuristic "
        "effort 0, presolve off): none moved the median beyond noise, and the last two "
        "changed which of equally cheap solutions came back, so none is kept. In the "
        "operator a pool whose "
        "demand holds still carries a demand forecast in its status that settles over its "
        f"first passes: here every pass from pass {steady[0] + 1} on is answered without a "
        f"solve (from the cache, or its last answer kept), at a median {steady[1]:.1f} ms "
        "(of 60 passes, 30 s apart, its status carried from one to the next). The last "
        "table's next interval is that steady state for every pool.\n"
    )
    return body


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
