"""Daily-pattern benchmark: a step that recurs at 09:00 each day, day one against the days after.

Runs `gpufleet simulate` (the command's own code path) with examples/llama3-8b-mixed.yaml on
the command's `synthetic:workday` load (4x from 09:00 to 17:00 UTC, the trace starting at
00:00) for DAYS days, policies gpufleet and static-split, 30% realtime (the shortest prompts,
`--assign size`), on each seed. On day one the planner has not seen a day, so the 09:00
step is a surprise; from day two on, each class's daily pattern (planning.daily) plans the
step a lead time ahead. Prints, per day, each policy's attainment per class in the step's
first quarter hour (09:00 to 09:15) and over the whole day, and the Ready replicas per tier
at the first decision after 09:00;
then rewrites the daily section of BENCHMARKS.md (between its markers). Run with
`make bench-daily`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gpufleet.sim.engine import RunResult

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "operator"))

from tools.benchmarks_md import write_section  # noqa: E402

SECTION = "daily"
POOL = "examples/llama3-8b-mixed.yaml"
DAYS = 3
RATE = 3.0  # mean req/s over a day: 1.5 at night, 6 from 09:00 to 17:00
SEEDS = (0, 1, 2)
POLICIES = ("gpufleet", "static-split")
STEP_HOUR = 9.0
WINDOW = (9.0, 9.25)  # hours of the day: the step's first quarter hour
DAY = 86400.0


def command(seed: int) -> list[str]:
    return [
        "simulate",
        "-f", POOL,
        "--trace", "synthetic:workday",
        "--duration", f"{DAYS * DAY:g}",
        "--rate", f"{RATE:g}",
        "--policy", ",".join(POLICIES),
        "--realtime-fraction", "0.3",
        "--assign", "size",
        "--seed", str(seed),
        "--scrape-interval", "5",  # as make bench-sim: a pass reads its last interval
    ]  # fmt: skip


def attainment(run: RunResult, cls: int, objective: float, start: float, end: float) -> float:
    """Share of the class's requests arriving in [start, end) whose first token came within
    the objective, as the simulator's report counts it (dropped or cut: a miss)."""
    from gpufleet.sim.metrics import Fate

    arrival = run.arrival_seconds
    mine = (run.class_of == cls) & (arrival >= start) & (arrival < end)
    if not np.any(mine):
        return float("nan")
    ttft = np.where(run.fate[mine] == Fate.CUT, np.inf, run.ttft[mine])
    return float(np.mean(ttft <= objective))


def _clock(hours: float) -> str:
    return f"{int(hours):02d}:{round(hours % 1 * 60):02d}"


def ready_after(run: RunResult, moment: float) -> dict[str, int]:
    """Ready replicas per tier at the first interval at or after `moment`."""
    times = np.asarray(run.timeline.time)
    i = int(np.searchsorted(times, moment))
    i = min(i, len(times) - 1)
    return {tier: run.timeline.ready[tier][i] for tier in run.timeline.ready}


def spent(run: RunResult, start: float, end: float) -> float:
    """Dollars spent between two moments, from the timeline's running total."""
    times = np.asarray(run.timeline.time)
    cost = np.asarray(run.timeline.cost)
    if not len(times):
        return 0.0
    return float(np.interp(end, times, cost) - np.interp(start, times, cost))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    from gpufleet.cli import build_parser
    from gpufleet.commands.simulate import run as simulate

    started = time.monotonic()
    rows: list[list[str]] = []
    objectives: dict[str, float] = {}
    step: dict[tuple[str, int], list[float]] = {}  # (policy, day) -> step attainment per seed
    cost: dict[tuple[str, int], list[float]] = {}
    for seed in SEEDS:
        argv_ = command(seed)
        print("gpufleet " + shlex.join(argv_), flush=True)
        outcome = simulate(build_parser(["simulate"]).parse_args([*argv_, "--no-progress"]))
        objectives = {c.name: c.objective_seconds for c in outcome.spec.traffic_classes}
        for day in range(DAYS):
            base = day * DAY
            for result in outcome.results:
                classes = list(result.classes)  # the order of result.class_of
                around = [
                    attainment(
                        result,
                        k,
                        objectives[name],
                        base + WINDOW[0] * 3600,
                        base + WINDOW[1] * 3600,
                    )
                    for k, name in enumerate(classes)
                ]
                whole = [
                    attainment(result, k, objectives[name], base, base + DAY)
                    for k, name in enumerate(classes)
                ]
                ready = ready_after(result, base + STEP_HOUR * 3600 + 1)
                dollars = spent(result, base, base + DAY)
                step.setdefault((result.policy, day + 1), []).append(around[-1])
                cost.setdefault((result.policy, day + 1), []).append(dollars)
                rows.append(
                    [
                        str(seed),
                        str(day + 1),
                        result.policy,
                        " / ".join(f"{a * 100:.2f}" for a in around),
                        " / ".join(f"{a * 100:.2f}" for a in whole),
                        ", ".join(f"{t} {n}" for t, n in ready.items()),
                        f"{dollars:.2f}",
                    ]
                )
    wall = time.monotonic() - started
    order = list(outcome.results[0].classes) if SEEDS else list(objectives)
    names = " / ".join(f"{n} ({objectives[n] * 1000:.0f} ms)" for n in order)
    header = [
        "seed",
        "day",
        "policy",
        f"attained {_clock(WINDOW[0])}-{_clock(WINDOW[1])} %: {names}",
        "attained over the day %",
        "Ready at 09:00",
        "$ that day",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    table = "\n".join(lines)
    last = order[-1] if order else "batch"
    means = [
        f"{policy}: "
        + ", ".join(
            f"day {d} {np.mean(step[(policy, d)]) * 100:.2f}% (${np.mean(cost[(policy, d)]):.2f})"
            for d in range(1, DAYS + 1)
        )
        for policy in POLICIES
    ]
    summary = (
        f"Mean over the seeds, {last} attained {_clock(WINDOW[0])}-{_clock(WINDOW[1])} "
        "(and $ that day): " + "; ".join(means) + "."
    )
    print(table)
    print(summary)
    print(f"wall {wall:.0f} s")
    if args.no_write:
        return 0
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = f"""## The daily pattern: a 09:00 step, day one against the days after

`make bench-daily` ({stamp}, {platform.python_implementation()} {platform.python_version()}):
`python tools/bench_daily.py` runs, for seeds {", ".join(map(str, SEEDS))},

    gpufleet {shlex.join(command(0))}

The `workday` load is Poisson at {RATE / 2:g} req/s at night and {RATE * 2:g} req/s from 09:00
to 17:00 UTC, every day, the trace starting at 00:00. On day 1 the planner has not seen a
day, so the step at 09:00 is a surprise it answers a lead time late; from day 2 on, each
class's daily pattern (its mean demand per 15-minute slot, `status.classes[].forecast.daily`)
plans the step a lead time ahead. static-split holds the fleet sized for the busiest 30 s
interval all day. Attainment is the share of a class's requests served within its
objective; "Ready at 09:00" is the fleet at the first decision after 09:00; "$ that day"
what the fleet cost from 00:00 to 24:00.

{table}

{summary}

Wall time {wall:.0f} s.
"""
    write_section(SECTION, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
