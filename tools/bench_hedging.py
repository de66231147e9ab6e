"""Hedging benchmark: gpufleet with and without `hedgePreemptible` on a preemptible 4090 tier.

Runs `gpufleet simulate` (the command's own code path), policy gpufleet, with
examples/llama3-8b-mixed.yaml (its rtx4090 tier is preemptible) on the Azure conversation
trace (../shared/data/traces/azure-llm-inference-2023-conv.csv), 30% realtime, once with
`spec.scaling.hedgePreemptible: true` and once with `false` (both pool files written from
the example into a temporary directory, nothing else changed), on the same seeds: the same
trace, class draws, routing draws and node losses per slot. The 4090 nodes go away far
more often than the simulator's default of 2 hours up (`--mean-up-minutes`, default 30
and 5: a mild and a harsh rate, away 5 minutes), so one hour of trace holds enough losses
for the loss rate the planner learns to matter. Prints one table, hedged and unhedged side
by side per rate, summed over the seeds (attainment over every request of every seed):
SLO attainment per class, cut requests by cause, requests dropped, replicas preempted,
cold starts, cost ($ and $/Mtok) and replica-hours; then rewrites the hedging section of
BENCHMARKS.md (between its markers). Run with `make bench-hedging`.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from gpufleet.commands.simulate import Outcome
    from gpufleet.sim.metrics import CutCause
    from gpufleet.sim.report import Summary

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "traces" / "azure-llm-inference-2023-conv.csv"
POOL = ROOT / "examples" / "llama3-8b-mixed.yaml"
BENCHMARKS = ROOT / "BENCHMARKS.md"
SECTION = "hedging"  # tools.benchmarks_md.markers(SECTION)

VARIANTS: tuple[tuple[str, bool], ...] = (("hedged", True), ("unhedged", False))
SEEDS = (0, 1, 2, 3, 4)
# Mean minutes a 4090 node stays up, one pair of columns each: a mild rate and a harsh one.
MEAN_UP_MINUTES = (30.0, 5.0)
OUTAGE_MINUTES = 5.0
REALTIME_FRACTION = 0.3


def _relative(path: Path) -> str:
    return os.path.relpath(path, ROOT)


def pool_body(hedge: bool, source: Path = POOL) -> dict[str, Any]:
    """The example pool with `spec.scaling.hedgePreemptible` set, everything else as is."""
    body: dict[str, Any] = yaml.safe_load(source.read_text())
    body = copy.deepcopy(body)
    body["spec"].setdefault("scaling", {})["hedgePreemptible"] = hedge
    return body


@dataclass(frozen=True)
class Setting:
    """What every run shares: seeds, how long a lost node stays away, how much trace."""

    seeds: Sequence[int] = SEEDS
    outage_minutes: float = OUTAGE_MINUTES
    duration: float | None = None  # seconds of trace replayed; None: all of it

    @property
    def part(self) -> str:
        if self.duration is None:
            return "the whole trace"
        return f"the first {self.duration:g} s of the trace (a slice)"


def command(pool: str, seed: int, mean_up_minutes: float, setting: Setting) -> list[str]:
    duration = setting.duration
    extra = ["--duration", f"{duration:g}"] if duration is not None else []
    return [
        "simulate",
        "-f", pool,
        "--trace", _relative(TRACE),
        "--policy", "gpufleet",
        "--realtime-fraction", f"{REALTIME_FRACTION:g}",
        "--seed", str(seed),
        "--preemption-mean-hours", f"{mean_up_minutes / 60:.6g}",
        "--preemption-outage-minutes", f"{setting.outage_minutes:g}",
        "--scrape-interval", "5",  # as make bench-sim: a pass reads its last interval
        *extra,
    ]  # fmt: skip


def simulate(argv: list[str]) -> Outcome:
    from gpufleet.cli import build_parser
    from gpufleet.commands.simulate import run

    args = build_parser(["simulate"]).parse_args([*argv, "--no-progress"])
    return run(args)


def drain_of(body: Mapping[str, Any], outcome: Outcome) -> int:
    """The drain time the run used: the pool's, its classes' lengths as simulated."""
    from gpufleet.api.parse import parse_pool
    from gpufleet.desired.drain import drain_seconds

    pool = parse_pool(dict(body))
    return drain_seconds(pool.model_copy(update={"spec": outcome.spec}))


# -- one variant over every seed ------------------------------------------------------------


@dataclass(frozen=True)
class Totals:
    """One variant's runs at one loss rate, summed over the seeds."""

    name: str  # hedged or unhedged
    mean_up_minutes: float
    runs: Sequence[Summary]

    @property
    def label(self) -> str:
        return f"{self.name}, up {self.mean_up_minutes:g} min"

    def attainment(self, name: str) -> float:
        """The share of the class's requests, over every seed, within its objective."""
        requests = sum(s.classes[name].requests for s in self.runs)
        met = sum(s.classes[name].attainment * s.classes[name].requests for s in self.runs)
        return met / requests if requests else float("nan")

    def cut(self, cause: CutCause) -> int:
        return sum(s.cut_by_cause.get(cause, 0) for s in self.runs)

    def cut_per_seed(self, cause: CutCause) -> list[int]:
        return [s.cut_by_cause.get(cause, 0) for s in self.runs]

    @property
    def dropped(self) -> int:
        return sum(s.dropped for s in self.runs)

    @property
    def preempted(self) -> int:
        return sum(sum(s.preempted.values()) for s in self.runs)

    @property
    def cold_starts(self) -> int:
        return sum(sum(s.cold_starts.values()) for s in self.runs)

    @property
    def dollars(self) -> float:
        return sum(s.cost_dollars for s in self.runs)

    @property
    def per_million_tokens(self) -> float:
        tokens = sum(s.tokens_served for s in self.runs)
        return self.dollars / tokens * 1e6 if tokens else float("inf")

    def replica_hours(self, tier: str) -> float:
        return sum(s.replica_hours.get(tier, 0.0) for s in self.runs)


