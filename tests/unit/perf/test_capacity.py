"""`gpufleet.perf.capacity`: capacity is what a replica sustains, not what a short run hides."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.perf.calibration import calibration
from gpufleet.perf.capacity import capacity_rps, p99_ttft_seconds, sustained_rps
from gpufleet.perf.engine import simulate
from gpufleet.perf.hardware import gpu
from gpufleet.perf.models import model
from gpufleet.perf.roofline import Replica
from gpufleet.perf.workload import poisson_arrivals, sharegpt_lengths

pytestmark = pytest.mark.timeout(60)
PROMPT, OUTPUT = 206.0, 202.0


def _replica() -> Replica:
    card = gpu("RTX4090")
    return Replica(
        card, model("meta-llama/Meta-Llama-3-8B-Instruct"), 1, calibration(card.name).efficiency
    )


def test_a_rate_above_the_sustained_throughput_builds_a_queue_a_short_run_hides() -> None:
    replica = _replica()
    sustained = sustained_rps(replica, PROMPT, OUTPUT)
    over = 1.2 * sustained
    # A 200-request benchmark run ends before the queue grows much; 90 s of arrivals do not.
    arrivals, _ = poisson_arrivals(over, 200)
    prompts, outputs = sharegpt_lengths(200, PROMPT, OUTPUT)
    short = float(np.percentile(simulate(replica, arrivals, prompts, outputs).ttft, 99))
    steady = p99_ttft_seconds(replica, over, PROMPT, OUTPUT)
    assert steady > 2.0 > short, (short, steady)


def test_capacity_never_exceeds_the_sustained_throughput() -> None:
    replica = _replica()
    sustained = sustained_rps(replica, PROMPT, OUTPUT)
    loose = capacity_rps(replica, 60.0, PROMPT, OUTPUT)
    tight = capacity_rps(replica, 0.2, PROMPT, OUTPUT)
    assert 0 < tight < loose <= sustained, (tight, loose, sustained)
    assert p99_ttft_seconds(replica, tight, PROMPT, OUTPUT) <= 0.2
