"""tools/bench_model.py: the note a run gets when its replay drains too soon, on made-up rows."""

from __future__ import annotations

import pytest
from tools.bench_model import DRAIN_NOTE, _cause, _drain_tokens, _why

from gpufleet.perf.ionet import Run
from gpufleet.perf.validate import Row
from gpufleet.perf.workload import poisson_arrivals

pytestmark = pytest.mark.timeout(5)

RATE, PROMPTS, OUTPUT = 16.0, 200, 23634
TPOT_MS = 20.0


def row(measured_drain: float, replayed_drain: float) -> Row:
    """A run whose last response came `measured_drain` tokens of decode (at its median
    TPOT) after the client's last sleep, and a replay that drains `replayed_drain`."""
    arrivals, sleep = poisson_arrivals(RATE, PROMPTS)
    start = float(arrivals[-1]) + sleep
    duration = start + measured_drain * TPOT_MS / 1e3
    replayed = start + replayed_drain * TPOT_MS / 1e3
    run = Run(
        file="vllm_200prompts16qps_some-model_sharegpt_1xNVIDIA-H100-PCIe.json",
        line=1,
        gpu="NVIDIA-H100-PCIe",
        gpus=1,
        model="org/some-model",
        rate=RATE,
        num_prompts=PROMPTS,
        total_input=40000,
        total_output=OUTPUT,
        duration=duration,
        measured={
            "p99TtftMs": 50.0,
            "medianTtftMs": 40.0,
            "medianTpotMs": TPOT_MS,
            "outputTokensPerSecond": OUTPUT / duration,
        },
    )
    predicted = {**run.measured, "outputTokensPerSecond": OUTPUT / replayed}
    return Row(run, predicted, preemptions=0, kv_tokens=100_000)


def test_a_replay_that_drains_far_sooner_says_so() -> None:
    short = row(measured_drain=600, replayed_drain=300)
    measured, replayed = _drain_tokens(short) or (0.0, 0.0)
    assert measured == pytest.approx(600) and replayed == pytest.approx(300)
    assert short.error("outputTokensPerSecond") > 0.1
    why = _why(short)
    assert why.startswith(DRAIN_NOTE)
    assert "600 tokens of decode after the client's last sleep, in the replay 300" in why
    assert "drawn at the run's mean (118 tokens)" in why
    assert _cause(short) == "output tokens/s off, the run's last outputs longer than the draw's"


def test_a_replay_that_drains_about_as_long_has_no_such_note() -> None:
    assert _why(row(measured_drain=600, replayed_drain=500)) == ""  # within 10%: nothing to say
    close = row(measured_drain=2000, replayed_drain=1500)  # off by more, but not its drain
    assert close.error("outputTokensPerSecond") > 0.1
    assert DRAIN_NOTE not in _why(close)
