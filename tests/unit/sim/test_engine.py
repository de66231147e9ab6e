"""A whole run: determinism, routing by weights, drops, the past-only view, the real planner."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from gpufleet.api.types import InferencePool
from gpufleet.desired.drain import drain_seconds
from gpufleet.planning.planner import plan
from gpufleet.planning.records import TierObservation
from gpufleet.sim.engine import SimConfig, models_of, simulate
from gpufleet.sim.fleet import Preemption
from gpufleet.sim.gpufleet_policy import GpufleetPolicy
from gpufleet.sim.metrics import CutCause, Fate, busy_share
from gpufleet.sim.policies import make_policies
from gpufleet.sim.traces import Shape, Trace, assign_classes, synthetic
from tests.unit.sim.factories import Recording, Scripted, mixed_pool, trace

pytestmark = pytest.mark.timeout(10)

BOTH = {"h100": 1, "rtx4090": 2}


def _trace(seconds: float = 600.0, rate: float = 3.0, seed: int = 0) -> Trace:
    t = synthetic(Shape.CONSTANT, mean_rps=rate, duration_seconds=seconds, seed=seed)
    return assign_classes(t, mixed_pool().spec, {"realtime": 0.3}, seed=seed)


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    pool = mixed_pool()
    t = _trace()
    config = SimConfig(seed=3, preemption=Preemption(mean_up_seconds=300.0))
    runs = [
        simulate(pool, t, p, c)
        for p, c in [
            (make_policies(["utilization"], pool, models_of(pool), t, 30.0, None)[0], config),
            (make_policies(["utilization"], pool, models_of(pool), t, 30.0, None)[0], config),
            (
                make_policies(["utilization"], pool, models_of(pool), t, 30.0, None)[0],
                SimConfig(seed=4),
            ),
        ]
    ]
    assert np.array_equal(runs[0].ttft, runs[1].ttft)
    assert runs[0].tiers == runs[1].tiers
    assert not np.array_equal(runs[0].ttft, runs[2].ttft)


def test_requests_split_over_tiers_by_the_class_weights() -> None:
    pool = mixed_pool()
    t = _trace(rate=2.0)
    policy = Recording(BOTH, {"realtime": {"h100": 100}, "batch": {"h100": 25, "rtx4090": 75}})
    result = simulate(pool, t, policy, SimConfig(preemption=Preemption(mean_up_seconds=0)))
    assert result is not None
    batch = t.class_index == 1
    tier_of = _tier_of(pool, t, policy)
    assert np.mean(tier_of[batch] == 1) == pytest.approx(0.75, abs=0.05)
    assert np.all(tier_of[~batch] == 0)


def _tier_of(pool: InferencePool, t: Trace, policy: Recording) -> NDArray[np.int64]:
    from gpufleet.sim.engine import _Run

    run = _Run(pool, models_of(pool), t, SimConfig(preemption=Preemption(mean_up_seconds=0)), 30.0)
    run.apply(policy.decision, 0.0, warm=True)
    run.run_span(0.0, run.end)
    return run.recorder.tier_of


def test_without_a_ready_replica_requests_are_dropped() -> None:
    pool = mixed_pool()
    t = trace([1.0, 2.0, 3.0], classes=[1, 1, 1])
    policy = Recording(
        {"h100": 0, "rtx4090": 0}, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
    )
    result = simulate(pool, t, policy, SimConfig())
    assert result.fate.tolist() == [Fate.DROPPED] * 3


def test_a_busy_tier_hands_requests_to_the_class_s_other_tier() -> None:
    pool = mixed_pool()
    t = trace([1.0, 2.0], classes=[1, 1])
    policy = Recording(
        {"h100": 1, "rtx4090": 0}, {"realtime": {"h100": 100}, "batch": {"h100": 1, "rtx4090": 99}}
    )
    result = simulate(pool, t, policy, SimConfig())
    assert result.fate.tolist() == [Fate.COMPLETED] * 2


def test_a_policy_sees_only_the_interval_that_ended() -> None:
    pool = mixed_pool()
    # 30 batch requests in the first interval, none in the second, 90 in the third.
    arrivals = np.concatenate([np.linspace(0.5, 29, 30), np.linspace(60.5, 89, 90)])
    t = trace(arrivals, prompt=100, output=20, classes=[1] * 120)
    policy = Recording(BOTH, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}})
    simulate(pool, t, policy, SimConfig())
    demand = [s.observation.demand["batch"] for s in policy.seen]
    assert [d.tokens_per_second if d else None for d in demand] == pytest.approx([120.0, 0.0])
    assert [s.observation.now - t.start for s in policy.seen] == [
        timedelta(seconds=30),
        timedelta(seconds=60),
    ]
    rtx = policy.seen[0].observation.tiers["rtx4090"]
    assert rtx.ready_replicas == 2
    assert rtx.requests_per_second == pytest.approx(1.0)
    assert rtx.ttft_p99_seconds is not None


class _WarmSeen(Recording):
    def warm(self, seen: Any) -> Any:
        self.warm_seen = seen
        return self.decision


def test_the_warm_start_sees_the_demand_of_the_first_model_load_and_interval() -> None:
    """One interval is a noisy sample of a rate (a trace's first seconds may be quiet): the
    fleet a policy runs before the trace is for the demand a pass would plan for, over the
    pool's longest model load plus an interval."""
    pool = mixed_pool()
    models = models_of(pool)
    horizon = max(m.model_load_seconds for m in models.values()) + 30.0
    # 10 batch requests in the first interval, then 2 a second up to 300 s.
    arrivals = np.concatenate([np.linspace(0.5, 29, 10), np.arange(30.0, 300.0, 0.5)])
    t = trace(arrivals, prompt=100, output=20, classes=[1] * len(arrivals))
    policy = _WarmSeen(BOTH, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}})
    simulate(pool, t, policy, SimConfig(), models=models)
    seen = policy.warm_seen.observation.demand["batch"]
    count = int(np.sum(arrivals < horizon))
    assert seen.tokens_per_second == pytest.approx(count * 120.0 / horizon)
    assert 30.0 < horizon < 300.0 and seen.tokens_per_second > 1.5 * 10 * 120.0 / 30.0
    # A trace shorter than an interval: its demand over the interval, as before.
    short = trace([1.0, 2.0, 3.0], prompt=100, output=20, classes=[1, 1, 1])
    policy = _WarmSeen(BOTH, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}})
    simulate(pool, short, policy, SimConfig(), models=models)
    seen = policy.warm_seen.observation.demand["batch"]
    assert seen.tokens_per_second == pytest.approx(3 * 120.0 / 30.0)