def table_rows(totals: Sequence[Totals]) -> tuple[list[str], list[list[str]]]:
    """The variants side by side, one column each."""
    from gpufleet.sim.metrics import CUT_CAUSES, CutCause

    first = totals[0].runs[0]
    header = ["gpufleet, summed over the seeds", *(t.label for t in totals)]
    rows: list[list[str]] = []
    for name, c in first.classes.items():
        rows.append(
            [
                f"{name} SLO attainment % (obj {c.objective_seconds * 1000:.0f} ms)",
                *(f"{t.attainment(name) * 100:.2f}" for t in totals),
            ]
        )
    for cause in CUT_CAUSES:
        rows.append([f"requests cut: {cause.label}", *(str(t.cut(cause)) for t in totals)])
        rows.append(
            [
                f"  per seed ({cause.label})",
                *(" ".join(str(n) for n in t.cut_per_seed(cause)) for t in totals),
            ]
        )
    rows += [
        ["requests dropped (no Ready replica)", *(str(t.dropped) for t in totals)],
        ["replicas preempted", *(str(t.preempted) for t in totals)],
        [
            "requests cut by lost nodes per replica preempted",
            *(
                f"{t.cut(CutCause.NODE_LOST) / t.preempted:.1f}" if t.preempted else "-"
                for t in totals
            ),
        ],
        ["cold starts", *(str(t.cold_starts) for t in totals)],
        ["$ total", *(f"{t.dollars:.2f}" for t in totals)],
        ["$/Mtok", *(f"{t.per_million_tokens:.4f}" for t in totals)],
    ]
    for tier in first.replica_hours:
        rows.append([f"{tier} replica-hours", *(f"{t.replica_hours(tier):.2f}" for t in totals)])
    return header, rows


def findings(totals: Sequence[Totals]) -> list[str]:
    """What the numbers say, hedged against unhedged at each loss rate."""
    from gpufleet.sim.metrics import CutCause

    lost = CutCause.NODE_LOST
    said = []
    for hedged in (t for t in totals if t.name == VARIANTS[0][0]):
        unhedged = next(
            (
                t
                for t in totals
                if t.name == VARIANTS[1][0] and t.mean_up_minutes == hedged.mean_up_minutes
            ),
            None,
        )
        if unhedged is None:
            continue
        first = hedged.runs[0]
        points = ", ".join(
            f"{n} {(hedged.attainment(n) - unhedged.attainment(n)) * 100:+.2f} points"
            for n in first.classes
        )
        hours = ", ".join(
            f"{t} {hedged.replica_hours(t) - unhedged.replica_hours(t):+.2f} replica-hours"
            for t in first.replica_hours
        )
        said.append(
            f"Nodes up {hedged.mean_up_minutes:g} min, hedged against unhedged: attainment "
            f"{points}; {hedged.cut(lost)} vs {unhedged.cut(lost)} requests cut by lost nodes; "
            f"{hedged.dropped} vs {unhedged.dropped} dropped; {hedged.preempted} vs "
            f"{unhedged.preempted} replicas preempted; ${hedged.dollars:.2f} vs "
            f"${unhedged.dollars:.2f} ({hedged.per_million_tokens:.4f} vs "
            f"{unhedged.per_million_tokens:.4f} $/Mtok; {hours})."
        )
    return said


CAVEAT = (
    "The margin is capacity bought before a loss: while a lost replica's replacement loads "
    "the model (a lead time), the margin replica is already serving, so the tier queues and "
    "overflows less after a loss. It does nothing at the moment of a loss: the requests "
    "decoding on the node that goes are cut whatever the margin. The count of requests cut "
    "by lost nodes moves only because hedging changes how many replicas are exposed and how "
    "many requests each one holds (more replicas, fewer in flight on each), not because a "
    "cut is avoided; only a notice (`--preemption-notice-seconds`) lets a replica finish "
    "what it holds before its node goes."
)


