"""Simulator benchmark: a suite of traces, gpufleet against the baselines and the oracle.

Runs `gpufleet simulate` (the command's own code path) with examples/llama3-8b-mixed.yaml,
seed 0, 30% realtime, on the Azure conversation trace
(../shared/data/traces/azure-llm-inference-2023-conv.csv) and on the command's own synthetic
constant, diurnal, bursts and flash-crowd traces, each with classes by seeded draw
(`--assign fraction`) and by prompt size (`--assign size`), under the gpufleet,
static-split, utilization, h100-only and oracle policies. Prints one table (per trace,
assignment and policy: $/Mtok, attainment per class against its ceiling, cold starts,
fleet changes, replica-hours) and gpufleet's PASS/MISS per target of issue 15, with
Prometheus scraping the pods every SCRAPE seconds; then gpufleet again with the chart's
default scrape (SLOW_SCRAPE), against the same references; then
replays the io.net runs through one simulated replica, and rewrites the simulator section
of BENCHMARKS.md (between its markers; other sections are left alone). `--traces` runs a
subset. Run with `make bench-sim`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import math
import os
import platform
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from gpufleet.commands.simulate import Outcome
    from gpufleet.sim.engine import RunResult
    from gpufleet.sim.report import Summary

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
TRACE = SHARED / "traces" / "azure-llm-inference-2023-conv.csv"
IONET = SHARED / "iog-llm-inference-benchmarks"
POOL = ROOT / "examples" / "llama3-8b-mixed.yaml"
BENCHMARKS = ROOT / "BENCHMARKS.md"
BEGIN, END = "<!-- sim:begin -->", "<!-- sim:end -->"  # tools.benchmarks_md.markers("sim")

AZURE = "azure-conv"
SYNTHETIC = ("constant", "diurnal", "bursts", "flash-crowd")
TRACES = (AZURE, *SYNTHETIC)
ASSIGNS = ("fraction", "size")
POLICIES = ("gpufleet", "static-split", "utilization", "h100-only", "oracle")
# Prometheus scrapes the vLLM pods every SCRAPE seconds in the suite: a pass reads its last
# interval (the operator's window is an interval and at least four scrapes). gpufleet is run
# again at SLOW_SCRAPE, the chart's default, where it reads the last two.
SCRAPE = 5.0
SLOW_SCRAPE = 15.0
SCRAPES = (f"{SCRAPE:g} s", f"{SLOW_SCRAPE:g} s")  # the scrape table's two runs
WATCH = ("watch", "none")  # the early-pass table's: the queue watch on, and off
WATCH_SEEDS = range(6)  # the seeds gpufleet runs on the steps with the watch and without
WATCH_TRACES = ("bursts", "flash-crowd")

# Issue 15's targets for gpufleet on every trace.
ATTAINMENT_SLACK = 0.01  # (a) at least the oracle's (or the ceiling) minus 1 point
COST_OVER_ORACLE = 1.15  # (b) $/Mtok at most 1.15x the oracle's
SAME_ATTAINMENT = 0.005  # (c) within 0.5 points of static-split counts as the same service
COST_OVER_STATIC_FOR_BETTER = 1.15  # (c) better service may cost up to 1.15x static-split's
COLD_STARTS_OVER_CHANGES = 1.5  # (d) cold starts at most 1.5x the oracle's fleet changes

RULES = f"""\
- **(a) attainment**, per class: gpufleet's SLO attainment at least the oracle's minus
  {ATTAINMENT_SLACK * 100:g} point, or at least the class's ceiling minus {ATTAINMENT_SLACK * 100:g}
  point.
- **(b) cost**: gpufleet's $/Mtok at most {COST_OVER_ORACLE:g}x the oracle's.
- **(c) vs static-split**: PASS when gpufleet is cheaper ($/Mtok) and no class attains more
  than {SAME_ATTAINMENT * 100:g} points less than under static-split; or when no class attains
  more than {SAME_ATTAINMENT * 100:g} points less, some class attains more than
  {SAME_ATTAINMENT * 100:g} points more, and it costs at most
  {COST_OVER_STATIC_FOR_BETTER:g}x static-split's $/Mtok (better service at a bounded price).
- **(d) cold starts**: gpufleet's cold starts (restarts after a lost node included) at most
  {COLD_STARTS_OVER_CHANGES:g}x the oracle's fleet changes, the replicas its decisions added
  over the run summed over tiers (the oracle's own replicas are Ready at once and its
  restarts after a lost node are not decisions, so they do not count)."""


def _relative(path: Path) -> str:
    return os.path.relpath(path, ROOT)


def trace_argument(name: str) -> str:
    return _relative(TRACE) if name == AZURE else f"synthetic:{name}"


def command(
    trace: str,
    assign: str,
    synthetic_seconds: float | None = None,
    *,
    policies: Sequence[str] = POLICIES,
    scrape: float = SCRAPE,
    seed: int = 0,
    queue_check: float | None = None,
) -> list[str]:
    extra = (
        ["--duration", f"{synthetic_seconds:g}"]
        if synthetic_seconds is not None and trace != AZURE
        else []
    )
    if queue_check is not None:
        extra += ["--queue-check", f"{queue_check:g}"]
    return [
        "simulate",
        "-f", _relative(POOL),
        "--trace", trace_argument(trace),
        "--policy", ",".join(policies),
        "--realtime-fraction", "0.3",
        "--seed", str(seed),
        "--assign", assign,
        "--scrape-interval", f"{scrape:g}",
        *extra,
    ]  # fmt: skip


def simulate(argv: list[str], progress: bool) -> Outcome:
    from gpufleet.cli import build_parser
    from gpufleet.commands.simulate import run

    args = build_parser(["simulate"]).parse_args([*argv, *([] if progress else ["--no-progress"])])
    return run(args)


# -- one case: a trace with one class assignment ---------------------------------------------


@dataclass(frozen=True)
class Case:
    """Every policy on one trace with one class assignment."""

    trace: str
    assign: str
    summaries: Sequence[Summary]
    ceiling: Mapping[str, float]  # class -> physical ceiling on its attainment
    requests: int = 0
    duration_seconds: float = 0.0
    wall_seconds: float = 0.0
    # gpufleet's misses per class: (in the first WARM_SECONDS, in all), and its requests
    # the same two ways: where its misses bunch up at the start, the reason says so.
    early: Mapping[str, tuple[int, int, int, int]] = field(default_factory=dict)
    # The trace's first burst (start, end of the span counted) and gpufleet's misses and
    # requests per class in it: a burst no online policy saw coming.
    first_burst: tuple[float, float] | None = None
    in_burst: Mapping[str, tuple[int, int, int, int]] = field(default_factory=dict)
    # The oracle's replicas per tier, interval by interval: how many intervals ran each
    # count. It picks each interval's fleet by replaying that interval's own arrivals.
    oracle_fleet: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    # Per tier, gpufleet's replica-hours over the oracle's during bursts, in the
    # `held_after_burst_seconds` after them, and elsewhere (empty: no burst, or no oracle).
    excess_by_phase: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    headroom_percent: int = 0  # the pool's scaling.headroomPercent: gpufleet plans above demand

    @property
    def label(self) -> str:
        return f"{self.trace} / {self.assign}"

    def policy(self, name: str) -> Summary | None:
        return next((s for s in self.summaries if s.policy == name), None)


@dataclass(frozen=True)
class Target:
    """One of issue 15's targets for gpufleet on one case."""

    key: str  # "a:CLASS", "b", "c" or "d"
    name: str
    passed: bool
    detail: str  # the numbers behind the verdict
    reason: str = ""  # why it missed, where the numbers say

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "MISS"

    @property
    def column(self) -> str:
        """A short heading for the verdicts table."""
        if self.key.startswith("a:"):
            return f"(a) {self.key[2:]}"
        return {"b": "(b) $/Mtok", "c": "(c) vs static-split", "d": "(d) cold starts"}.get(
            self.key, self.key
        )