def test_a_slower_scrape_spreads_what_a_pass_reads_over_the_operator_s_window() -> None:
    """With a 15 s scrape and a 30 s interval the operator reads 60 s (four scrapes): the
    step from 30 requests an interval to 90 shows at 60 an interval at the pass after it,
    and whole a pass later. A 5 s scrape reads the last interval alone; a 10 s one the
    last 40 s, a third of an interval before the last one included."""
    pool = mixed_pool()
    arrivals = np.concatenate(
        [np.linspace(0.5, 29, 30), np.linspace(30.5, 59, 90), np.linspace(60.5, 89, 90)]
    )
    arrivals = np.concatenate([arrivals, np.linspace(90.5, 119, 90)])
    t = trace(arrivals, prompt=100, output=20, classes=[1] * len(arrivals))
    seen = {}
    for scrape in (5.0, 10.0, 15.0):
        policy = Recording(BOTH, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}})
        simulate(pool, t, policy, SimConfig(scrape_interval_seconds=scrape))
        seen[scrape] = policy.seen
    demand = {k: [s.observation.demand["batch"] for s in v] for k, v in seen.items()}
    tokens = {k: [d.tokens_per_second if d else None for d in v] for k, v in demand.items()}
    # Passes at 30, 60 and 90 s; 120 tokens a request.
    assert tokens[5.0] == pytest.approx([120.0, 360.0, 360.0])  # the last 30 s
    assert tokens[15.0] == pytest.approx([120.0, 240.0, 360.0])  # the last 60 s (30 at first)
    # The last 40 s (30 s at first): at 60 s, 90 requests in 30-60 s and 10 in 20-30 s.
    arrived = [np.sum((arrivals >= end - 40) & (arrivals < end)) for end in (60.0, 90.0)]
    assert arrived[0] == 100
    assert tokens[10.0] == pytest.approx([120.0, *(n * 120 / 40 for n in arrived)])
    rtx = [s.observation.tiers["rtx4090"].requests_per_second for s in seen[15.0]]
    assert rtx[0] is not None and rtx[0] < rtx[1] < rtx[2]  # completions: the same window
    busy = [s.busy_replicas["rtx4090"] for s in seen[15.0]]
    assert 0 < busy[0] < busy[1] < busy[2]


