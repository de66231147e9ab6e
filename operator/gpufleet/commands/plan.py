"""`gpufleet plan`: what the operator would run for a demand, with no cluster.

    gpufleet plan -f pool.yaml --demand realtime=2000,batch=30000 [--output table|json]
    gpufleet plan -f pool.yaml --demand realtime=2000 --demand batch=30000

Demand is tokens per second (prompt plus generated) per traffic class; classes left out
have none. The planner is the operator's own, on a fleet with nothing running yet.
Exit status: 0, or 2 for an invalid pool file or option (the message names the field).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufleet.api.parse import InvalidPool
from gpufleet.api.status import InferencePoolStatus
from gpufleet.api.types import InferencePool
from gpufleet.commands.common import UsageError, load_pool
from gpufleet.planning import conditions
from gpufleet.planning.demand import split_demand
from gpufleet.planning.planner import plan
from gpufleet.planning.profiles import ProfileNotFound, pool_model
from gpufleet.planning.records import (
    MetricsState,
    Observation,
    Plan,
    TierObservation,
    Verdict,
)

# A what-if decides nothing over time: any fixed instant will do.
WHAT_IF_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="print the plan for a demand: replicas, weights, P99, cost, energy",
        description="Print what gpufleet would run for a pool at a given demand: replicas "
        "per tier, weights per class, predicted P99 TTFT against each objective, $/hour, "
        "$/Mtok, energy and carbon. No cluster needed.",
    )
    parser.add_argument("-f", "--filename", type=Path, required=True, help="InferencePool YAML")
    parser.add_argument(
        "--demand",
        action="append",
        default=[],
        help="tokens/s per class, e.g. realtime=2000,batch=30000 or the flag once per "
        "class (classes left out: 0)",
    )
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        pool = load_pool(args.filename)
        demand = parse_demand(",".join(args.demand), [c.name for c in pool.spec.traffic_classes])
    except InvalidPool as invalid:
        print(f"error: {args.filename}: {invalid}", file=sys.stderr)
        return 2
    except (UsageError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = what_if(pool, demand)
    if args.output == "json":
        print(json.dumps(to_json(pool, demand, result), indent=2))
    else:
        print_table(pool, demand, result)
    return 0


def parse_demand(text: str, classes: list[str]) -> dict[str, float]:
    """`realtime=2000,batch=30000` -> {class: tokens/s}, every class present."""
    demand = dict.fromkeys(classes, 0.0)
    given: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--demand {item}: expected CLASS=TOKENS_PER_SECOND")
        if name in given:
            raise UsageError(f"--demand {item}: class {name!r} is given twice; give it once")
        given.add(name)
        if name not in demand:
            raise UsageError(
                f"--demand {item}: the pool has no traffic class {name!r} "
                f"(it has {', '.join(classes)})"
            )
        try:
            tokens = float(value)
        except ValueError:
            raise UsageError(f"--demand {item}: {value!r} is not a number") from None
        if tokens < 0 or tokens != tokens or tokens == float("inf"):
            raise UsageError(f"--demand {item}: tokens/s must be a finite number >= 0")
        demand[name] = tokens
    return demand


def what_if(pool: InferencePool, demand: dict[str, float]) -> Plan:
    """The plan for `demand` on a fleet with nothing running yet."""
    spec = pool.spec
    classes = {c.name: c for c in spec.traffic_classes}
    observation = Observation(
        now=WHAT_IF_TIME,
        tiers={t.name: TierObservation(name=t.name) for t in spec.tiers},
        metrics=MetricsState.AVAILABLE,
        metrics_message="What-if: demand given on the command line",
        demand={name: split_demand(classes[name], tokens) for name, tokens in demand.items()},
    )
    return plan(spec, observation, InferencePoolStatus())


def _verdict(verdict: Verdict) -> dict[str, Any]:
    return {"status": verdict.status, "reason": str(verdict.reason), "message": verdict.message}


def _profile(pool: InferencePool, tier_name: str) -> str:
    tier = next(t for t in pool.spec.tiers if t.name == tier_name)
    try:
        model = pool_model(tier, pool.spec)
    except ProfileNotFound:
        return "none"
    # An engine fit is named as one ("RTX4090/engine/x1"); "derived": a measured row moved.
    engine = "/engine/" in model.name
    return model.name + ("" if model.measured or engine else " (derived)")


def to_json(pool: InferencePool, demand: dict[str, float], result: Plan) -> dict[str, Any]:
    spec = pool.spec
    # A what-if has no cluster: nothing observed, nothing unschedulable.
    observation = Observation(now=WHAT_IF_TIME, tiers={}, metrics=MetricsState.AVAILABLE)
    return {
        "pool": f"{pool.metadata.namespace}/{pool.metadata.name}",
        "model": spec.model.name,
        "tiers": [
            {
                "name": t.name,
                "accelerator": t.accelerator.value,
                "gpusPerReplica": t.gpus_per_replica,
                "replicas": result.tiers[t.name].replicas,
                "costPerHour": t.price_per_replica_hour * result.tiers[t.name].replicas,
                "reserveReplicas": result.tiers[t.name].reserve_replicas,
                "marginReplicas": result.tiers[t.name].margin_replicas,
                "tailReplicas": result.tiers[t.name].tail_replicas,
                "leadTimeSeconds": result.tiers[t.name].lead_time_seconds,
                "profile": _profile(pool, t.name),
                "profileSource": result.tiers[t.name].profile,
                "profileMeasured": result.tiers[t.name].profile_measured,
            }
            for t in spec.tiers
        ],
        "classes": [
            {
                "name": c.name,
                "demandTokensPerSecond": demand[c.name],
                "weights": {t: w for t, w in result.classes[c.name].weights.items() if w},
                "predictedTtftP99Milliseconds": _ms(
                    result.classes[c.name].predicted_ttft_p99_seconds
                ),
                "objectiveTtftP99Milliseconds": c.ttft_p99_objective_milliseconds,
                "servedFraction": result.classes[c.name].served_fraction,
            }
            for c in spec.traffic_classes
        ],
        "costPerHour": result.cost_per_hour,
        "reserveCostPerHour": result.reserve_cost_per_hour,
        "marginCostPerHour": result.margin_cost_per_hour,
        "costPerMillionTokens": result.cost_per_million_tokens,
        "energyKwhPerMillionTokens": result.energy_kwh_per_million_tokens,
        "carbonGramsPerMillionTokens": result.carbon_grams_per_million_tokens,
        "reason": str(result.reason),
        "message": result.message,
        "objectivesMet": _verdict(conditions.objectives(spec, observation, result)),
        "degraded": _verdict(conditions.degraded(spec, observation, result)),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def print_table(pool: InferencePool, demand: dict[str, float], result: Plan) -> None:
    from rich.console import Console
    from rich.table import Table

    data = to_json(pool, demand, result)
    # Into a file or a pipe: wide lines, not columns cut to "accel…" at 80 characters.
    console = Console(width=None if sys.stdout.isatty() else 160)
    tiers = Table(title=f"Plan for {data['pool']} ({data['model']})", title_justify="left")
    numbers = ("GPUs", "replicas", "reserve", "margin", "lead time", "$/hour")
    for column in ("tier", "accelerator", *numbers, "profile"):
        tiers.add_column(column, justify="right" if column in numbers else "left")
    for t in data["tiers"]:
        tiers.add_row(
            t["name"],
            t["accelerator"],
            str(t["gpusPerReplica"]),
            str(t["replicas"]),
            str(t["reserveReplicas"]),
            str(t["marginReplicas"]),
            "-" if t["leadTimeSeconds"] is None else f"{t['leadTimeSeconds']:.0f} s",
            f"{t['costPerHour']:.2f}",
            t["profile"],
        )
    console.print(tiers)
    classes = Table()
    for column in ("class", "demand tok/s", "weights", "predicted P99", "objective", "served"):
        classes.add_column(column, justify="left" if column in ("class", "weights") else "right")
    for c in data["classes"]:
        predicted = c["predictedTtftP99Milliseconds"]
        objective = c["objectiveTtftP99Milliseconds"]
        shown = "-" if predicted is None else f"{predicted:.0f} ms"
        if predicted is not None and predicted > objective:
            shown = f"[red]{shown}[/red]"
        classes.add_row(
            c["name"],
            f"{c['demandTokensPerSecond']:.0f}",
            " ".join(f"{t}={w}" for t, w in c["weights"].items()) or "-",
            shown,
            f"{objective} ms",
            f"{c['servedFraction']:.0%}",
        )
    console.print(classes)
    per_million = data["costPerMillionTokens"]
    energy = data["energyKwhPerMillionTokens"]
    carbon = data["carbonGramsPerMillionTokens"]
    console.print(
        f"$/hour {data['costPerHour']:.2f} (burst reserve {data['reserveCostPerHour']:.2f}, "
        f"loss margin {data['marginCostPerHour']:.2f})   "
        f"$/Mtok {'-' if per_million is None else f'{per_million:.4f}'}   "
        f"energy {'-' if energy is None else f'{energy:.3f} kWh/Mtok'}   "
        f"carbon {'-' if carbon is None else f'{carbon:.0f} gCO2e/Mtok'}",
        highlight=False,
    )
    objectives = data["objectivesMet"]
    mark = {True: "[green]True[/green]", False: "[red]False[/red]", None: "Unknown"}
    console.print(f"{data['reason']}: {data['message']}", highlight=False, markup=False)
    console.print(
        f"ObjectivesMet {mark[objectives['status']]} ({objectives['reason']}): ",
        highlight=False,
        end="",
    )
    console.print(objectives["message"], highlight=False, markup=False)