def section(
    totals: Sequence[Totals], setting: Setting, meta: Mapping[str, Any], wall: float
) -> str:
    from tools.benchmarks_md import markdown_table

    header, rows = table_rows(totals)
    template = command("POOL", 0, 60.0, setting)
    template[template.index("--seed") + 1] = "SEED"
    template[template.index("--preemption-mean-hours") + 1] = "HOURS"
    rates = sorted({t.mean_up_minutes for t in totals}, reverse=True)
    hours = ", ".join(f"{r / 60:.6g}" for r in rates)
    minutes = ", ".join(f"{r:g}" for r in rates)
    seeds = ", ".join(str(s) for s in setting.seeds)
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    said = "\n\n".join(findings(totals))
    return f"""## Hedging preemptible tiers

`make bench-hedging` ({date}, {os.cpu_count()} CPUs, Python {platform.python_version()})
runs, for POOL `{_relative(POOL)}` with `spec.scaling.hedgePreemptible` set to true
(hedged) or false (unhedged), SEED in {seeds} and HOURS in {hours},

    gpufleet {shlex.join(template)}

on {setting.part} ({meta["requests"]} requests over {meta["durationSeconds"]:.0f} s per
seed). The rtx4090 tier is preemptible: its nodes stay up {minutes} minutes on average
(HOURS) and away {setting.outage_minutes:g} minutes, far more often than the simulator's
default of 2 hours up, so that one hour of trace holds enough losses for the rate the
planner learns to outweigh its prior; the h100 tier is not preemptible. Both variants see
the same node losses per slot for a seed. Scale-downs drain for the pool's drain time
(derived: {meta["drainSeconds"]} s). Attainment is over every request of every seed.
**Wall time: {wall:.1f} s.**

{markdown_table(header, rows)}

{said}

{CAVEAT}"""


def write(text: str) -> None:
    from tools.benchmarks_md import write_section

    write_section(SECTION, text, BENCHMARKS)


def print_table(totals: Sequence[Totals], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)
    header, rows = table_rows(totals)
    table = Table(*header, title=title)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in findings(totals):
        console.print(line, highlight=False)


def _minutes(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected minutes, e.g. 30,5") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive minutes, e.g. 30,5")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--seeds", type=int, default=len(SEEDS), help=f"seeds 0..N-1 (default {len(SEEDS)})"
    )
    parser.add_argument(
        "--mean-up-minutes",
        type=_minutes,
        default=MEAN_UP_MINUTES,
        help="mean minutes a 4090 node stays up, comma-separated, one pair of columns each "
        f"(default {','.join(f'{m:g}' for m in MEAN_UP_MINUTES)})",
    )
    parser.add_argument(
        "--outage-minutes",
        type=float,
        default=OUTAGE_MINUTES,
        help=f"mean minutes a lost 4090 node stays away ({OUTAGE_MINUTES:g})",
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="replay only the trace's first S seconds"
    )
    args = parser.parse_args(argv)
    for path in (TRACE, POOL):
        if not path.exists():
            print(f"bench-hedging: {path} is missing (shared data lives next to the repo)")
            return 2
    setting = Setting(
        seeds=tuple(range(args.seeds)), outage_minutes=args.outage_minutes, duration=args.duration
    )
    started = time.perf_counter()
    totals: list[Totals] = []
    meta: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hedging-") as folder:
        for up in args.mean_up_minutes:
            for name, hedge in VARIANTS:
                body = pool_body(hedge)
                path = Path(folder) / f"{name}.yaml"
                path.write_text(yaml.safe_dump(body, sort_keys=False))
                runs = []
                for seed in setting.seeds:
                    argv_ = command(str(path), seed, up, setting)
                    print(f"gpufleet {shlex.join(argv_)}", file=sys.stderr)
                    outcome = simulate(argv_)
                    runs.extend(outcome.summaries)
                    if not meta:
                        meta = {**outcome.meta, "drainSeconds": drain_of(body, outcome)}
                totals.append(Totals(name, up, runs))
    wall = time.perf_counter() - started
    print_table(
        totals,
        f"Hedging the preemptible rtx4090 tier: {_relative(TRACE)}, {setting.part}, seeds "
        f"{setting.seeds[0]}..{setting.seeds[-1]}, lost 4090 nodes away "
        f"{setting.outage_minutes:g} min on average",
    )
    print(f"Simulated in {wall:.1f} s")
    if not args.no_write:
        write(section(totals, setting, meta, wall))
        print(f"Wrote the hedging section of {_relative(BENCHMARKS)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
