"""What a run comes to: dollars per million tokens, SLO attainment, energy; and the bar.

SLO attainment of a class is the share of *all* its requests whose time to first token
was within the objective: a dropped request (no Ready replica anywhere it may go) or a cut
one counts as a miss. Cut requests are counted by cause: its node lost (a preemptible node
went away) or the drain timeout (its replica was scaled down and the pool's drain time ran
out before it finished). Tokens served are the prompt plus
generated tokens of completed requests. Cost and energy count every replica from its
start on a node to its end (board power, an upper bound, as the planner's).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufleet.api.types import InferencePoolSpec
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.planner import CARBON_GRAMS_PER_KWH
from gpufleet.sim.engine import RunResult
from gpufleet.sim.metrics import CUT_CAUSES, CutCause, Fate
from gpufleet.sim.replica import least_ttft_seconds
from gpufleet.sim.traces import Trace

# The bar of issue 5.
BAR_ATTAINMENT = 0.99
BAR_COST_OVER_ORACLE = 1.15


@dataclass(frozen=True)
class ClassSummary:
    requests: int  # those that reached the fleet
    ttft_p99_seconds: float  # inf when more than 1% got no first token
    attainment: float  # of every request, the refused ones (`traces.within_context`) missed
    objective_seconds: float
    refused: int = 0  # refused by vLLM before the fleet: prompt over the context


@dataclass(frozen=True)
class Summary:
    policy: str
    description: str
    cost_dollars: float
    tokens_served: int
    cost_per_million_tokens: float
    energy_kwh: float | None
    kwh_per_million_tokens: float | None
    carbon_grams_per_million_tokens: float | None
    classes: dict[str, ClassSummary]
    replica_hours: dict[str, float]
    cold_starts: dict[str, int]
    preempted: dict[str, int]
    dropped: int
    cut: int  # every cause
    wall_seconds: float
    # Replicas the policy's decisions added over the run, per tier (its fleet changes).
    replicas_added: dict[str, int] = field(default_factory=dict)
    early_passes: int = 0  # passes the queue watch woke
    cut_by_cause: dict[CutCause, int] = field(default_factory=dict)

    def ratio_to(self, other: Summary) -> float:
        if other.cost_per_million_tokens <= 0:
            return math.inf
        return self.cost_per_million_tokens / other.cost_per_million_tokens


def summarize(
    result: RunResult, spec: InferencePoolSpec, refused: Mapping[str, int] | None = None
) -> Summary:
    """One run's numbers; `refused`: per class, the requests vLLM refused before the fleet
    (`Trace.refused`), missed."""
    hours = {t: totals.replica_seconds / 3600.0 for t, totals in result.tiers.items()}
    cost = sum(hours[t] * result.price_per_replica_hour[t] for t in hours)
    completed = result.fate == Fate.COMPLETED
    tokens = int(result.prompt_tokens[completed].sum() + result.output_tokens[completed].sum())
    per_million = cost / tokens * 1e6 if tokens else math.inf
    energy: float | None = 0.0
    for t, h in hours.items():
        watts = result.watts[t]
        if watts is None:
            energy = None
            break
        energy = (energy or 0.0) + h * watts / 1000.0
    kwh_per_million = energy / tokens * 1e6 if energy is not None and tokens else None
    classes = {}
    for ci, name in enumerate(result.classes):
        objective = next(c for c in spec.traffic_classes if c.name == name)
        seconds = objective.objective_seconds
        mask = result.class_of == ci
        ttft = np.where(result.fate[mask] == Fate.CUT, np.inf, result.ttft[mask])
        n = int(mask.sum())
        turned_away = (refused or {}).get(name, 0)
        offered = n + turned_away
        classes[name] = ClassSummary(
            requests=n,
            ttft_p99_seconds=_p99(result.ttft[mask]) if n else math.nan,
            attainment=float(np.sum(ttft <= seconds)) / offered if offered else math.nan,
            objective_seconds=seconds,
            refused=turned_away,
        )
    return Summary(
        policy=result.policy,
        description=result.description,
        cost_dollars=cost,
        tokens_served=tokens,
        cost_per_million_tokens=per_million,
        energy_kwh=energy,
        kwh_per_million_tokens=kwh_per_million,
        carbon_grams_per_million_tokens=None
        if kwh_per_million is None
        else kwh_per_million * CARBON_GRAMS_PER_KWH,
        classes=classes,
        replica_hours=hours,
        cold_starts={t: v.cold_starts for t, v in result.tiers.items()},
        preempted={t: v.preempted for t, v in result.tiers.items()},
        dropped=int(np.sum(result.fate == Fate.DROPPED)),
        cut=int(np.sum(result.fate == Fate.CUT)),
        wall_seconds=result.wall_seconds,
        replicas_added={t: v.added for t, v in result.tiers.items()},
        early_passes=result.early_passes,
        cut_by_cause={
            cause: int(np.sum((result.fate == Fate.CUT) & (result.cut_cause == cause)))
            for cause in CUT_CAUSES
        },
    )


@dataclass(frozen=True)
class Criterion:
    name: str
    passed: bool
    detail: str

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "MISS"


def bar(summaries: Sequence[Summary]) -> list[Criterion]:
    """The issue's bar for gpufleet, one line per criterion (empty without gpufleet)."""
    by_name = {s.policy: s for s in summaries}
    ours = by_name.get("gpufleet")
    if ours is None:
        return []
    criteria = [
        Criterion(
            f"gpufleet SLO attainment of {name} >= {BAR_ATTAINMENT:.0%}",
            c.attainment >= BAR_ATTAINMENT,
            f"{c.attainment:.2%} within {c.objective_seconds * 1000:.0f} ms",
        )
        for name, c in ours.classes.items()
        if c.requests or c.refused  # a class the trace sends nothing has none to hold
    ]
    oracle = by_name.get("oracle")
    if oracle is not None:
        ratio = ours.ratio_to(oracle)
        attains = ", ".join(
            f"{n} {c.attainment:.2%}" for n, c in oracle.classes.items() if c.requests or c.refused
        )
        short = [
            n
            for n, c in ours.classes.items()
            if n in oracle.classes and c.attainment < oracle.classes[n].attainment - 0.005
        ]
        caveat = (
            f"; gpufleet attains less for {', '.join(short)}: not the same service" if short else ""
        )
        criteria.append(
            Criterion(
                f"gpufleet $/Mtok <= {BAR_COST_OVER_ORACLE:g}x the oracle's",
                ratio <= BAR_COST_OVER_ORACLE,
                f"{ratio:.2f}x (${ours.cost_per_million_tokens:.4f} vs "
                f"${oracle.cost_per_million_tokens:.4f}; the oracle attains {attains})" + caveat,
            )
        )
    return criteria


