"""What a plan's weights send each tier, for the queue watch's levels after a pass."""

from __future__ import annotations

import pytest

from gpufleet.api.status import Reason
from gpufleet.planning.records import ClassDemand, ClassPlan, Plan
from gpufleet.planning.routing import prompt_tokens_sent


def _plan(weights: dict[str, dict[str, int]]) -> Plan:
    classes = {name: ClassPlan(name=name, weights=w) for name, w in weights.items()}
    return Plan({}, classes, Reason.OBJECTIVES_MET, "", 0.0, None, None, None)


def test_each_class_demand_is_split_over_tiers_by_its_weights() -> None:
    plan = _plan(
        {
            "realtime": {"h100": 100},
            "batch": {"h100": 25, "rtx4090": 75, "l40s": 0},
            "bulk": {"rtx4090": 100},  # no measured demand: counts for nothing
            "idle": {},  # sent nowhere
        }
    )
    demand = {
        "realtime": ClassDemand(1000.0, 50.0),
        "batch": ClassDemand(4000.0, 800.0),
        "bulk": None,
        "idle": ClassDemand(10.0, 1.0),
    }
    sent = prompt_tokens_sent(demand, plan)
    assert sent == pytest.approx({"h100": 2000.0, "rtx4090": 3000.0})
