"""The policies compared on one trace: the real planner, and what people run today.

Every policy answers, at each decision time, replicas per tier and integer weights per
class over tiers (`sim.policy`, the interface the engine knows). They see the same
simulated Prometheus (`Seen`); only the oracle reads the trace ahead.

- `gpufleet` (`sim.gpufleet_policy`): the planner every intervalSeconds, status carried
  between passes as the operator carries it.
- `utilization`, `h100-only`, `rtx4090-only`, `static-split` (`sim.baselines`): HPAs on
  compute utilization and a fixed capacity plan, with fixed weights.
- `oracle` (`sim.oracle`): the cheapest fleet found that meets the SLO with perfect
  foresight, Ready at once and gone at once.

`make_policies` builds them by name for `gpufleet simulate` and the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpufleet.api.types import InferencePool, InferencePoolSpec
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.sim.baselines import (
    H100,
    HPA_TARGET,
    RTX4090,
    StaticPolicy,
    UtilizationPolicy,
    fixed_weights,
    hpa_replicas,
    needed_replicas,
    tiers_of,
)
from gpufleet.sim.gpufleet_policy import GpufleetPolicy, Planner
from gpufleet.sim.oracle import OraclePolicy
from gpufleet.sim.policy import Policy, class_loads
from gpufleet.sim.traces import Trace

POLICY_NAMES = ("gpufleet", "h100-only", "rtx4090-only", "static-split", "utilization", "oracle")


SINGLE_TIER = {"h100-only": H100, "rtx4090-only": RTX4090}


def _inapplicable(name: str, spec: InferencePoolSpec) -> str | None:
    """Why policy `name` cannot run on this pool (None: it can): a single-tier baseline
    needs a tier of its GPU type."""
    family = SINGLE_TIER.get(name)
    if family is None or tiers_of(spec, family):
        return None
    return f"the pool has no {'/'.join(a.value for a in family)} tier"


def applicable(spec: InferencePoolSpec) -> tuple[list[str], list[str]]:
    """The policies `--policy all` runs on this pool, and a note for each left out."""
    names, notes = [], []
    for name in POLICY_NAMES:
        why = _inapplicable(name, spec)
        if why is None:
            names.append(name)
        else:
            notes.append(f"policy {name} left out: {why}")
    return names, notes


def _arrow(weights: Mapping[str, Mapping[str, int]]) -> str:
    return ", ".join(
        f"{c}->" + "+".join(t for t, w in tiers.items() if w > 0) for c, tiers in weights.items()
    )


def make_policies(
    names: Sequence[str],
    pool: InferencePool,
    models: Mapping[str, ReplicaModel],
    trace: Trace,
    interval_seconds: float,
    planner: Planner | None,
) -> list[Policy]:
    """The policies asked for, in the order asked; ValueError names what cannot be built."""
    spec = pool.spec
    whole = class_loads(trace, 0.0, trace.duration_seconds + 1e-6)
    first = class_loads(trace, 0.0, interval_seconds)
    split = fixed_weights(spec, spec.tiers, models, whole)
    policies: list[Policy] = []
    for name in names:
        if name == "gpufleet":
            if planner is None:
                raise ValueError(
                    "policy gpufleet: the planner (gpufleet.planning.planner) is missing"
                )
            policies.append(GpufleetPolicy(pool, planner))
        elif name in SINGLE_TIER:
            why = _inapplicable(name, spec)
            if why is not None:
                raise ValueError(f"policy {name}: {why}")
            home = tiers_of(spec, SINGLE_TIER[name])[0]
            weights = {
                c.name: {t.name: 100 if t is home else 0 for t in spec.tiers}
                for c in spec.traffic_classes
            }
            policies.append(
                UtilizationPolicy(
                    name=name,
                    description=f"HPA at {HPA_TARGET:.0%} on tier {home.name} alone, "
                    "every class on it",
                    spec=spec,
                    tiers=[home],
                    weights=weights,
                    initial=hpa_replicas(spec, models, weights, first),
                )
            )
        elif name == "utilization":
            used = [t for t in spec.tiers if any(w.get(t.name, 0) for w in split.values())]
            policies.append(
                UtilizationPolicy(
                    name=name,
                    description=f"HPA at {HPA_TARGET:.0%} per tier, fixed weights {_arrow(split)}",
                    spec=spec,
                    tiers=used,
                    weights=split,
                    initial=hpa_replicas(spec, models, split, first),
                )
            )
        elif name == "static-split":
            peak = {t.name: 0 for t in spec.tiers}
            end = trace.duration_seconds
            k = 0
            while k * interval_seconds <= end:
                loads = class_loads(trace, k * interval_seconds, (k + 1) * interval_seconds)
                for tier, n in needed_replicas(spec, models, split, loads).items():
                    peak[tier] = max(peak[tier], n)
                k += 1
            sized = ", ".join(f"{t}={n}" for t, n in peak.items())
            policies.append(
                StaticPolicy(
                    name=name,
                    description=f"fixed weights {_arrow(split)}; replicas {sized}, sized by the "
                    f"profiles for the busiest {interval_seconds:g} s interval",
                    replicas=peak,
                    weights=split,
                )
            )
        elif name == "oracle":
            policies.append(OraclePolicy(pool, models, trace, interval_seconds))
        else:
            raise ValueError(f"unknown policy {name}; choose from {', '.join(POLICY_NAMES)}")
    return policies
