"""tools/bench_daily.py: attainment in a window and the fleet after a moment, on a made-up run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from tools.bench_daily import DAYS, command, ready_after, spent
from tools.bench_daily import attainment as attained

from gpufleet.sim.metrics import Fate

pytestmark = pytest.mark.timeout(5)


def _run() -> Any:
    return SimpleNamespace(
        arrival_seconds=np.array([10.0, 20.0, 30.0, 40.0, 50.0]),
        class_of=np.array([0, 0, 0, 1, 0]),
        ttft=np.array([0.5, 3.0, 0.2, 0.1, np.nan]),
        fate=np.array([Fate.COMPLETED, Fate.COMPLETED, Fate.CUT, Fate.COMPLETED, Fate.DROPPED]),
        timeline=SimpleNamespace(
            time=[0.0, 30.0, 60.0], ready={"h100": [1, 2, 3]}, cost=[0.0, 1.0, 4.0]
        ),
    )


def test_a_window_counts_cut_and_dropped_requests_as_misses() -> None:
    run = _run()
    # Class 0 in [0, 60): 0.5 s met, 3 s missed, cut after 0.2 s missed, dropped missed.
    assert attained(run, 0, 2.0, 0.0, 60.0) == pytest.approx(0.25)
    assert attained(run, 0, 2.0, 15.0, 25.0) == 0.0
    assert attained(run, 1, 2.0, 0.0, 60.0) == 1.0
    assert np.isnan(attained(run, 1, 2.0, 0.0, 30.0))


def test_the_fleet_after_a_moment_is_the_next_decision_s() -> None:
    run = _run()
    assert ready_after(run, 1.0) == {"h100": 2}
    assert ready_after(run, 30.0) == {"h100": 2}
    assert ready_after(run, 999.0) == {"h100": 3}


def test_the_command_replays_whole_days_of_the_workday_load() -> None:
    argv = command(1)
    assert argv[argv.index("--trace") + 1] == "synthetic:workday"
    assert float(argv[argv.index("--duration") + 1]) == DAYS * 86400
    assert argv[argv.index("--seed") + 1] == "1"


def test_a_day_s_dollars_come_from_the_running_total() -> None:
    run = _run()
    assert spent(run, 0.0, 60.0) == pytest.approx(4.0)
    assert spent(run, 30.0, 45.0) == pytest.approx(1.5)