def _p99(ttft: np.ndarray) -> float:
    """P99 with requests that never got a first token (inf) counted as slowest."""
    finite = ttft[np.isfinite(ttft)]
    if len(finite) == 0:
        return math.inf
    value = float(np.percentile(np.where(np.isfinite(ttft), ttft, 1e12), 99))
    return math.inf if value > finite.max() else value


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def to_json(
    summaries: Sequence[Summary], meta: Mapping[str, Any], criteria: Sequence[Criterion]
) -> dict[str, Any]:
    ours = next((s for s in summaries if s.policy == "gpufleet"), None)
    return {
        **meta,
        "policies": {
            s.policy: {
                "description": s.description,
                "costDollars": s.cost_dollars,
                "tokensServed": s.tokens_served,
                "costPerMillionTokens": _finite(s.cost_per_million_tokens),
                "costRatioToGpufleet": _finite(s.ratio_to(ours)) if ours else None,
                "energyKwh": s.energy_kwh,
                "kwhPerMillionTokens": s.kwh_per_million_tokens,
                "carbonGramsPerMillionTokens": s.carbon_grams_per_million_tokens,
                "classes": {
                    name: {
                        "requests": c.requests,
                        "refused": c.refused,
                        "ttftP99Seconds": _finite(c.ttft_p99_seconds),
                        "sloAttainment": c.attainment,
                        "objectiveSeconds": c.objective_seconds,
                    }
                    for name, c in s.classes.items()
                },
                "replicaHours": s.replica_hours,
                "coldStarts": s.cold_starts,
                "preempted": s.preempted,
                "replicasAdded": s.replicas_added,
                "earlyPasses": s.early_passes,
                "dropped": s.dropped,
                "cut": s.cut,
                "cutByCause": {c.key: s.cut_by_cause.get(c, 0) for c in CUT_CAUSES},
                "wallSeconds": s.wall_seconds,
            }
            for s in summaries
        },
        "bar": [{"criterion": c.name, "verdict": c.verdict, "detail": c.detail} for c in criteria],
    }


def _ms(seconds: float) -> str:
    return "inf" if not math.isfinite(seconds) else f"{seconds * 1000:.0f}"