def case_of(trace: str, assign: str, outcome: Outcome, wall: float) -> Case:
    return Case(
        trace=trace,
        assign=assign,
        summaries=list(outcome.summaries),
        ceiling=dict(outcome.meta.get("attainmentCeiling", {})),
        requests=int(outcome.meta["requests"]),
        duration_seconds=float(outcome.meta["durationSeconds"]),
        wall_seconds=wall,
        early=early_misses(outcome),
        first_burst=(burst := first_burst(outcome)),
        in_burst=misses_within(outcome, burst),
        oracle_fleet=fleet_counts(outcome, "oracle"),
        excess_by_phase=excess_by_phase(outcome),
        headroom_percent=int(outcome.spec.scaling.headroom_percent),
    )


def result_of(outcome: Outcome, policy: str) -> RunResult | None:
    """The policy's run in `outcome` (None: it did not run)."""
    runs = zip(outcome.results, outcome.summaries, strict=True)
    return next((result for result, summary in runs if summary.policy == policy), None)


def fleet_counts(outcome: Outcome, policy: str) -> dict[str, dict[int, int]]:
    """Per tier, replica count -> intervals the policy asked for that many."""
    result = result_of(outcome, policy)
    if result is None:
        return {}
    return {tier: dict(Counter(counts)) for tier, counts in result.timeline.desired.items()}


# Every policy starts warm, with a fleet for the demand of the first model load plus an
# interval: misses in the first minutes of a trace that ramps up past it are that start
# catching up, not the planner's steady play.
WARM_SECONDS = 300.0


def early_misses(outcome: Outcome) -> dict[str, tuple[int, int, int, int]]:
    """gpufleet's (misses in the first WARM_SECONDS, misses, requests then, requests) per class."""
    return misses_within(outcome, (0.0, WARM_SECONDS))


# A burst: a BURST_BIN_SECONDS bin of arrivals at least the planner's burst ratio x the
# median bin (gpufleet.planning.forecast.BURST_RATIO, one definition for both). The span
# counted runs AFTER_BURST_SECONDS past its end: a replica bought at its start serves after
# the example's 76 s model load and a 30 s decision interval.
BURST_BIN_SECONDS = 30.0
AFTER_BURST_SECONDS = 120.0


