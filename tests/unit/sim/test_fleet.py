"""A tier's replicas: cold starts, lost nodes, scale down, and what they cost."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpufleet.sim.engine import models_of
from gpufleet.sim.fleet import NodeChange, Preemption, TierFleet, node_changes, slot_events
from gpufleet.sim.metrics import CutCause, Fate, Recorder
from gpufleet.sim.replica import engine_params
from tests.unit.sim.factories import mixed_pool, trace

pytestmark = pytest.mark.timeout(2)


def _fleet(
    tier: str = "rtx4090", requests: int = 10, drain_seconds: float = math.inf
) -> tuple[TierFleet, Recorder]:
    pool = mixed_pool()
    spec_tier = next(t for t in pool.spec.tiers if t.name == tier)
    model = models_of(pool)[tier]
    recorder = Recorder(trace(np.arange(requests, dtype=float), prompt=500, output=100), 2)
    fleet = TierFleet(
        index=1,
        tier=spec_tier,
        model=model,
        params=engine_params(model),
        recorder=recorder,
        prompt=recorder.prompt,
        output=recorder.output,
        drain_seconds=drain_seconds,
    )
    return fleet, recorder


def test_a_new_replica_is_ready_only_after_loading_the_model() -> None:
    fleet, _ = _fleet()
    load = fleet.model.model_load_seconds
    assert load == pytest.approx(60 + 2 * 8)  # 8B fp16 weights at 1 GB/s, plus 60 s
    fleet.scale(2, 100.0)
    assert fleet.ready(100.0 + load - 1) == []
    assert fleet.starting(100.0 + load - 1) == 2
    assert len(fleet.ready(100.0 + load)) == 2
    assert fleet.totals.cold_starts == 2


def test_a_replica_costs_from_its_start_not_from_ready() -> None:
    fleet, _ = _fleet()
    fleet.scale(1, 0.0)
    assert fleet.replica_seconds(50.0) == pytest.approx(50.0)  # still loading, still paid
    fleet.finish(3600.0)
    assert fleet.totals.replica_seconds == pytest.approx(3600.0)
    assert fleet.price_per_replica_hour == pytest.approx(0.25)


def test_warm_replicas_are_ready_at_once() -> None:
    fleet, _ = _fleet()
    fleet.scale(3, 0.0, instant=True)
    assert len(fleet.ready(0.0)) == 3
    assert fleet.totals.cold_starts == 0


def test_scale_is_capped_at_max_replicas() -> None:
    fleet, _ = _fleet()
    fleet.scale(100, 0.0)
    assert fleet.desired == fleet.tier.max_replicas == 16


def test_scale_down_drops_starting_replicas_before_ready_ones() -> None:
    fleet, _ = _fleet()
    fleet.scale(2, 0.0, instant=True)
    fleet.scale(3, 10.0)  # one loading
    fleet.scale(2, 20.0)
    assert fleet.starting(20.0) == 0
    assert len(fleet.ready(20.0)) == 2
    # The loading one is gone at once: paid for 10 s only.
    fleet.finish(20.0)
    assert fleet.totals.replica_seconds == pytest.approx(2 * 20.0 + 10.0)


def test_a_removed_ready_replica_finishes_its_requests_first() -> None:
    fleet, recorder = _fleet()
    fleet.scale(1, 0.0, instant=True)
    replica = fleet.replicas[0]
    replica.engine.enqueue(0, 0.0)
    fleet.scale(0, 0.1)
    assert fleet.draining == [replica]
    fleet.advance(100.0)
    assert fleet.draining == []
    assert recorder.fate[0] == Fate.COMPLETED
    assert 0.1 < fleet.totals.replica_seconds < 100.0


def test_a_removed_replica_out_of_drain_time_cuts_what_it_holds_and_leaves() -> None:
    fleet, recorder = _fleet(drain_seconds=0.0)
    fleet.scale(1, 0.0, instant=True)
    replica = fleet.replicas[0]
    replica.engine.enqueue(0, 0.0)  # 100 tokens to decode: not done by t=1
    replica.engine.enqueue(1, 0.9)
    fleet.scale(0, 1.0)
    fleet.advance(1.5)
    assert fleet.draining == []
    assert recorder.fate[[0, 1]].tolist() == [Fate.CUT, Fate.CUT]
    assert recorder.cut_cause[[0, 1]].tolist() == [CutCause.DRAIN_TIMEOUT] * 2
    assert fleet.totals.replica_seconds == pytest.approx(1.0)  # paid up to the deadline


def test_a_removed_replica_within_its_drain_time_cuts_nothing() -> None:
    fleet, recorder = _fleet(drain_seconds=60.0)
    fleet.scale(1, 0.0, instant=True)
    replica = fleet.replicas[0]
    replica.engine.enqueue(0, 0.0)
    replica.engine.enqueue(1, 0.9)
    fleet.scale(0, 1.0)
    fleet.advance(1.5)
    assert fleet.draining == [replica]  # still finishing, not cut yet
    fleet.advance(61.0)
    assert fleet.draining == []
    assert recorder.fate[[0, 1]].tolist() == [Fate.COMPLETED] * 2
    assert recorder.cut_cause[[0, 1]].tolist() == [CutCause.NONE] * 2
    assert fleet.totals.replica_seconds < 61.0  # left when done, not at the deadline


def test_the_run_s_end_does_not_extend_a_drain_time() -> None:
    fleet, recorder = _fleet(drain_seconds=0.5)
    fleet.scale(1, 0.0, instant=True)
    fleet.replicas[0].engine.enqueue(0, 0.0)
    fleet.scale(0, 1.0)
    fleet.finish(1.2)  # the deadline, 1.5, is after the end; the decode needs longer
    assert recorder.fate[0] == Fate.CUT
    assert recorder.cut_cause[0] == CutCause.DRAIN_TIMEOUT


def test_a_lost_node_kills_its_replica_which_restarts_cold_elsewhere() -> None:
    fleet, recorder = _fleet()
    fleet.scale(1, 0.0, instant=True)
    replica = fleet.replicas[0]
    replica.engine.enqueue(0, 0.0)  # decoding by t=1
    replica.engine.enqueue(1, 0.99)
    reroute = fleet.slot_down(replica.slot, 1.0)
    assert recorder.fate[0] == Fate.CUT
    assert recorder.cut_cause[0] == CutCause.NODE_LOST
    assert reroute == [1]
    assert fleet.totals.preempted == 1
    assert fleet.desired == 1
    assert fleet.ready(1.0) == []  # the replacement loads the model again
    assert fleet.totals.cold_starts == 1


def test_without_a_node_left_the_replica_is_unschedulable_until_one_comes_back() -> None:
    fleet, _ = _fleet()
    fleet.scale(1, 0.0, instant=True)
    for slot in range(1, fleet.tier.max_replicas):
        fleet.slot_down(slot, 0.5)
    fleet.slot_down(0, 1.0)
    assert fleet.pending == 1
    assert fleet.replicas == []
    fleet.slot_up(3, 600.0)
    assert fleet.pending == 0
    assert fleet.starting(600.0) == 1


def test_node_loss_is_seeded_and_follows_the_mean_uptime() -> None:
    preemption = Preemption(mean_up_seconds=3600.0, mean_down_seconds=600.0)
    a = slot_events(16, 36000.0, preemption, np.random.default_rng(1))
    b = slot_events(16, 36000.0, preemption, np.random.default_rng(1))
    assert a == b
    downs = [e for e in a if not e[2]]
    # 16 nodes over 10 hours, up an hour then down 10 minutes: about 137 losses.
    assert 100 < len(downs) < 180
    assert slot_events(16, 36000.0, Preemption(mean_up_seconds=0), np.random.default_rng(1)) == []


def test_replicas_added_count_decisions_not_the_warm_start_or_restarts() -> None:
    fleet, _ = _fleet()
    fleet.scale(2, 0.0, warm=True)
    fleet.scale(4, 30.0)  # +2
    fleet.scale(3, 60.0)
    fleet.scale(5, 90.0, instant=True)  # +2, Ready at once (the oracle's way)
    fleet.slot_down(fleet.replicas[0].slot, 100.0)  # restarted elsewhere: not a decision
    fleet.scale(100, 120.0)  # capped at maxReplicas (16): +11, one Pending (a node is gone)
    assert fleet.totals.added == 2 + 2 + 11
    assert fleet.totals.cold_starts == 2 + 1 + 10
    assert fleet.pending == 1


def test_warm_replicas_were_created_a_model_load_before_the_start() -> None:
    fleet, _ = _fleet()
    load = fleet.model.model_load_seconds
    fleet.scale(1, 0.0, warm=True)
    fleet.scale(2, 30.0)
    warm, cold = fleet.replicas
    assert (warm.created, warm.started, warm.ready_at) == (-load, 0.0, 0.0)
    assert (cold.created, cold.started, cold.ready_at) == (30.0, 30.0, 30.0 + load)
    assert fleet.replica_seconds(30.0) == pytest.approx(30.0)  # paid from t=0, not before


def test_a_notice_comes_its_length_before_the_loss_but_not_before_the_node_came_up() -> None:
    events = [(100.0, 0, False), (160.0, 0, True), (175.0, 0, False), (50.0, 1, False)]
    events.sort()
    assert node_changes(events, 0.0) == [
        (50.0, 1, NodeChange.DOWN, 50.0),
        (100.0, 0, NodeChange.DOWN, 100.0),
        (160.0, 0, NodeChange.UP, math.inf),
        (175.0, 0, NodeChange.DOWN, 175.0),
    ]
    assert node_changes(events, 30.0) == [
        (20.0, 1, NodeChange.NOTICE, 50.0),
        (50.0, 1, NodeChange.DOWN, 50.0),
        (70.0, 0, NodeChange.NOTICE, 100.0),
        (100.0, 0, NodeChange.DOWN, 100.0),
        (160.0, 0, NodeChange.UP, math.inf),
        (160.0, 0, NodeChange.NOTICE, 175.0),  # up 15 s only: noticed as it came up
        (175.0, 0, NodeChange.DOWN, 175.0),
    ]


def test_a_noticed_replica_drains_until_its_node_goes_while_its_replacement_starts() -> None:
    fleet, recorder = _fleet(drain_seconds=600.0)
    fleet.scale(1, 0.0, instant=True)
    noticed = fleet.replicas[0]
    noticed.engine.enqueue(0, 0.0)  # finishes within the notice
    fleet.slot_notice(noticed.slot, 0.5, down_at=60.0)
    assert fleet.replicas != [] and noticed not in fleet.replicas  # takes no new request
    assert fleet.draining == [noticed]
    assert fleet.desired == 1 and fleet.totals.cold_starts == 1  # replacement at once
    assert fleet.replicas[0].slot != noticed.slot
    assert fleet.totals.preempted == 1
    assert fleet.lost == [(0.5, f"rtx4090-{noticed.serial}")]  # the operator sees it leaving
    fleet.advance(59.0)
    assert recorder.fate[0] == Fate.COMPLETED
    assert fleet.draining == []
    assert fleet.slot_down(noticed.slot, 60.0) == []
    assert fleet.totals.preempted == 1  # counted once, at the notice
    assert len(fleet.lost) == 1


def test_what_a_noticed_replica_still_decodes_when_its_node_goes_is_cut_as_node_lost() -> None:
    fleet, recorder = _fleet(drain_seconds=600.0)
    fleet.scale(1, 0.0, instant=True)
    noticed = fleet.replicas[0]
    noticed.engine.enqueue(0, 0.0)  # 100 tokens: still decoding at t=1
    fleet.slot_notice(noticed.slot, 0.5, down_at=1.0)
    fleet.advance(0.9)
    fleet.slot_down(noticed.slot, 1.0)
    assert recorder.fate[0] == Fate.CUT
    assert recorder.cut_cause[0] == CutCause.NODE_LOST
    assert fleet.totals.preempted == 1
