"""Shift before shrink, over one decision sequence: no pass removes replicas that the
weights live during that pass (the previous pass's, what the HTTPRoute still says) need.

A pass applies the Deployments before the HTTPRoute, so at the moment a tier shrinks the
gateway still sends it the previous weights; `planning.replicas.protect_traffic` keeps
what those weights need. This follows a falling demand until the H100 tier has shrunk
and checks every pass, not only the one where it shrinks.
"""

from __future__ import annotations

import pytest

from gpufleet.planning.planner import plan
from gpufleet.planning.profiles import replica_model
from tests.unit.planning.factories import (
    LLAMA_8B,
    batch,
    h100,
    observe,
    previous,
    realtime,
    replicas,
    rtx4090,
    spec,
    status_from,
    tier_spec,
    weights,
)

pytestmark = pytest.mark.timeout(2)

TOKENS_PER_REQUEST = 400  # the factories' classes: 200 prompt + 200 output tokens
ACCELERATORS = {"h100": "H100-PCIe-80GB", "rtx4090": "RTX4090"}
OBJECTIVES = {"realtime": 0.1, "batch": 2.0}


def replicas_carrying(tier: str, live: dict[str, dict[str, int]], demand: dict[str, int]) -> float:
    """Replicas (fractional) the tier needs to serve, at each class's objective and full
    utilization, what the live weights send it at this demand."""
    model = replica_model(tier_spec(accelerator=ACCELERATORS[tier]), LLAMA_8B)
    need = 0.0
    for cls, tokens in demand.items():
        share = live.get(cls, {}).get(tier, 0) / 100.0
        if share:
            per_replica = model.capacity_rps(OBJECTIVES[cls], 200, 200)
            need += tokens / TOKENS_PER_REQUEST * share / per_replica
    return need


def test_no_pass_shrinks_a_tier_below_what_its_live_weights_send_it() -> None:
    s = spec(
        tiers=[h100(minReplicas=0, maxReplicas=8), rtx4090()],
        classes=[realtime(), batch()],
        scaling={"scaleDownDelaySeconds": 0},
    )
    running = {"h100": 6, "rtx4090": 4}
    # Batch was split onto the H100s during a surge; demand now falls pass after pass.
    live = {"realtime": {"h100": 100}, "batch": {"h100": 60, "rtx4090": 40}}
    status = previous(running, live)
    falling = [30000, 24000, 18000, 12000, 12000, 12000]
    shrinks = []
    for step, batch_demand in enumerate(falling):
        demand = {"realtime": 2000, "batch": batch_demand}
        seen = observe(s, demand, now=30.0 * step, ready=running)
        decided = plan(s, seen, status)
        after = replicas(decided)
        for tier in running:
            if after[tier] < running[tier]:
                shrinks.append((step, tier, live["batch"].get(tier, 0)))
                assert after[tier] >= replicas_carrying(tier, live, demand), (
                    f"pass {step}: {tier} shrank {running[tier]}->{after[tier]} while the "
                    f"live weights {live} still send it more"
                )
        # The next pass sees this one applied: replicas up at once, the route moved.
        running, live, status = after, weights(decided), status_from(decided, seen)
    # The sequence did exercise the rule: the H100s shrank from 6 to their final count,
    # and the pass that took them there ran while batch had already left them (the first
    # passes may trim only what the live 60% does not need).
    final = running["h100"]
    assert final < 6, f"the H100 tier never shrank: {shrinks}"
    last_step = max(step for step, tier, _ in shrinks if tier == "h100")
    share_then = next(b for step, t, b in shrinks if t == "h100" and step == last_step)
    assert share_then < 60 / 2, f"H100s went to {final} with batch {share_then}% on them"