def test_a_window_s_busy_share_between_passes_is_read_at_an_even_rate() -> None:
    marks = [(0.0, 0.0), (30.0, 30.0), (60.0, 90.0)]  # 1 busy replica, then 2
    assert busy_share(marks, 30.0, 60.0, 90.0) == pytest.approx(2.0)  # a mark at each end
    assert busy_share(marks, 20.0, 60.0, 90.0) == pytest.approx((90 - 20) / 40)
    assert busy_share(marks, -30.0, 30.0, 30.0) == pytest.approx(1.0)  # nothing before 0
    # From the last mark to now: the total at `end` closes the segment.
    assert busy_share(marks, 70.0, 90.0, 150.0) == pytest.approx(60 * 20 / 30 / 20)
    assert busy_share(marks, 60.0, 60.0, 90.0) == 0.0


def test_cold_start_delays_service_and_is_paid_for() -> None:
    pool = mixed_pool()
    t = trace(np.arange(0.5, 240.0, 1.0), prompt=300, output=50, classes=[1] * 240)

    class ScaleUp(Recording):
        def decide(self, seen):  # type: ignore[no-untyped-def]
            self.seen.append(seen)
            return type(self.decision)(
                replicas={"h100": 1, "rtx4090": 1},
                weights={"realtime": {"h100": 100}, "batch": {"rtx4090": 100}},
            )

    policy = ScaleUp(
        {"h100": 1, "rtx4090": 0}, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
    )
    result = simulate(pool, t, policy, SimConfig(preemption=Preemption(mean_up_seconds=0)))
    # The 4090 is asked for at t=30 and Ready at t=106: batch before then has nowhere to go.
    dropped = t.arrival_seconds[result.fate == Fate.DROPPED]
    assert dropped.min() < 1.0
    assert dropped.max() == pytest.approx(105.5)
    assert result.tiers["rtx4090"].replica_seconds == pytest.approx(240.0 - 30.0)


def _scale_down_run(scaling: dict[str, int]) -> tuple[Trace, NDArray[np.int64], NDArray[np.int64]]:
    """Ten long batch requests on one 4090, scaled to zero at t=30 while they decode."""
    pool = mixed_pool(scaling={"intervalSeconds": 30, **scaling})
    arrivals = [*np.linspace(20.0, 29.0, 10), 70.0]  # the last keeps the run going
    t = trace(arrivals, prompt=200, output=2000, classes=[1] * 10 + [0])
    policy = Scripted(
        [{"h100": 1, "rtx4090": 1}, {"h100": 1, "rtx4090": 0}],
        {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}},
    )
    result = simulate(pool, t, policy, SimConfig(preemption=Preemption(mean_up_seconds=0)))
    return t, result.fate, result.cut_cause


def test_a_drain_time_of_zero_cuts_what_a_scaled_down_replica_has_in_flight() -> None:
    _, fate, cause = _scale_down_run({"drainSeconds": 0})
    assert fate[:10].tolist() == [Fate.CUT] * 10
    assert cause[:10].tolist() == [CutCause.DRAIN_TIMEOUT] * 10


def test_a_long_drain_time_lets_a_scaled_down_replica_finish_everything() -> None:
    _, fate, cause = _scale_down_run({"drainSeconds": 600})
    assert fate.tolist() == [Fate.COMPLETED] * 11
    assert not cause.any()


def test_the_simulated_drain_time_is_the_one_the_operator_writes_into_the_pods() -> None:
    from gpufleet.sim.engine import _Run

    for pool in (mixed_pool(), mixed_pool(scaling={"drainSeconds": 45})):
        run = _Run(pool, models_of(pool), _trace(60.0), SimConfig(), 30.0)
        assert [f.drain_seconds for f in run.fleets] == [drain_seconds(pool)] * 2
    assert drain_seconds(mixed_pool(scaling={"drainSeconds": 45})) == 45


