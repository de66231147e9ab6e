"""Pool shapes benchmark: gpufleet against static-split and the oracle beyond the example pool.

The simulator suite (`make bench-sim`) runs one pool, examples/llama3-8b-mixed.yaml. A
team's pool may have one tier, three, or other objectives, and the planner has failed on
shapes the suite never ran (one tier serving a class kept from another's prompts planned
that class at 0%). This runs `gpufleet simulate` (the command's own code path) on the
command's synthetic bursts trace, `--assign fraction` and `--assign size`, policies
gpufleet, static-split and oracle, for pools written from the example (into a temporary
directory) with one change each:

- `rtx4090 only`: the h100 tier removed (no RTX 4090 holds realtime's 100 ms for prompts of
  a thousand tokens: realtime is planned best effort);
- `h100 only`: the rtx4090 tier removed;
- `three tiers`: an L40S tier added (1 to 8 replicas, $0.80 per GPU-hour);
- `loose objectives`: realtime 300 ms, batch 30 s.

Prints one table and rewrites the pools section of BENCHMARKS.md (between its markers).
Run with `make bench-pools`.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from gpufleet.sim.report import Summary

ROOT = Path(__file__).resolve().parent.parent
POOL = ROOT / "examples" / "llama3-8b-mixed.yaml"
BENCHMARKS = ROOT / "BENCHMARKS.md"
SECTION = "pools"  # tools.benchmarks_md.markers(SECTION)

TRACE = "synthetic:bursts"
ASSIGNS = ("fraction", "size")
POLICIES = ("gpufleet", "static-split", "oracle")
REALTIME_FRACTION = 0.3
L40S = {
    "name": "l40s",
    "accelerator": "L40S",
    "gpusPerReplica": 1,
    "nodeSelector": {"gpufleet.dev/accelerator": "l40s"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "minReplicas": 1,
    "maxReplicas": 8,
    "pricePerGPUHour": "0.80",
}

Change = Callable[[dict[str, Any]], None]


def _only(tier: str) -> Change:
    def change(spec: dict[str, Any]) -> None:
        spec["tiers"] = [t for t in spec["tiers"] if t["name"] == tier]

    return change


def _add_l40s(spec: dict[str, Any]) -> None:
    spec["tiers"].append(copy.deepcopy(L40S))


def _loose(spec: dict[str, Any]) -> None:
    objectives = {"realtime": 300, "batch": 30000}
    for cls in spec["trafficClasses"]:
        cls["ttftP99Milliseconds"] = objectives[cls["name"]]


SHAPES: tuple[tuple[str, Change], ...] = (
    ("rtx4090 only", _only("rtx4090")),
    ("h100 only", _only("h100")),
    ("three tiers", _add_l40s),
    ("loose objectives", _loose),
)


def pool_body(change: Change, source: Path = POOL) -> dict[str, Any]:
    """The example pool with one change to its spec."""
    body: dict[str, Any] = copy.deepcopy(yaml.safe_load(source.read_text()))
    change(body["spec"])
    return body


def command(pool: str, assign: str) -> list[str]:
    return [
        "simulate",
        "-f", pool,
        "--trace", TRACE,
        "--policy", ",".join(POLICIES),
        "--realtime-fraction", f"{REALTIME_FRACTION:g}",
        "--seed", "0",
        "--assign", assign,
        "--scrape-interval", "5",  # as make bench-sim: a pass reads its last interval
    ]  # fmt: skip


def simulate(argv: list[str]) -> Any:
    from gpufleet.cli import build_parser
    from gpufleet.commands.simulate import run

    args = build_parser(["simulate"]).parse_args([*argv, "--no-progress"])
    return run(args)


@dataclass(frozen=True)
class Case:
    """One pool shape and assignment: every policy's summary, and the classes' ceilings."""

    shape: str
    assign: str
    summaries: Mapping[str, Summary]
    ceiling: Mapping[str, float]

    @property
    def gpufleet(self) -> Summary:
        return self.summaries["gpufleet"]

    @property
    def oracle(self) -> Summary:
        return self.summaries["oracle"]


def table_rows(cases: Sequence[Case]) -> tuple[list[str], list[list[str]]]:
    header = [
        "pool / assign",
        "policy",
        "$/Mtok",
        "realtime %",
        "batch %",
        "cold starts",
        "replica-hours",
    ]
    rows: list[list[str]] = []
    for case in cases:
        rows.append(
            [
                f"{case.shape} / {case.assign}",
                "ceiling",
                "",
                *(_percent(case.ceiling.get(c)) for c in ("realtime", "batch")),
                "",
                "",
            ]
        )
        for name in POLICIES:
            s = case.summaries[name]
            hours = " / ".join(f"{t} {h:.2f}" for t, h in s.replica_hours.items())
            rows.append(
                [
                    "",
                    name,
                    f"{s.cost_per_million_tokens:.4f}",
                    *(_percent(_attained(s, c)) for c in ("realtime", "batch")),
                    str(sum(s.cold_starts.values())),
                    hours,
                ]
            )
    return header, rows


def _attained(summary: Summary, name: str) -> float | None:
    found = summary.classes.get(name)
    return found.attainment if found is not None else None


def _percent(share: float | None) -> str:
    return "" if share is None else f"{share * 100:.2f}"


def findings(cases: Sequence[Case]) -> list[str]:
    """Per case, gpufleet against the oracle: the cost ratio and attainment points."""
    said = []
    for case in cases:
        g, o = case.gpufleet, case.oracle
        points = ", ".join(
            f"{n} {(g.classes[n].attainment - o.classes[n].attainment) * 100:+.2f} points"
            for n in g.classes
        )
        said.append(
            f"- {case.shape} / {case.assign}: gpufleet {g.ratio_to(o):.2f}x the oracle's "
            f"$/Mtok; attainment against the oracle's: {points}."
        )
    return said


def section(cases: Sequence[Case], wall: float) -> str:
    from tools.benchmarks_md import markdown_table

    header, rows = table_rows(cases)
    template = command("POOL", "ASSIGN")
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    shapes = "; ".join(f"`{name}`" for name, _ in SHAPES)
    said = "\n".join(findings(cases))
    return f"""## Pool shapes beyond the example

