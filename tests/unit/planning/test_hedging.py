"""Hedging preemptible tiers: the loss rate learned from pods on lost nodes, the margin."""

from __future__ import annotations

import math

import pytest

from gpufleet.api.status import InferencePoolStatus, Reason
from gpufleet.api.types import InferencePoolSpec
from gpufleet.planning import conditions, hedging
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.planner import plan
from gpufleet.planning.records import Observation, Plan
from tests.unit.planning.factories import batch, h100, observe, realtime, rtx4090, spec, status_from

PRIOR = hedging.PRIOR_RATE_PER_REPLICA_HOUR


def _pool(**scaling: object) -> InferencePoolSpec:
    return spec(
        tiers=[h100(maxReplicas=8), rtx4090(preemptible=True, maxReplicas=40)],
        classes=[realtime(), batch()],
        scaling={"scaleDownDelaySeconds": 0, **scaling},
    )


def _learn(
    s: InferencePoolSpec, previous: InferencePoolStatus, now: float, ready: int, lost: tuple
) -> hedging.TierLoss:
    seen = observe(
        s, {"batch": 8000}, now=now, ready={"h100": 1, "rtx4090": ready},
        tiers={"rtx4090": {"lost_pods": lost}},
    )  # fmt: skip
    return hedging.learn(Inputs(s, seen, previous))["rtx4090"]


def _with(state: hedging.TierLoss) -> InferencePoolStatus:
    return InferencePoolStatus.model_validate(
        {"tiers": [{"name": "rtx4090", "nodeLoss": state.state.model_dump(by_alias=True)}]}
    )


def test_a_new_tier_starts_at_the_prior_and_only_preemptible_tiers_learn() -> None:
    s = _pool()
    seen = observe(s, {"batch": 8000}, ready={"h100": 1, "rtx4090": 4})
    losses = hedging.learn(Inputs(s, seen, InferencePoolStatus()))
    assert set(losses) == {"rtx4090"}
    assert losses["rtx4090"].rate_per_replica_hour == pytest.approx(PRIOR)
    assert losses["rtx4090"].state.replicas == 4


def test_each_lost_pod_counts_once_and_evidence_decays_with_ready_time() -> None:
    s = _pool()
    first = _learn(s, InferencePoolStatus(), 0, 10, ())
    # Six hours of 10 Ready replicas, then one pod on a vanished node.
    second = _learn(s, _with(first), 6 * 3600, 10, ("rtx4090-a",))
    window = hedging.WINDOW_SECONDS / 3600
    exposure = 10 * window * (1 - math.exp(-6 * 3600 / hedging.WINDOW_SECONDS))
    assert second.new_losses == 1
    assert second.exposure_replica_hours == pytest.approx(exposure)
    prior = PRIOR * hedging.PRIOR_REPLICA_HOURS
    assert second.rate_per_replica_hour == pytest.approx(
        (prior + 1) / (hedging.PRIOR_REPLICA_HOURS + exposure)
    )
    # The same pod seen again (not deleted yet) is not a second loss; a new one is.
    third = _learn(s, _with(second), 6 * 3600 + 30, 9, ("rtx4090-a",))
    assert third.new_losses == 0
    fourth = _learn(s, _with(third), 6 * 3600 + 60, 9, ("rtx4090-a", "rtx4090-b"))
    assert fourth.new_losses == 1
    assert fourth.losses == pytest.approx(2.0, rel=1e-2)


def test_an_idle_pass_keeps_the_state_it_read_so_status_is_not_rewritten() -> None:
    s = _pool()
    first = _learn(s, InferencePoolStatus(), 0, 10, ())
    later = _learn(s, _with(first), 3600, 10, ())
    assert later.state == first.state  # nothing happened: status unchanged, no write
    assert later.exposure_replica_hours > 9  # but the decision sees the hour of exposure
    assert later.rate_per_replica_hour < first.rate_per_replica_hour


def _losing(s: InferencePoolSpec, per_pass: int, passes: int, ready: int = 20) -> Plan:
    """Passes every 30 s in which the rtx4090 tier loses `per_pass` new pods."""
    previous = InferencePoolStatus()
    p: Plan | None = None
    serial = 0
    for i in range(passes):
        lost = tuple(f"rtx4090-{serial + k}" for k in range(per_pass))
        serial += per_pass
        seen: Observation = observe(
            s, {"realtime": 500, "batch": 60000}, now=30 * i,
            ready={"h100": 1, "rtx4090": ready}, tiers={"rtx4090": {"lost_pods": lost}},
        )  # fmt: skip
        p = plan(s, seen, previous)
        previous = status_from(p, seen)
    assert p is not None
    return p


def test_a_tier_that_loses_nodes_runs_a_priced_margin_and_says_why() -> None:
    calm = _losing(_pool(), 0, 6)
    losing = _losing(_pool(), 1, 6)
    assert calm.tiers["rtx4090"].margin_replicas == 0
    tier = losing.tiers["rtx4090"]
    assert tier.node_loss is not None and tier.node_loss.rate_per_replica_hour > 10 * PRIOR
    assert tier.margin_replicas >= 1
    assert tier.replicas == calm.tiers["rtx4090"].replicas + tier.margin_replicas
    assert losing.margin_cost_per_hour == pytest.approx(0.25 * tier.margin_replicas)
    assert "loss margin" in losing.message
    assert losing.tiers["h100"].margin_replicas == 0  # not preemptible: never hedged


def test_hedging_can_be_turned_off() -> None:
    off = _losing(_pool(hedgePreemptible=False), 1, 6)
    assert off.tiers["rtx4090"].margin_replicas == 0
    assert off.margin_cost_per_hour == 0
    assert off.tiers["rtx4090"].node_loss is not None  # still learned and shown


def test_the_margin_never_passes_max_replicas() -> None:
    s = spec(
        tiers=[h100(maxReplicas=8), rtx4090(preemptible=True, maxReplicas=21)],
        classes=[realtime(), batch()],
        scaling={"scaleDownDelaySeconds": 0},
    )
    p = _losing(s, 2, 6)
    assert p.tiers["rtx4090"].replicas <= 21


def test_a_tier_losing_a_replica_every_lead_time_is_degraded_with_its_rate() -> None:
    s = _pool()
    p = _losing(s, 3, 8)
    tier = p.tiers["rtx4090"]
    assert tier.expected_losses >= 1
    seen = observe(s, {"batch": 60000}, now=300, ready={"h100": 1, "rtx4090": 20})
    verdict = conditions.degraded(s, seen, p)
    assert verdict.status is True
    assert verdict.reason is Reason.LOSING_NODES
    assert "rtx4090: loses nodes faster than it starts replicas" in verdict.message
    assert "per replica-hour" in verdict.message
    calm = _losing(s, 0, 4)
    assert conditions.degraded(s, seen, calm).reason is Reason.AS_PLANNED
