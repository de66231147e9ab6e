"""How many replicas each tier may plan on and ask for this pass.

Two pairs of bounds per tier. The Deployment may *ask* for minReplicas..maxReplicas
(`ask_lower`, `ask_upper`): pending replicas included. The optimizer may only *plan on*
capacity that runs (`lower`, `upper`): a tier with unschedulable replicas is capped at
what it really has (Ready + starting), and its traffic overflows to the other tiers. A
preemptible tier whose Ready replicas went unschedulable lost them with their nodes
(`lost`). A tier without a performance profile has nothing to plan for: it keeps its
minimum. When the minimums alone cost more than the hourly budget, the budget wins and
every minimum drops to zero (`min_over_budget`, explained in status).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.inputs import Inputs


@dataclass(frozen=True)
class TierBounds:
    lower: Mapping[str, int]
    upper: Mapping[str, int]
    ask_lower: Mapping[str, int]
    ask_upper: Mapping[str, int]
    capped: Mapping[str, int]  # tier -> cap (Ready + starting), only capped tiers
    lost: Mapping[str, int]  # tier -> replicas lost with preemptible nodes
    min_over_budget: bool

    def running(self, target: Mapping[str, int]) -> dict[str, int]:
        """Replicas that can run of those asked for: a capped tier's pending ones cannot."""
        return {n: min(asked, self.capped.get(n, asked)) for n, asked in target.items()}


def tier_bounds(inputs: Inputs, models: Mapping[str, ReplicaModel]) -> TierBounds:
    lower, upper, ask_lower, ask_upper, capped, lost = {}, {}, {}, {}, {}, {}
    for tier in inputs.tiers:
        seen = inputs.seen(tier.name)
        top = tier.max_replicas
        if seen.unschedulable_replicas > 0:
            cap = seen.ready_replicas + seen.starting_replicas
            capped[tier.name] = cap
            top = min(top, cap)
            before = inputs.before(tier.name)
            if tier.preemptible and before is not None:
                had = before.ready_replicas - seen.ready_replicas - seen.starting_replicas
                lost[tier.name] = max(0, min(seen.unschedulable_replicas, had))
        upper[tier.name] = top
        lower[tier.name] = min(tier.min_replicas, top)
        ask_upper[tier.name] = tier.max_replicas
        ask_lower[tier.name] = tier.min_replicas
        if tier.name not in models:  # nothing to plan it for: keep its minimum
            upper[tier.name] = lower[tier.name]
            ask_upper[tier.name] = ask_lower[tier.name]
    budget = inputs.budget
    over = budget is not None and sum(inputs.prices[n] * lower[n] for n in inputs.names) > budget
    if over:
        lower = dict.fromkeys(inputs.names, 0)
        ask_lower = dict.fromkeys(inputs.names, 0)
    return TierBounds(lower, upper, ask_lower, ask_upper, capped, lost, over)