def table_rows(summaries: Sequence[Summary]) -> tuple[list[str], list[list[str]]]:
    """The comparison table, one column per policy (plain strings, for rich and Markdown)."""
    if not summaries:
        return [], []
    ours = next((s for s in summaries if s.policy == "gpufleet"), None)
    header = ["policy", *(s.policy for s in summaries)]
    rows: list[list[str]] = [
        ["$/Mtok", *(f"{s.cost_per_million_tokens:.4f}" for s in summaries)],
        [
            "$/Mtok / gpufleet's",
            *(f"{s.ratio_to(ours):.2f}x" if ours else "-" for s in summaries),
        ],
        ["$ total", *(f"{s.cost_dollars:.2f}" for s in summaries)],
    ]
    for name, first in summaries[0].classes.items():
        objective = f"{first.objective_seconds * 1000:.0f} ms"
        rows.append(
            [
                f"{name} P99 TTFT ms (obj {objective})",
                *(_ms(s.classes[name].ttft_p99_seconds) for s in summaries),
            ]
        )
        rows.append(
            [
                f"{name} SLO attainment %",
                *(f"{s.classes[name].attainment * 100:.2f}" for s in summaries),
            ]
        )
    rows.append(
        [
            "kWh/Mtok",
            *(
                "-" if s.kwh_per_million_tokens is None else f"{s.kwh_per_million_tokens:.3f}"
                for s in summaries
            ),
        ]
    )
    rows.append(
        [
            "gCO2/Mtok",
            *(
                "-"
                if s.carbon_grams_per_million_tokens is None
                else f"{s.carbon_grams_per_million_tokens:.0f}"
                for s in summaries
            ),
        ]
    )
    for tier in summaries[0].replica_hours:
        rows.append([f"{tier} replica-hours", *(f"{s.replica_hours[tier]:.2f}" for s in summaries)])
    rows.append(["cold starts", *(str(sum(s.cold_starts.values())) for s in summaries)])
    rows.append(["early passes (queue watch)", *(str(s.early_passes) for s in summaries)])
    rows.append(["replicas preempted", *(str(sum(s.preempted.values())) for s in summaries)])
    rows.append(["requests dropped (no Ready replica)", *(str(s.dropped) for s in summaries)])
    for cause in CUT_CAUSES:
        rows.append(
            [
                f"requests cut: {cause.label}",
                *(str(s.cut_by_cause.get(cause, 0)) for s in summaries),
            ]
        )
    return header, rows


def markdown(summaries: Sequence[Summary], criteria: Sequence[Criterion]) -> str:
    header, rows = table_rows(summaries)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if criteria:
        lines.append("")
        lines += [f"- **{c.verdict}** {c.name}: {c.detail}" for c in criteria]
    return "\n".join(lines)


def attainment_bound(
    spec: InferencePoolSpec, models: Mapping[str, ReplicaModel], trace: Trace
) -> dict[str, float]:
    """Per class, the share of its requests any policy could serve within the objective.

    A request whose prompt alone, on an idle replica of the fastest tier, takes longer than
    its class's objective (in the simulator's own engine: `replica.least_ttft_seconds`) is
    a miss whatever the fleet: this is the ceiling on SLO attainment the trace and tiers
    allow. So is a request vLLM refused for its prompt's length (`Trace.refused`).
    """
    bounds = {}
    for ci, name in enumerate(trace.classes):
        objective = next(c for c in spec.traffic_classes if c.name == name)
        prompts = trace.prompt_tokens[trace.class_index == ci].astype(np.float64)
        if len(prompts) == 0:
            if trace.refused.get(name):
                bounds[name] = 0.0
            continue
        by_prompt = least_ttft_seconds(models, prompts.tolist())
        within = [by_prompt[p] <= objective.objective_seconds for p in prompts.tolist()]
        bounds[name] = float(np.sum(within)) / (len(prompts) + trace.refused.get(name, 0))
    return bounds


def print_table(
    summaries: Sequence[Summary], criteria: Sequence[Criterion], meta: Mapping[str, Any]
) -> None:
    """`gpufleet simulate`'s table: the run, the policies side by side and the bar."""
    from rich.console import Console
    from rich.table import Table

    # Piped output (make bench-sim, CI logs) keeps the table on one line per row.
    console = Console(width=None if sys.stdout.isatty() else 140)
    shares = ", ".join(f"{k} {v:.0%}" for k, v in meta["classShares"].items())
    console.print(
        f"{meta['trace']}: {meta['requests']} requests over {meta['durationSeconds']:.0f} s "
        f"({shares}, by {meta['assign']}), seed {meta['seed']}, speedup {meta['speedup']:g}, "
        f"decisions every {meta['intervalSeconds']} s on metrics of the last "
        f"{meta['metricsWindowSeconds']:g} s (a {meta['scrapeIntervalSeconds']:g} s scrape)"
    )
    check = meta.get("queueCheckSeconds") or 0
    console.print(
        f"  The queue watch checks every {check:g} s and wakes an early pass of the gpufleet "
        "policy on a surge, as in the operator"
        if check > 0
        else "  The queue watch is off: the gpufleet policy passes every interval only"
    )
    for note in meta["notes"]:
        console.print(f"  {note}")
    notice = meta["preemption"]["noticeSeconds"]
    if notice > 0:
        console.print(
            f"  Preemptible nodes are noticed {notice:g} s before they go: their replicas "
            "drain from then on while replacements start"
        )
    ceiling = ", ".join(f"{k} {v:.2%}" for k, v in meta.get("attainmentCeiling", {}).items())
    console.print(
        f"  Ceiling on SLO attainment from prompt lengths alone (TTFT on an idle replica of "
        f"the fastest tier within the objective): {ceiling}"
    )
    header, rows = table_rows(summaries)
    table = Table(*header, title="Policies side by side (same trace, same seed)")
    table.columns[0].style = "bold"
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for s in summaries:
        console.print(f"  {s.policy}: {s.description}")
    for c in criteria:
        style = "green" if c.passed else "red"
        console.print(f"[{style}]{c.verdict}[/{style}] {c.name}: {c.detail}")
    console.print(f"Simulated in {meta['wallSeconds']:.1f} s")