`make bench-pools` ({date}, {os.cpu_count()} CPUs, Python {platform.python_version()})
runs, for ASSIGN in {", ".join(ASSIGNS)} and POOL the example pool
(`{os.path.relpath(POOL, ROOT)}`) with one change each ({shapes}: see
`tools/bench_pools.py`),

    gpufleet {shlex.join(template)}

Per pool and assignment: each class's ceiling (the share of its requests an idle replica
of the fastest tier serves in time), then per policy $/Mtok, SLO attainment per class,
cold starts and replica-hours per tier. The targets of the suite are not applied here; the
oracle is the reference. **Wall time: {wall:.1f} s.**

{markdown_table(header, rows)}

{said}

The ceiling is the simulator's engine on an idle replica; the planner plans a P99 at load,
whose zero-load base holds a wait for the step in progress. Within 100 ms an RTX 4090
prefills about 292 tokens by the planner and 350 on an idle replica (an H100 1,565 and
1,765). A realtime prompt between the two meets its objective only on a replica with nothing
running: the oracle buys replicas for those where its replay shows they pay (on `rtx4090
only / size`, where realtime is the shortest 30% of prompts, up to about 360 tokens, a
fifth of them lie there), gpufleet does not plan for them.

Class demand is inferred from the tiers' token rates with the weights the rates' window was
routed with (`planning.observed.window_weights`). Before that, a pass right after a weight
change read the tokens still flowing the old way as the moved class's own: on `three tiers
/ size` (seeds 0-2, measured apart from this run) realtime's inferred demand was 1.11x its
true demand on average (median 1.00, the spikes after changes), and now 1.03x. gpufleet
there costs 6-31% less, with 17-24 cold starts instead of 23-31, and attains 1.0-2.0
points less on realtime (97.1-98.9%): the spikes had bought capacity its 100 ms objective
turned out to need on this pool; the planner's realtime sizing is what is tight there."""


def write(text: str) -> None:
    from tools.benchmarks_md import write_section

    write_section(SECTION, text, BENCHMARKS)


def print_table(cases: Sequence[Case]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)
    header, rows = table_rows(cases)
    table = Table(*header, title=f"Pool shapes: {TRACE}, gpufleet against the oracle")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in findings(cases):
        console.print(line, highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="bench-pools-") as folder:
        for index, (shape, change) in enumerate(SHAPES):
            path = Path(folder) / f"pool-{index}.yaml"
            path.write_text(yaml.safe_dump(pool_body(change), sort_keys=False))
            for assign in ASSIGNS:
                argv_ = command(str(path), assign)
                print(f"{shape}: gpufleet {shlex.join(argv_)}", file=sys.stderr)
                outcome = simulate(argv_)
                summaries = {s.policy: s for s in outcome.summaries}
                ceiling = dict(outcome.meta.get("attainmentCeiling") or {})
                cases.append(Case(shape, assign, summaries, ceiling))
    wall = time.perf_counter() - started
    print_table(cases)
    print(f"Simulated in {wall:.1f} s")
    if not args.no_write:
        write(section(cases, wall))
        print(f"Wrote the pools section of {os.path.relpath(BENCHMARKS, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