def test_requests_cut_by_a_lost_node_count_under_their_own_cause() -> None:
    pool = mixed_pool()
    t = trace(np.arange(0.5, 600.0, 0.5), prompt=200, output=1000, classes=[1] * 1200)
    policy = Recording(BOTH, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}})
    config = SimConfig(seed=1, preemption=Preemption(mean_up_seconds=120.0, mean_down_seconds=60))
    result = simulate(pool, t, policy, config)
    cut = result.fate == Fate.CUT
    assert result.tiers["rtx4090"].preempted > 0
    assert cut.sum() > 0
    assert set(result.cut_cause[cut].tolist()) == {CutCause.NODE_LOST}
    assert not result.cut_cause[~cut].any()


@pytest.mark.parametrize(
    ("notice", "cut_at_most"),
    [pytest.param(0.0, None, id="unnoticed-cuts"), pytest.param(120.0, 0, id="noticed-cuts-none")],
)
def test_a_notice_long_enough_lets_a_preempted_replica_finish_its_requests(
    notice: float, cut_at_most: int | None
) -> None:
    pool = mixed_pool(scaling={"intervalSeconds": 30, "drainSeconds": 300})
    t = trace(np.arange(0.5, 600.0, 0.5), prompt=200, output=1000, classes=[1] * 1200)
    policy = Recording(BOTH, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}})
    preemption = Preemption(mean_up_seconds=120.0, mean_down_seconds=60, notice_seconds=notice)
    result = simulate(pool, t, policy, SimConfig(seed=1, preemption=preemption))
    cut = int(np.sum(result.fate == Fate.CUT))
    assert result.tiers["rtx4090"].preempted > 0
    if cut_at_most is None:
        assert cut > 0
    else:
        assert cut <= cut_at_most


@pytest.mark.timeout(30)
def test_gpufleet_runs_the_planner_and_carries_its_status() -> None:
    pool = mixed_pool()
    t = _trace(seconds=300.0)
    (policy,) = make_policies(["gpufleet"], pool, models_of(pool), t, 30.0, plan)
    assert isinstance(policy, GpufleetPolicy)
    result = simulate(pool, t, policy, SimConfig())
    assert result.decisions == len(policy.plans) - 1  # warm start: two passes, one decision
    assert [tier.name for tier in policy.status.tiers] == ["h100", "rtx4090"]
    assert policy.status.last_decision is not None
    assert np.mean(result.fate == Fate.COMPLETED) > 0.95
    # As the reconciler does, it keeps the weights it routed for the windows that span them.
    kept = policy.weights.of(policy.name)
    assert kept and kept[-1].weights == {
        c.name: {w.tier: w.weight for w in c.weights if w.weight} for c in policy.status.classes
    }


def test_a_policy_sees_its_ready_pods_start_times_and_the_prompt_shares() -> None:
    pool = mixed_pool()
    # Batch only: two in three prompts of 100 tokens, one of 3000, over five intervals.
    prompts = [100, 100, 3000] * 50
    t = trace(np.linspace(0.5, 149.0, 150), prompt=prompts, output=10, classes=[1] * 150)

    class ScaleUp(Recording):
        def decide(self, seen):  # type: ignore[no-untyped-def]
            self.seen.append(seen)
            return type(self.decision)(
                replicas={"h100": 1, "rtx4090": 2}, weights=self.decision.weights
            )

    policy = ScaleUp(
        {"h100": 1, "rtx4090": 1}, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
    )
    simulate(pool, t, policy, SimConfig(preemption=Preemption(mean_up_seconds=0)))
    load = models_of(pool)["rtx4090"].model_load_seconds
    at = {round((s.observation.now - t.start).total_seconds()): s.observation for s in policy.seen}
    # The warm replica: Ready at t=0, created a model load before it.
    (warm,) = at[30].tiers["rtx4090"].pod_starts
    assert warm.ready - t.start == timedelta(0)
    assert warm.seconds == pytest.approx(load)
    # The one asked for at t=30 is listed once Ready (t=30+load), with its own lead time.
    assert len(at[90].tiers["rtx4090"].pod_starts) == 1
    starts = at[120].tiers["rtx4090"].pod_starts
    assert len(starts) == 2
    assert starts[1].created - t.start == timedelta(seconds=30)
    assert starts[1].seconds == pytest.approx(load)
    # A third of the completed requests had 3000-token prompts: at most 2000 is 2/3.
    shares = at[30].tiers["rtx4090"].prompt_share_at_most
    assert shares[100.0] == pytest.approx(2 / 3, abs=0.05)
    assert shares[2000.0] == shares[100.0]
    assert shares[5000.0] == 1.0
    assert at[30].tiers["h100"].prompt_share_at_most == {}  # nothing completed there
    # Their mean, as vLLM's histogram sums them: the completed prompts' own (of the two
    # lengths, the share at most 100 tokens is the 100-token ones).
    short = shares[100.0]
    expected = short * 100 + (1 - short) * 3000
    assert at[30].tiers["rtx4090"].prompt_mean_tokens == pytest.approx(expected, rel=1e-9)
    assert at[30].tiers["h100"].prompt_mean_tokens is None


