"""What a plan is expected to deliver: P99 TTFT per class, and energy per million tokens."""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpufleet.planning.capacity import ReplicaModel, kwh_per_million_tokens
from gpufleet.planning.classes import ClassCapacity, blocking_seconds
from gpufleet.planning.inputs import Inputs


def predicted_p99(
    inputs: Inputs,
    models: Mapping[str, ReplicaModel],
    capacities: Mapping[str, ClassCapacity],
    running: Mapping[str, int],
    weights: Mapping[str, Mapping[str, int]],
    demand: Mapping[str, float],
) -> dict[str, float | None]:
    """Per class: the P99 of the slowest tier it is routed to, at the planned load and
    behind the other classes' prompts there (inf: overloaded; None: routed nowhere)."""
    classes = inputs.classes
    rho = {}
    for name in inputs.names:
        work = sum(
            demand.get(c.name, 0.0)
            / c.tokens_per_request
            * weights[c.name].get(name, 0)
            / 100.0
            * capacities[c.name].service_seconds.get(name, 0.0)
            for c in classes
        )
        rho[name] = work / running[name] if running[name] > 0 else (math.inf if work > 0 else 0.0)
    predicted: dict[str, float | None] = {}
    for cls in classes:
        worst = None
        for name, weight in weights[cls.name].items():
            model = models.get(name)
            if weight <= 0 or model is None:
                continue
            others = [c.shape for c in classes if c is not cls and weights[c.name].get(name, 0) > 0]
            p99 = model.ttft_p99_at_utilization(
                rho[name], *cls.shape, blocking_seconds=blocking_seconds(model, others)
            )
            worst = p99 if worst is None else max(worst, p99)
        predicted[cls.name] = worst
    return predicted


def energy_kwh_per_million_tokens(
    inputs: Inputs,
    models: Mapping[str, ReplicaModel],
    running: Mapping[str, int],
    tokens_per_second: float,
) -> float | None:
    """None when no tokens flow, or a running tier's model has no power figure."""
    if tokens_per_second <= 0:
        return None
    watts = 0.0
    for name in inputs.names:
        if running[name] == 0:
            continue
        model = models.get(name)
        if model is None or model.watts is None:
            return None
        watts += model.watts * running[name]
    return kwh_per_million_tokens(watts, tokens_per_second)