def burst_bins(arrivals: NDArray[np.float64], edges: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Which bins between `edges` hold a burst: arrivals at least the planner's burst ratio x
    the median bin's."""
    import numpy as np

    from gpufleet.planning.forecast import BURST_RATIO

    counts, _ = np.histogram(arrivals, bins=edges)
    return counts >= BURST_RATIO * max(float(np.median(counts)), 1.0)


def first_burst(outcome: Outcome) -> tuple[float, float] | None:
    """The span of the trace's first burst, from its arrivals (None: no burst)."""
    import numpy as np

    arrivals = next((r.arrival_seconds for r in outcome.results if len(r.arrival_seconds)), None)
    if arrivals is None:
        return None
    edges = np.arange(0.0, float(arrivals.max()) + BURST_BIN_SECONDS, BURST_BIN_SECONDS)
    high = burst_bins(arrivals, edges)
    if not high.any():
        return None
    start = int(np.argmax(high))
    length = int(np.argmin(high[start:])) if not high[start:].all() else len(high) - start
    return float(edges[start]), float(edges[start + length]) + AFTER_BURST_SECONDS


@functools.cache
def held_after_burst_seconds() -> float:
    """How long replicas bought for a burst may run after it: Ready a model load after the
    pass that bought them (up to an interval after it began), then held by the scale-down
    delay. The example pool: 76 + 30 + 300 s."""
    from gpufleet.commands.common import load_pool
    from gpufleet.sim.engine import models_of

    pool = load_pool(POOL)
    load = max(m.model_load_seconds for m in models_of(pool).values())
    scaling = pool.spec.scaling
    return float(load + scaling.interval_seconds + scaling.scale_down_delay_seconds)


# Measured with a change to the planner that was not kept (six seeds per row, gpufleet alone).
HELD_AFTER_BURSTS = """Most of what gpufleet runs over the oracle on the bursts trace runs after the
bursts (the (b) lines above): replicas a burst bought, Ready after it, held by the scale-down
delay. Letting them go as soon as a short burst is over was tried: over seeds 0-5 of the
bursts trace it cut gpufleet's $/Mtok by 3.5% (classes by size) and 7.4% (by draw) at the same
attainment within 0.2 points, but on `make bench-pools`' pools it cost attainment where the
held replicas meet the next burst: realtime 0.4 and 0.6 points on average on the H100-only pool
(by draw and by size; 2.0 on one seed), batch 0.9 points on the loose-objectives pool by draw
(4.3 on one seed). The delay holds them; the (b) MISS is its price."""


def excess_by_phase(outcome: Outcome) -> dict[str, tuple[float, float, float]]:
    """Per tier, gpufleet's replica-hours over the oracle's during bursts (intervals that
    are `burst_bins`), in the `held_after_burst_seconds` after one, and elsewhere, from both
    policies' replicas asked per interval; {} without a burst or either policy."""
    import numpy as np

    ours, oracle = result_of(outcome, "gpufleet"), result_of(outcome, "oracle")
    if ours is None or oracle is None or not len(ours.arrival_seconds):
        return {}
    ends = np.asarray(ours.timeline.time)
    edges = np.concatenate(([0.0], ends))
    high = burst_bins(ours.arrival_seconds, edges)
    if not high.any():
        return {}
    burst_ends = ends[high]
    after = np.zeros(len(ends), dtype=bool)
    for end in burst_ends:
        after |= (ends > end) & (ends - end <= held_after_burst_seconds() + 1e-9)
    after &= ~high
    out = {}
    for tier, counts_ours in ours.timeline.desired.items():
        hours = (
            (np.asarray(counts_ours) - np.asarray(oracle.timeline.desired[tier]))
            * np.diff(edges)
            / 3600.0
        )
        out[tier] = (
            float(hours[high].sum()),
            float(hours[after].sum()),
            float(hours[~high & ~after].sum()),
        )
    return out


def misses_within(
    outcome: Outcome, span: tuple[float, float] | None
) -> dict[str, tuple[int, int, int, int]]:
    """gpufleet's (misses arriving within `span`, misses, requests then, requests) per class."""
    import numpy as np

    if span is None:
        return {}
    for result, summary in zip(outcome.results, outcome.summaries, strict=True):
        if summary.policy != "gpufleet" or len(result.arrival_seconds) != len(result.ttft):
            continue
        inside = (result.arrival_seconds >= span[0]) & (result.arrival_seconds < span[1])
        out = {}
        for index, name in enumerate(result.classes):
            mine = result.class_of == index
            missed = mine & ~(result.ttft <= summary.classes[name].objective_seconds)
            out[name] = (
                int(np.count_nonzero(missed & inside)),
                int(np.count_nonzero(missed)),
                int(np.count_nonzero(mine & inside)),
                int(np.count_nonzero(mine)),
            )
        return out
    return {}


EPSILON = 1e-9  # shares exactly on a bar (0.985 vs 0.99 - 0.005) are on it, not past it


def _points(share: float) -> str:
    return f"{share * 100:+.2f}"


def targets(case: Case) -> list[Target]:
    """gpufleet's verdict on each target (those whose reference policy ran)."""
    ours = case.policy("gpufleet")
    if ours is None:
        return []
    oracle, static = case.policy("oracle"), case.policy("static-split")
    out: list[Target] = []
    if oracle is not None:
        out += [_attainment(case, ours, oracle, name) for name in ours.classes]
        out.append(
            _cost(ours, oracle, case.oracle_fleet, case.excess_by_phase, case.headroom_percent)
        )
    if static is not None:
        out.append(_against_static(case, ours, static, oracle))
    if oracle is not None:
        out.append(_cold_starts(ours, oracle))
    return out


def _reference(case: Case, oracle: Summary, name: str) -> float:
    """What (a) holds a class's attainment against: the oracle's or the class's ceiling,
    the lower (ATTAINMENT_SLACK below it passes)."""
    best = oracle.classes[name].attainment if name in oracle.classes else math.nan
    return min(best, case.ceiling.get(name, 1.0))


def _attainment(case: Case, ours: Summary, oracle: Summary, name: str) -> Target:
    got = ours.classes[name].attainment
    best = oracle.classes[name].attainment if name in oracle.classes else math.nan
    ceiling = case.ceiling.get(name, 1.0)
    passed = got >= _reference(case, oracle, name) - ATTAINMENT_SLACK - EPSILON
    detail = f"{got:.2%} vs the oracle's {best:.2%} (ceiling {ceiling:.2%})"
    reason = ""
    if not passed:
        ratio = ours.ratio_to(oracle)
        hours = ", ".join(
            f"{tier} {h:.2f} vs {oracle.replica_hours.get(tier, 0.0):.2f}"
            for tier, h in ours.replica_hours.items()
        )
        spend = f"{ratio:.2f}x the oracle's $/Mtok (replica-hours {hours})"
        reason = (
            f"less capacity than the oracle's: {spend}"
            if ratio < 1.0
            else f"not for want of spending, {spend}: capacity in the wrong tier or too late"
        )
        reason += (
            f"; {sum(ours.cold_starts.values())} cold starts, {ours.dropped} requests dropped "
            f"(no Ready replica), {cut_by_cause(ours)}"
        )
        reason += _warm_start(case.early.get(name))
        reason += _first_burst(case, name)
    return Target(f"a:{name}", f"(a) {name} attainment", passed, detail, reason)


def _warm_start(early: tuple[int, int, int, int] | None) -> str:
    """'; 589 of its 683 misses ...' where misses bunch up in the first minutes."""
    return _bunched(
        early,
        f"the first {WARM_SECONDS:.0f} s",
        "the fleet started for the first horizon's demand catching up; after them",
    )


def _first_burst(case: Case, name: str) -> str:
    """'; 1203 of its 1858 misses ... in the trace's first burst' where they bunch up there."""
    if case.first_burst is None:
        return ""
    start, end = case.first_burst
    return _bunched(
        case.in_burst.get(name),
        f"the trace's first burst and the {AFTER_BURST_SECONDS:.0f} s after it "
        f"({start:.0f}-{end:.0f} s)",
        "no online policy had seen a burst before it; outside it,",
    )


def _bunched(counts: tuple[int, int, int, int] | None, where: str, then: str) -> str:
    """'; M of its N misses (X%) arrived in WHERE, with Y% of its requests: THEN it missed
    Z% of its requests', where at least 10 misses and twice the requests' share fall there."""
    if counts is None:
        return ""
    missed_then, missed, requests_then, requests = counts
    if missed <= 0 or requests <= 0 or missed_then < 10:
        return ""
    if missed_then / missed < 2 * requests_then / requests:
        return ""
    after = (missed - missed_then) / max(requests - requests_then, 1)
    return (
        f"; {missed_then} of its {missed} misses ({missed_then / missed:.0%}) arrived in "
        f"{where}, with {requests_then / requests:.0%} of its requests: {then} it missed "
        f"{after:.2%} of its requests"
    )


def cut_by_cause(summary: Summary) -> str:
    """'3 cut (node lost 2, drain timeout 1)', for a reason line."""
    causes = ", ".join(f"{c.label} {n}" for c, n in summary.cut_by_cause.items() if n)
    return f"{summary.cut} cut" + (f" ({causes})" if causes else "")


def _cost(
    ours: Summary,
    oracle: Summary,
    fleet: Mapping[str, Mapping[int, int]],
    phases: Mapping[str, tuple[float, float, float]] | None = None,
    headroom_percent: int = 0,
) -> Target:
    ratio = ours.ratio_to(oracle)
    passed = ratio <= COST_OVER_ORACLE + EPSILON
    detail = (
        f"{ratio:.2f}x the oracle's (${ours.cost_per_million_tokens:.4f} vs "
        f"${oracle.cost_per_million_tokens:.4f})"
    )
    reason = ""
    if not passed:
        more = {t: h - oracle.replica_hours.get(t, 0.0) for t, h in ours.replica_hours.items()}
        extra = [f"{tier} {hours:+.2f} h" for tier, hours in more.items() if abs(hours) >= 0.005]
        better = [
            f"{name} {_points(c.attainment - oracle.classes[name].attainment)} points"
            for name, c in ours.classes.items()
            if name in oracle.classes
            and c.attainment > oracle.classes[name].attainment + SAME_ATTAINMENT + EPSILON
        ]
        reason = "replica-hours over the oracle's: " + (", ".join(extra) or "none")
        if better:
            reason += f"; it attains more than the oracle on {', '.join(better)}"
        over = [t for t, hours in more.items() if hours >= 0.005]
        split = [_phases(t, phases[t]) for t in over if phases and t in phases]
        if split:
            reason += f"; by when (replicas asked per interval), {'; '.join(split)}"
            held = sum(phases[t][1] for t in over if phases and t in phases)
            if held >= 0.5 * sum(more[t] for t in over):
                reason += (
                    ": mostly after bursts, where what a burst bought is Ready (a model load "
                    "after it began, most often after it) and the scale-down delay holds it; "
                    "once bursts recur the reserve holds their peak between them"
                )
        if headroom_percent > 0 and over:
            reason += (
                f"; the pool's headroomPercent ({headroom_percent}) sizes gpufleet's fleet for "
                f"{1 + headroom_percent / 100:g}x the demand it expects, where the oracle "
                "sizes for the interval's demand and adds only what its replay misses"
            )
        spread = [_spread(t, fleet[t]) for t in over if len(fleet.get(t, {})) > 1]
        if spread:
            reason += (
                f"; the oracle's replicas per interval, {'; '.join(spread)}: it chooses each "
                "interval's fleet by replaying that interval's own arrivals, Ready at once, so "
                "it runs fewer wherever those arrivals happen to need fewer"
            )
    return Target("b", f"(b) $/Mtok <= {COST_OVER_ORACLE:g}x the oracle's", passed, detail, reason)


def _phases(tier: str, hours: tuple[float, float, float]) -> str:
    """'rtx4090 +0.40 h during bursts, +2.50 h in the 406 s after them, +0.35 h elsewhere'."""
    during, after, rest = hours
    return (
        f"{tier} {during:+.2f} h during bursts, {after:+.2f} h in the "
        f"{held_after_burst_seconds():.0f} s after them, {rest:+.2f} h elsewhere"
    )


def _spread(tier: str, counts: Mapping[int, int]) -> str:
    """'h100 median 1 (57% of intervals), from 1 to 6': the oracle's replica counts."""
    median = statistics.median_low(Counter(counts).elements())
    share = counts[median] / sum(counts.values())
    ordered = sorted(counts)
    return f"{tier} median {median} ({share:.0%} of intervals), from {ordered[0]} to {ordered[-1]}"


def _against_static(case: Case, ours: Summary, static: Summary, oracle: Summary | None) -> Target:
    ratio = ours.ratio_to(static)
    diffs = {
        name: c.attainment - static.classes[name].attainment
        for name, c in ours.classes.items()
        if name in static.classes
    }
    worse = {n: d for n, d in diffs.items() if d < -SAME_ATTAINMENT - EPSILON}
    better = {n: d for n, d in diffs.items() if d > SAME_ATTAINMENT + EPSILON}
    dear = ratio > COST_OVER_STATIC_FOR_BETTER + EPSILON
    passed = not worse and (ratio < 1.0 or (bool(better) and not dear))
    shown = ", ".join(f"{n} {_points(d)}" for n, d in diffs.items())
    detail = f"{ratio:.2f}x static-split's $/Mtok; attainment points against it: {shown}"
    reason = ""
    if not passed:
        if worse:
            reason = "attains less than static-split on " + ", ".join(
                f"{n} ({_points(d)} points)" for n, d in worse.items()
            )
            if ratio >= 1.0:
                reason += f", at {ratio:.2f}x its $/Mtok"
        elif better:
            reason = (
                f"attains more on {', '.join(better)} but costs {ratio:.3f}x static-split's "
                f"(> {COST_OVER_STATIC_FOR_BETTER:g}x)"
            )
        else:
            reason = f"the same service at {ratio:.2f}x static-split's $/Mtok"
        reason += _conflict(case, static, oracle)
    name = "(c) cheaper than static-split at equal or better attainment"
    return Target("c", name, passed, detail, reason)


def _conflict(case: Case, static: Summary, oracle: Summary | None) -> str:
    """'; (a) and (c) conflict here: ...' where static-split misses (a) itself and the
    oracle, the cheapest fleet found that meets it, costs more than (c) allows."""
    if oracle is None or oracle.ratio_to(static) <= COST_OVER_STATIC_FOR_BETTER + EPSILON:
        return ""
    below = {
        n: _reference(case, oracle, n) - c.attainment
        for n, c in static.classes.items()
        if n in oracle.classes
    }
    short = [
        f"{n} by {d * 100:.2f} points" for n, d in below.items() if d > ATTAINMENT_SLACK + EPSILON
    ]
    if not short:
        return ""
    return (
        f"; (a) and (c) conflict here: static-split itself misses (a), on "
        f"{', '.join(short)}, and the oracle, the cheapest fleet found that meets every "
        f"objective, costs {oracle.ratio_to(static):.2f}x static-split's "
        f"(> {COST_OVER_STATIC_FOR_BETTER:g}x)"
    )


def _cold_starts(ours: Summary, oracle: Summary) -> Target:
    cold = sum(ours.cold_starts.values())
    changes = sum(oracle.replicas_added.values())
    bar = COLD_STARTS_OVER_CHANGES * changes
    passed = cold <= bar
    detail = f"{cold} cold starts vs the oracle's {changes} replicas added (bar {bar:g})"
    reason = ""
    if not passed:
        by_tier = ", ".join(f"{t} {n}" for t, n in ours.cold_starts.items() if n)
        lost = sum(ours.preempted.values())
        added = sum(ours.replicas_added.values())
        reason = f"cold starts by tier: {by_tier}; gpufleet's decisions added {added} replicas"
        if lost:
            reason += f", and {lost} replicas lost with their nodes restarted cold"
    name = f"(d) cold starts <= {COLD_STARTS_OVER_CHANGES:g}x the oracle's fleet changes"
    return Target("d", name, passed, detail, reason)


# -- tables -----------------------------------------------------------------------------------


def class_names(cases: Sequence[Case]) -> list[str]:
    names: list[str] = []
    for case in cases:
        for s in case.summaries:
            names += [n for n in s.classes if n not in names]
    return names


def tier_names(cases: Sequence[Case]) -> list[str]:
    names: list[str] = []
    for case in cases:
        for s in case.summaries:
            names += [t for t in s.replica_hours if t not in names]
    return names


def results_rows(cases: Sequence[Case]) -> tuple[list[str], list[list[str]]]:
    """Per case its ceiling, then per policy: $/Mtok, attainment per class, starts, hours."""
    classes, tiers = class_names(cases), tier_names(cases)
    header = [
        "trace / assign",
        "policy",
        "$/Mtok",
        *(f"{n} %" for n in classes),
        "cold starts",
        "fleet changes",
        f"replica-hours ({' / '.join(tiers)})",
    ]
    rows: list[list[str]] = []
    for case in cases:
        ceiling = [f"{case.ceiling[n] * 100:.2f}" if n in case.ceiling else "-" for n in classes]
        rows.append([case.label, "ceiling", "", *ceiling, "", "", ""])
        for s in case.summaries:
            rows.append(
                [
                    "",
                    s.policy,
                    f"{s.cost_per_million_tokens:.4f}",
                    *(
                        f"{s.classes[n].attainment * 100:.2f}" if n in s.classes else "-"
                        for n in classes
                    ),
                    str(sum(s.cold_starts.values())),
                    str(sum(s.replicas_added.values())),
                    " / ".join(f"{s.replica_hours.get(t, 0.0):.2f}" for t in tiers),
                ]
            )
    return header, rows


def verdict_rows(
    cases: Sequence[Case],
) -> tuple[list[str], list[list[str]], list[tuple[Case, Target]]]:
    """PASS/MISS per case and target, and every MISS with its case."""
    keys: list[tuple[str, str]] = []
    verdicts = [(case, targets(case)) for case in cases]
    for _, found in verdicts:
        keys += [(t.key, t.column) for t in found if (t.key, t.column) not in keys]
    header = ["trace / assign", *(name for _, name in keys)]
    rows: list[list[str]] = []
    misses: list[tuple[Case, Target]] = []
    for case, found in verdicts:
        by_key = {t.key: t for t in found}
        rows.append([case.label, *(by_key[k].verdict if k in by_key else "-" for k, _ in keys)])
        misses += [(case, t) for t in found if not t.passed]
    return header, rows, misses


def passed_count(cases: Sequence[Case]) -> tuple[int, int]:
    found = [t for case in cases for t in targets(case)]
    return sum(t.passed for t in found), len(found)


def miss_line(case: Case, target: Target) -> str:
    line = f"**MISS** {case.label}, {target.name}: {target.detail}"
    return line + (f". Why: {target.reason}." if target.reason else ".")


def suite_markdown(cases: Sequence[Case]) -> str:
    """The results table, the verdicts table and every MISS with its reason."""
    from tools.benchmarks_md import markdown_table

    header, rows = results_rows(cases)
    v_header, v_rows, misses = verdict_rows(cases)
    passed, total = passed_count(cases)
    parts = [
        markdown_table(header, rows),
        f"gpufleet meets {passed} of {total} targets:",
        markdown_table(v_header, v_rows),
    ]
    if misses:
        parts.append("\n".join(f"- {miss_line(case, t)}" for case, t in misses))
    return "\n\n".join(parts)


def print_suite(cases: Sequence[Case]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)
    header, rows = results_rows(cases)
    table = Table(*header, title="The suite: policies per trace and class assignment (seed 0)")
    for row in rows:
        table.add_row(*row, style="dim" if row[1] == "ceiling" else None)
    console.print(table)
    v_header, v_rows, misses = verdict_rows(cases)
    passed, total = passed_count(cases)
    verdicts = Table(*v_header, title=f"gpufleet: {passed} of {total} targets met")
    for row in v_rows:
        verdicts.add_row(row[0], *(f"[{'green' if v == 'PASS' else 'red'}]{v}[/]" for v in row[1:]))
    console.print(verdicts)
    for case, t in misses:
        console.print(f"[red]MISS[/red] {case.label}, {t.name}: {t.detail}", highlight=False)
        if t.reason:
            console.print(f"  why: {t.reason}", highlight=False)


def with_gpufleet(case: Case, ours: Summary) -> Case:
    """The case with gpufleet's run replaced (the baselines and the oracle kept)."""
    summaries = [ours if s.policy == "gpufleet" else s for s in case.summaries]
    return replace(case, summaries=summaries)


def paired_rows(
    cases: Sequence[Case], others: Mapping[str, Case], labels: tuple[str, str]
) -> tuple[list[str], list[list[str]]]:
    """gpufleet per case in the suite and in another run of it (`labels`: the two, as the
    header names them): $/Mtok, attainment, cold starts, early passes, targets met."""
    names = class_names(cases)
    pair = " / ".join(labels)
    header = [
        "trace / assign",
        f"$/Mtok {pair}",
        *(f"{n} % {pair}" for n in names),
        f"cold starts {pair}",
        f"early passes {pair}",
        f"targets met {pair}",
    ]
    rows = []
    for case in cases:
        other = others.get(case.label)
        ours, theirs = case.policy("gpufleet"), other.policy("gpufleet") if other else None
        if ours is None or theirs is None or other is None:
            continue
        met = [sum(t.passed for t in targets(c)) for c in (case, other)]
        attained = [
            f"{100 * ours.classes[n].attainment:.2f} / {100 * theirs.classes[n].attainment:.2f}"
            if n in ours.classes and n in theirs.classes
            else ""
            for n in names
        ]
        rows.append(
            [
                case.label,
                f"{ours.cost_per_million_tokens:.4f} / {theirs.cost_per_million_tokens:.4f}",
                *attained,
                f"{sum(ours.cold_starts.values())} / {sum(theirs.cold_starts.values())}",
                f"{ours.early_passes} / {theirs.early_passes}",
                f"{met[0]} / {met[1]} of {len(targets(case))}",
            ]
        )
    return header, rows


def seed_rows(
    runs: Mapping[str, Sequence[tuple[Summary, Summary]]],
) -> tuple[list[str], list[list[str]]]:
    """Per trace, gpufleet's means over seeds with the queue watch and without it, and
    each seed's difference in batch attainment."""
    header = [
        "trace / assign",
        "seeds",
        "$/Mtok watch / none",
        "batch % watch / none",
        "cold starts watch / none",
        "early passes",
        "batch points, watch - none, per seed",
    ]
    rows = []
    for label, pairs in runs.items():
        if not pairs:
            continue
        rows.append(
            [
                label,
                str(len(pairs)),
                _means(pairs, lambda s: s.cost_per_million_tokens, 4),
                _means(pairs, _batch, 2),
                _means(pairs, lambda s: sum(s.cold_starts.values()), 1),
                f"{statistics.mean(w.early_passes for w, _ in pairs):.1f}",
                " ".join(f"{_batch(w) - _batch(n):+.2f}" for w, n in pairs),
            ]
        )
    return header, rows


def _batch(s: Summary) -> float:
    return 100 * s.classes["batch"].attainment


def _means(
    pairs: Sequence[tuple[Summary, Summary]], value: Callable[[Summary], float], digits: int
) -> str:
    """'a / b': the mean of `value` over the first of each pair, and over the second."""
    first, second = (statistics.mean(value(pair[i]) for pair in pairs) for i in (0, 1))
    return f"{first:.{digits}f} / {second:.{digits}f}"


def print_pairs(
    cases: Sequence[Case], others: Mapping[str, Case], labels: tuple[str, str], title: str
) -> None:
    print_rows(*paired_rows(cases, others, labels), title)


def print_rows(header: Sequence[str], rows: Sequence[Sequence[str]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 180)
    table = Table(*header, title=title)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def watch_by_seed(
    traces: Sequence[str], synthetic_seconds: float | None, *, progress: bool
) -> dict[str, list[tuple[Summary, Summary]]]:
    """gpufleet on each stepped trace (classes by size) and seed, with the queue watch and
    without it."""
    runs: dict[str, list[tuple[Summary, Summary]]] = {}
    for trace in (t for t in WATCH_TRACES if t in traces):
        pairs = runs[f"{trace} / size"] = []
        for seed in WATCH_SEEDS:
            watched, unwatched = (
                simulate(
                    command(
                        trace,
                        "size",
                        synthetic_seconds,
                        policies=("gpufleet",),
                        seed=seed,
                        queue_check=check,
                    ),
                    progress,
                ).summaries[0]
                for check in (None, 0.0)
            )
            pairs.append((watched, unwatched))
    return runs


# -- the section ------------------------------------------------------------------------------


def validation_markdown() -> tuple[str, int, int]:
    from gpufleet.sim.replay import compare, measured_runs

    lines = [
        "| run | P99 TTFT sim / measured (ms) | error | tokens/s sim / measured | error "
        "| in range |",
        "|---|---|---|---|---|---|",
    ]
    inside = passed = 0
    for run in measured_runs(IONET):
        c = compare(run)
        ok = -0.25 <= c.ttft_error <= 0.60 and abs(c.tokens_error) <= 0.30
        where = "yes" if c.below_saturation else "no (above saturation)"
        if c.below_saturation:
            inside += 1
            passed += ok
        name = f"{run.accelerator} {run.size_class} @ {run.rate_rps:g} req/s"
        lines.append(
            f"| {name} | {c.ttft_p99_seconds * 1000:.1f} / {run.ttft_p99_seconds * 1000:.1f} "
            f"| {c.ttft_error:+.0%} | {c.tokens_per_second:.0f} / {run.tokens_per_second:.0f} "
            f"| {c.tokens_error:+.0%} | {where} |"
        )
    return "\n".join(lines), inside, passed


def wall_by_policy(cases: Sequence[Case]) -> dict[str, float]:
    out: dict[str, float] = {}
    for case in cases:
        for s in case.summaries:
            out[s.policy] = out.get(s.policy, 0.0) + s.wall_seconds
    return out


def section(
    cases: Sequence[Case],
    descriptions: Mapping[str, str],
    wall: float,
    synthetic_seconds: float | None,
    slow: Mapping[str, Case],
    unwatched: Mapping[str, Case],
    seeded: Mapping[str, Sequence[tuple[Summary, Summary]]],
) -> str:
    from tools.benchmarks_md import markdown_table

    template = command("TRACE", "ASSIGN")
    template[template.index("--trace") + 1] = "TRACE"
    per_policy = ", ".join(f"{p} {w:.1f} s" for p, w in wall_by_policy(cases).items())
    sizes = ", ".join(
        f"{c.trace} {c.requests} requests over {c.duration_seconds:.0f} s"
        for c in cases
        if c.assign == ASSIGNS[0]
    ) or ", ".join(f"{c.trace} {c.requests} requests" for c in cases)
    validation, inside, passed = validation_markdown()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    policies = "\n".join(f"- `{name}`: {text}" for name, text in descriptions.items())
    changes = [
        sum(oracle.replicas_added.values())
        for oracle in (c.policy("oracle") for c in cases)
        if oracle is not None
    ]
    loose = (
        f"The oracle re-sizes its fleet every interval (Ready at once, gone at once), so its "
        f"fleet changes run from {min(changes)} to {max(changes)} per trace here, and (d) "
        "allows 1.5 cold starts for each. It also picks each interval's fleet by replaying that "
        "interval's own arrivals: a fleet that misses a few percent of a class's requests on "
        "average still meets the objective in the intervals whose arrivals happen to miss "
        "none (a 30 s interval holds a few dozen realtime requests here), so its fleet moves "
        "from interval to interval even on the constant trace, and on a tier where gpufleet "
        "runs more, a (b) MISS shows how."
        if changes
        else ""
    )
    synthetic = f"`--duration {synthetic_seconds:g}`" if synthetic_seconds is not None else "1 hour"
    return f"""{BEGIN}
## Simulator: the suite of traces, gpufleet against the baselines and the oracle

`make bench-sim` ({date}, {os.cpu_count()} CPUs, Python {platform.python_version()}) runs,
for each TRACE and ASSIGN,

    gpufleet {shlex.join(template)}

with TRACE the Azure conversation trace (`{_relative(TRACE)}`, `{AZURE}` below) and the
command's own synthetic loads `synthetic:KIND` for KIND in {", ".join(SYNTHETIC)} (Poisson
arrivals at a mean 5 req/s over {synthetic}, lognormal prompts of mean 1000 tokens and outputs of
200: constant; one sinusoidal day; 4x bursts of 60 s, about 6 an hour; a 5x flash crowd at
40% of the run decaying over 5 minutes), and ASSIGN `fraction` (30% realtime by seeded draw)
or `size` (the shortest 30% of prompts are realtime). Class mean lengths are set from each
trace (the command's default); decisions every 30 s, each on the metrics of the last 30 s
(Prometheus scraping the vLLM pods every {SCRAPE:g} s; see below for the chart's default of
{SLOW_SCRAPE:g} s), and for gpufleet sooner where the operator's queue watch would wake an
early pass (below); preemptible 4090 nodes up 2 h / away
10 min on average; prices of the example (io.net: H100 PCIe $2.00, RTX 4090 $0.25 per
GPU-hour). Every policy starts warm (its fleet for the demand of the trace's first model
load plus an interval is Ready at t=0). Sizes: {sizes}.

**Wall time: {wall:.1f} s for the suite** (per policy over all traces: {per_policy}).

Per trace and assignment: each class's ceiling (the share of its requests whose prompt,
on an idle replica of the fastest tier, prefills within the objective: no policy can attain
more; a prompt of the example's `--max-model-len` of 8,192 tokens or more, which vLLM
refuses, about 0.5% of these lognormal ones, counts as missed), then per policy $/Mtok, SLO
attainment per class, cold starts, fleet changes (the replicas its decisions added over the
run, summed over tiers) and replica-hours per tier.

{suite_markdown(cases)}

The targets (issue 15), checked for gpufleet on every trace:

{RULES}

{loose}

{HELD_AFTER_BURSTS}

{policies}

### The scrape interval

The operator reads every rate and P99 over a decision interval and at least four Prometheus
scrapes (`gpufleet.planning.observed.metrics_window_seconds`): with the chart's default
{SLOW_SCRAPE:g} s scrape (`prometheus.scrapeIntervalSeconds`) and a 30 s interval, that is the
last 60 s, so a step in demand shows at half its size at the first pass after it, and a
burst's last 30 s still count a pass after it ended. The simulator reads the same window
(`gpufleet simulate --scrape-interval`, default {SLOW_SCRAPE:g} like the operator's). The suite
above scrapes every {SCRAPE:g} s (a pass reads its last interval); gpufleet on the same traces
with a {SLOW_SCRAPE:g} s scrape, its targets checked against the same baselines and oracle:

{markdown_table(*paired_rows(cases, slow, SCRAPES))}

Where steps matter, scrape the vLLM pods every {SCRAPE:g} s or faster (a PodMonitor's
`interval`, and the chart's `prometheus.scrapeIntervalSeconds` to match).

### Early passes

Between passes the operator's queue watch reads every tier's queue and prompt tokens/s at
each scrape and wakes a pass at once on a surge (`gpufleet.queuewatch`; README, "How the
operator decides"); the pass after it comes an interval later. The simulator runs the same
watch on its simulated series (`gpufleet.sim.early`; `gpufleet simulate --queue-check`,
default the scrape interval, as the operator's `--queue-check-seconds`), for the gpufleet
policy only: the suite above includes its early passes. gpufleet on the same traces at a
{SCRAPE:g} s scrape with the watch and with it off (`--queue-check 0`), its targets checked
against the same baselines and oracle:

{markdown_table(*paired_rows(cases, unwatched, WATCH))}

One seed per trace shows chance as much as the watch. On the stepped traces, over seeds
{WATCH_SEEDS.start}-{WATCH_SEEDS.stop - 1} (classes by size), the means and each seed's
difference:

{markdown_table(*seed_rows(seeded))}

The oracle is the cost of a fleet that meets the SLO with perfect foresight (see
`OraclePolicy` in `operator/gpufleet/sim/oracle.py`): per interval, starting from the
planner's optimizer on that interval's actual demand and scaling a failing class's demand
up by 1.25 at a time, the first fleet whose replay of the interval in the simulator meets
every class's objective (misses no more than the requests whose prompts no fleet can serve
in time, plus 1% of the others), Ready at once and gone at once. "No fleet can serve in time"
is the ceiling's test: the prompt's TTFT on an idle replica of the fastest tier in the
simulator's engine. The planner's reach is shorter: it plans a P99 at load, whose zero-load
base holds the wait for a step in progress (on an H100 about 1,565 tokens of prompt within
100 ms, against 1,765 on an idle replica). A realtime prompt between the two is served in
time only when it finds a replica with nothing running; the oracle buys H100s for those
where its replay shows they pay, gpufleet does not. On constant / fraction (seed 0, measured
apart from this run), 2.8% of realtime's prompts lie between the two: gpufleet missed 1.19%
of realtime's requests there and the oracle 0.11%; below the planner's reach 0.70% and 0.09%.
Counted as a P99 planner counts misses, those prompts would set the fleet. Realtime alone on
a fixed count of H100s (the same trace and seed; realtime's requests missed below the
planner's reach / between the two reaches): 1: 2.80% / 1.77%, 2: 0.69% / 1.19%, 3: 0.31% /
0.79%, 4: 0.18% / 0.49%, 5: 0.07% / 0.22%, 6: 0.05% / 0.13%. The objective's 1% over both
takes 4 H100s, twice what gpufleet runs: its bill plus two H100-hours is about $0.42/Mtok, 1.45x
the oracle's, a (b) MISS for a (a) PASS; 3 H100s (84.83%) would pass (a) while missing 1.10% of
realtime's requests, over the objective's allowance. The oracle does better than any fixed
count (85.72% on 2.77 H100-hours) because it picks each interval's fleet by replaying that
interval's own arrivals: which intervals hold prompts in the band it knows, an online planner
does not. gpufleet plans the P99 of what it reaches at load; (a) on the `fraction` traces is
the price of not buying for prompts an idle replica alone serves in time.

### The simulator's engine against the raw io.net runs

Each single-GPU run of a built-in profile's model replayed through one simulated replica
(200 requests at the run's rate and mean lengths, median of 5 seeds), against its raw JSON
file (`tests/unit/sim/test_replica_vs_ionet.py`). Stated range: runs offered at most the
model's saturation rate; tolerance P99 TTFT +60% / -25%, tokens/s 30%.
{passed} of {inside} runs in range within tolerance.

{validation}
{END}"""


def write(text: str) -> None:
    from tools.benchmarks_md import write_section

    write_section("sim", text, BENCHMARKS)


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in TRACES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown trace(s) {', '.join(unknown) or '(none)'}; use {', '.join(TRACES)}"
        )
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--traces",
        type=_names,
        default=list(TRACES),
        help=f"comma-separated subset of {','.join(TRACES)} (default: all)",
    )
    parser.add_argument(
        "--synthetic-seconds",
        type=float,
        default=None,
        help="replay only this many seconds of each synthetic trace (default: the whole hour)",
    )
    args = parser.parse_args(argv)
    needed = [IONET, POOL] + ([TRACE] if AZURE in args.traces else [])
    for path in needed:
        if not path.exists():
            print(f"bench-sim: {path} is missing (shared data lives next to the repo)")
            return 2
    started = time.perf_counter()
    cases: list[Case] = []
    descriptions: dict[str, str] = {}
    first_seen: dict[str, str] = {}
    varies: set[str] = set()
    for trace in args.traces:
        for assign in ASSIGNS:
            case_started = time.perf_counter()
            outcome = simulate(
                command(trace, assign, args.synthetic_seconds), progress=not args.no_progress
            )
            cases.append(case_of(trace, assign, outcome, time.perf_counter() - case_started))
            for s in outcome.summaries:
                if s.policy not in descriptions:
                    descriptions[s.policy] = s.description
                    first_seen[s.policy] = cases[-1].label
                elif s.description != descriptions[s.policy] and s.policy not in varies:
                    varies.add(s.policy)
                    descriptions[s.policy] += f" (on {first_seen[s.policy]}; per trace)"
    wall = time.perf_counter() - started
    slow: dict[str, Case] = {}
    unwatched: dict[str, Case] = {}
    for case in cases:
        for variants, scrape, check in ((slow, SLOW_SCRAPE, None), (unwatched, SCRAPE, 0.0)):
            argv = command(
                case.trace,
                case.assign,
                args.synthetic_seconds,
                policies=("gpufleet",),
                scrape=scrape,
                queue_check=check,
            )
            ours = simulate(argv, progress=not args.no_progress).summaries[0]
            variants[case.label] = with_gpufleet(case, ours)
    seeded = watch_by_seed(args.traces, args.synthetic_seconds, progress=not args.no_progress)
    print_suite(cases)
    print_pairs(
        cases, slow, SCRAPES, f"gpufleet with a {SCRAPE:g} s and a {SLOW_SCRAPE:g} s scrape"
    )
    print_pairs(
        cases, unwatched, WATCH, f"gpufleet at a {SCRAPE:g} s scrape with and without early passes"
    )
    print_rows(*seed_rows(seeded), "gpufleet over seeds, with and without early passes")
    print(
        f"Suite simulated in {wall:.1f} s (and gpufleet at a {SLOW_SCRAPE:g} s scrape, and "
        "without early passes, after)"
    )
    if not args.no_write:
        write(section(cases, descriptions, wall, args.synthetic_seconds, slow, unwatched, seeded))
        print(f"Wrote the simulator section of {_relative(BENCHMARKS)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