def test_a_policy_reads_first_tokens_at_the_buckets_the_pool_s_vllm_exports() -> None:
    # The operator asks vLLM 0.33 for a TTFT bound at each class objective (batch: 2 s), so
    # its pods export one there; an image older than the flag keeps vLLM's defaults, where
    # 2 s lies inside the (1, 2.5] bucket. The simulator shows a policy the same series.
    t = trace(np.linspace(0.5, 59.5, 120), prompt=100, output=10, classes=[1] * 120)
    bounds = {
        image: set(_first_batch_view(t, image=image).ttft_fraction_above)
        for image in ("vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.8.5")
    }
    assert 2.0 in bounds["vllm/vllm-openai:v0.33.0"]
    assert 2.0 not in bounds["vllm/vllm-openai:v0.8.5"]
    assert bounds["vllm/vllm-openai:v0.33.0"] - bounds["vllm/vllm-openai:v0.8.5"] == {2.0}


def test_a_policy_reads_prompt_lengths_up_to_the_context_the_pool_s_flags_set() -> None:
    # vLLM counts prompt lengths in a 1-2-5 series up to its max_model_len: with
    # --max-model-len=4096 the last bound is 2000, and a 3000-token prompt is above it.
    t = trace(np.linspace(0.5, 59.5, 120), prompt=3000, output=10, classes=[1] * 120)
    shares = {
        len(flags): _first_batch_view(t, extraArgs=flags).prompt_share_at_most
        for flags in (["--max-model-len=4096"], [])
    }
    assert max(shares[1]) == 2000.0 and shares[1][2000.0] == 0.0  # all in the +Inf bucket
    assert max(shares[0]) == 5000.0 and shares[0][5000.0] == 1.0  # up to the 8192 default


def test_a_pool_s_own_ttft_buckets_are_the_ones_its_policy_reads() -> None:
    # A pool may set vLLM's buckets itself (its extraArgs win over the operator's): its
    # pods export those, so the simulator shows a policy those.
    t = trace(np.linspace(0.5, 59.5, 120), prompt=100, output=10, classes=[1] * 120)
    flags = ['--custom-histogram-buckets={"time_to_first_token": [0.5, 3.0, 30.0]}']
    assert set(_first_batch_view(t, extraArgs=flags).ttft_fraction_above) == {
        0.5,
        3.0,
        30.0,
    }


def _first_batch_view(t: Trace, **model: Any) -> TierObservation:
    """What a policy sees of the batch class's tier (rtx4090) at the first decision, on the
    example pool with these `spec.model` fields set."""
    body = mixed_pool().model_dump(mode="json", by_alias=True, exclude_none=True)
    body["spec"]["model"].update(model)
    policy = Recording(BOTH, {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}})
    simulate(
        InferencePool.model_validate(body),
        t,
        policy,
        SimConfig(preemption=Preemption(mean_up_seconds=0)),
    )
    view: TierObservation = policy.seen[0].observation.tiers["rtx4090"]
    return view
