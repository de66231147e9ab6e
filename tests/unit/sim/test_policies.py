"""Baselines and the oracle: what each decides from what it sees."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from gpufleet.api.status import ClassStatus, InferencePoolStatus, TierWeight
from gpufleet.planning.observed import Routed
from gpufleet.planning.planner import plan
from gpufleet.planning.records import MetricsState, Observation, TierObservation
from gpufleet.sim.baselines import UtilizationPolicy, fixed_weights
from gpufleet.sim.engine import SimConfig, models_of, simulate
from gpufleet.sim.gpufleet_policy import operator_view
from gpufleet.sim.oracle import OraclePolicy
from gpufleet.sim.policies import make_policies
from gpufleet.sim.policy import ClassLoad, Seen, class_loads
from gpufleet.sim.traces import Trace
from tests.pools import tier
from tests.unit.sim.factories import mixed_pool, renamed_pool, trace

pytestmark = pytest.mark.timeout(5)

AZURE_SHAPE = ClassLoad(rate_rps=2.0, prompt_tokens=1155, output_tokens=211)
NOW = datetime(2023, 11, 16, tzinfo=UTC)


def _seen(time: float, ready: dict[str, int], busy: dict[str, float]) -> Seen:
    observation = Observation(
        now=NOW,
        tiers={n: TierObservation(name=n, ready_replicas=r) for n, r in ready.items()},
        metrics=MetricsState.AVAILABLE,
    )
    return Seen(time=time, observation=observation, busy_replicas=busy)


def _hpa() -> UtilizationPolicy:
    spec = mixed_pool().spec
    tier = spec.tiers[1]
    return UtilizationPolicy(
        name="utilization",
        description="",
        spec=spec,
        tiers=[tier],
        weights={"realtime": {"rtx4090": 100}, "batch": {"rtx4090": 100}},
        initial={"rtx4090": 4},
    )


def test_the_hpa_scales_up_at_once_and_down_after_five_minutes() -> None:
    hpa = _hpa()
    assert hpa.warm(_seen(0, {}, {})).replicas["rtx4090"] == 4
    # 4 Ready, 4.2 busy: 105% of a 70% target -> ceil(4.2 / 0.7) = 6 at once.
    assert hpa.decide(_seen(30, {"rtx4090": 4}, {"rtx4090": 4.2})).replicas["rtx4090"] == 6
    quiet = {"rtx4090": 1.0}
    decided = [
        hpa.decide(_seen(t, {"rtx4090": 6}, quiet)).replicas["rtx4090"] for t in range(60, 391, 30)
    ]
    assert decided[:9] == [6] * 9  # the 6 of t=30 is in the 5-minute window until t=330
    assert decided[-1] == 2


def test_the_hpa_holds_within_its_tolerance() -> None:
    hpa = _hpa()
    hpa.warm(_seen(0, {}, {}))
    # 4 Ready at 74% each: within 10% of 70%.
    assert hpa.decide(_seen(30, {"rtx4090": 4}, {"rtx4090": 2.96})).replicas["rtx4090"] == 4


def test_each_class_goes_where_its_requests_are_cheapest_within_its_objective() -> None:
    pool = mixed_pool()
    models = models_of(pool)
    loads = {"realtime": AZURE_SHAPE, "batch": AZURE_SHAPE}
    weights = fixed_weights(pool.spec, pool.spec.tiers, models, loads)
    # A 1155-token prompt takes ~280 ms to prefill on a 4090: only the H100 holds 100 ms.
    assert weights == {
        "realtime": {"h100": 100, "rtx4090": 0},
        "batch": {"h100": 0, "rtx4090": 100},
    }


def test_single_tier_baselines_find_tiers_by_accelerator_not_name() -> None:
    pool = renamed_pool()
    t = trace(np.arange(100.0), classes=[0, 1] * 50)
    policies = make_policies(["h100-only", "rtx4090-only"], pool, models_of(pool), t, 30.0, None)
    assert [p.warm(_seen(0, {}, {})).weights["batch"] for p in policies] == [
        {"fast": 100, "cheap": 0},
        {"fast": 0, "cheap": 100},
    ]


def test_the_oracle_plans_on_the_next_interval() -> None:
    pool = mixed_pool()
    quiet_then_busy = np.concatenate([np.linspace(0, 29, 10), np.linspace(30, 59.9, 600)])
    t = trace(quiet_then_busy, prompt=200, output=200, classes=[1] * 610)
    oracle = OraclePolicy(pool, models_of(pool), t, 30.0)
    first = oracle.decide(_seen(0.0, {}, {}))
    second = oracle.decide(_seen(30.0, {}, {}))
    assert second.instant
    assert sum(second.replicas.values()) > sum(first.replicas.values())
    assert class_loads(t, 30.0, 60.0)["batch"].rate_rps == pytest.approx(20.0)
    assert oracle.met == [True, True]


def _long_tail_oracle(head: int) -> tuple[OraclePolicy, Trace]:
    """The oracle for 2 req/s (Poisson, 60 s) of batch on RTX 4090s only: 300-token
    prompts, every fifth `head` tokens."""
    arrivals = np.cumsum(np.random.default_rng(1).exponential(0.5, 400))
    arrivals = arrivals[arrivals < 60.0]
    prompts = [head if i % 5 == 0 else 300 for i in range(len(arrivals))]
    pool = mixed_pool(tiers=[tier("rtx4090", "RTX4090", maxReplicas=8)])
    t = trace(arrivals, prompt=prompts, output=200, classes=[1] * len(arrivals))
    return OraclePolicy(pool, models_of(pool), t, 30.0), t


def test_the_oracle_buys_past_the_profile_until_the_replay_meets_the_objective() -> None:
    # A 6,000-token prompt is 1.5 s of prefill on a 4090: on the one replica the profile
    # asks for at the mean shape, the prompts that queue behind it wait past 2 s.
    oracle, t = _long_tail_oracle(6000)
    profile = oracle._candidate(class_loads(t, 0.0, 30.0), {"realtime": 1.0, "batch": 1.0}, {})
    assert profile.decision.replicas["rtx4090"] == 1
    assert oracle._misses(t, 0.0, profile.decision)["batch"] > 2
    result = simulate(oracle.pool, t, oracle, SimConfig(seed=0))
    assert oracle.met == [True, True]
    assert min(result.timeline.desired["rtx4090"]) >= 2
    assert int(np.sum(~(result.ttft <= 2.0))) <= 2  # 1% of each interval's ~58, rounded


def test_the_oracle_plans_without_the_replicas_whose_nodes_are_away() -> None:
    """Both RTX 4090 replicas wait for a node (preempted, none back yet): the oracle plans
    batch onto the H100 and keeps asking for the 4090s, which serve once a node returns."""
    pool = mixed_pool()
    arrivals = np.arange(0.0, 60.0, 0.25)
    t = trace(arrivals, prompt=300, output=100, classes=[1] * len(arrivals))
    oracle = OraclePolicy(pool, models_of(pool), t, 30.0)
    away = {
        "h100": TierObservation(name="h100", desired_replicas=1, ready_replicas=1),
        "rtx4090": TierObservation(
            name="rtx4090", desired_replicas=2, ready_replicas=0, unschedulable_replicas=2
        ),
    }
    observation = Observation(now=NOW, tiers=away, metrics=MetricsState.AVAILABLE, demand={})
    decision = oracle.decide(Seen(time=0.0, observation=observation, busy_replicas={}))
    assert decision.weights["batch"]["rtx4090"] == 0
    assert decision.weights["batch"]["h100"] == 100
    assert decision.replicas["rtx4090"] == 2
    assert oracle.met == [True]


def test_requests_no_fleet_can_serve_in_time_are_its_ceiling_not_misses() -> None:
    # A 20,000-token prompt takes longer than 2 s to prefill on any idle replica: no fleet
    # serves it in time. They are the class's ceiling, not misses the oracle must buy away.
    oracle, t = _long_tail_oracle(20000)
    hopeless = len(range(0, len(t), 5))
    assert oracle._allowed_misses(t) == {"realtime": 0, "batch": hopeless + 1}
    result = simulate(oracle.pool, t, oracle, SimConfig(seed=0))
    assert oracle.met == [True, True]
    # Met: the hopeless ones missed, and (on enough replicas that the others need not
    # queue behind them) at most one other per interval.
    assert hopeless <= int(np.sum(~(result.ttft <= 2.0))) <= hopeless + 2


def test_the_operator_view_infers_class_demand_from_tiers_and_weights() -> None:
    pool = mixed_pool()
    tiers = {
        "h100": TierObservation(
            name="h100",
            prompt_tokens_per_second=100.0,
            generation_tokens_per_second=100.0,
            ttft_p99_seconds=0.09,
        ),
        "rtx4090": TierObservation(
            name="rtx4090",
            prompt_tokens_per_second=300.0,
            generation_tokens_per_second=300.0,
            ttft_p99_seconds=1.5,
        ),
    }
    truth = Observation(now=NOW, tiers=tiers, metrics=MetricsState.AVAILABLE, demand={})
    status = InferencePoolStatus(
        classes=[
            ClassStatus(name="realtime", weights=[TierWeight(tier="h100", weight=100)]),
            ClassStatus(
                name="batch",
                weights=[TierWeight(tier="h100", weight=0), TierWeight(tier="rtx4090", weight=100)],
            ),
        ]
    )
    seen = operator_view(truth, pool, status)
    realtime, batch = seen.demand["realtime"], seen.demand["batch"]
    assert realtime is not None and batch is not None
    assert realtime.tokens_per_second == pytest.approx(200.0)
    assert batch.tokens_per_second == pytest.approx(600.0)
    assert seen.class_ttft_p99_seconds == {"realtime": 0.09, "batch": 1.5}
    # Had batch gone half to the H100 for the first half of a 60 s window, a quarter of
    # its tokens were the H100's: read with the window's weights, the H100's 400 tokens/s
    # (here 100 + 300 after the change) are realtime's 200 and a quarter of batch's 800.
    before = {"realtime": {"h100": 100}, "batch": {"h100": 50, "rtx4090": 50}}
    live = {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
    routed = [
        Routed(NOW - timedelta(seconds=60), before),
        Routed(NOW - timedelta(seconds=30), live),
    ]
    tiers["h100"] = replace(
        tiers["h100"], prompt_tokens_per_second=200.0, generation_tokens_per_second=200.0
    )
    mixed = replace(truth, tiers=tiers, metrics_window_seconds=60.0)
    seen = operator_view(mixed, pool, status, routed)
    assert seen.demand["realtime"].tokens_per_second == pytest.approx(200.0, rel=0.01)
    assert seen.demand["batch"].tokens_per_second == pytest.approx(800.0, rel=0.01)


def test_the_gpufleet_policy_is_the_real_planner() -> None:
    pool = mixed_pool()
    t = trace(np.arange(100.0), classes=[0, 1] * 50)
    (policy,) = make_policies(["gpufleet"], pool, models_of(pool), t, 30.0, plan)
    with pytest.raises(ValueError, match="planner"):
        make_policies(["gpufleet"], pool, models_of(pool), t, 30.0, None)
    assert policy.name == "gpufleet"


def test_all_runs_the_policies_that_apply_and_says_which_it_left_out() -> None:
    from gpufleet.api.types import InferencePoolSpec
    from gpufleet.sim.policies import POLICY_NAMES, applicable
    from tests.pools import pool, tier

    body = pool(tiers=[tier("h200", "H200-SXM-141GB"), tier("l40s", "L40S")])
    names, notes = applicable(InferencePoolSpec.model_validate(body["spec"]))
    assert names == ["gpufleet", "static-split", "utilization", "oracle"]
    assert notes == [
        "policy h100-only left out: the pool has no H100-PCIe-80GB/H100-SXM-80GB tier",
        "policy rtx4090-only left out: the pool has no RTX4090 tier",
    ]
    mixed = pool(tiers=[tier("h100", "H100-PCIe-80GB"), tier("rtx4090", "RTX4090")])
    assert applicable(InferencePoolSpec.model_validate(mixed["spec"])) == (list(POLICY_NAMES), [])
