"""The replica model fitted on the engine at steady state (gpufleet.planning.enginefit)."""

from __future__ import annotations

import math

import pytest

from gpufleet.planning.capacity import Fit, ReplicaModel
from gpufleet.planning.enginefit import engine_fit
from gpufleet.planning.fitting import MAX_STEADY_RHO, MeasuredPoint, fit_at_most

LLAMA_8B = "meta-llama/Meta-Llama-3-8B-Instruct"


def _points(fit: Fit, rates: list[float]) -> list[MeasuredPoint]:
    model = ReplicaModel(
        name="t",
        fit=fit,
        prompt_tokens=200.0,
        output_tokens=200.0,
        prefill_seconds=0.01,
        gpus=1,
        watts=None,
        model_load_seconds=0.0,
    )
    return [
        MeasuredPoint(r, r, model.ttft_p99_seconds(r, 200.0, 200.0), r * 400.0, None) for r in rates
    ]


def test_fit_at_most_recovers_a_known_curve() -> None:
    truth = Fit(
        saturation_rps=10.0,
        sharpness=8.0,
        ttft_base_seconds=0.05,
        ttft_queue_seconds=0.02,
        ttft_queue_exponent=1.3,
    )
    fit = fit_at_most(_points(truth, [0.2, 2.5, 5.0, 7.0, 8.5, 9.5]), 14.0, 8.0)
    assert fit.saturation_rps == pytest.approx(10.0, rel=0.02)
    assert fit.ttft_base_seconds == pytest.approx(0.05, rel=0.05)
    assert fit.ttft_queue_exponent == pytest.approx(1.3, rel=0.05)


def test_fit_at_most_reads_a_growing_queue_as_saturated() -> None:
    truth = Fit(
        saturation_rps=10.0,
        sharpness=8.0,
        ttft_base_seconds=0.05,
        ttft_queue_seconds=0.02,
        ttft_queue_exponent=1.0,
    )
    points = _points(truth, [0.2, 2.5, 5.0, 7.0, 8.5])
    # A stream above saturation, below the backlog's throughput: its queue grew for the
    # whole 90 s it ran: read at utilization MAX_STEADY_RHO at most, so the saturation lands
    # between the last point below and that one's rate / MAX_STEADY_RHO.
    points.append(MeasuredPoint(11.0, 11.0, 15.0, 4400.0, None))
    fit = fit_at_most(points, 12.0, 8.0)
    assert 8.5 < fit.saturation_rps <= 11.0 / MAX_STEADY_RHO * (1 + 1e-6)
    assert fit.ttft_base_seconds == pytest.approx(0.05, rel=0.1)
    # Held at most the ceiling, and refused with nothing finite to fit.
    assert fit_at_most(points, 9.0, 8.0).saturation_rps <= 9.0
    with pytest.raises(ValueError, match="finite"):
        fit_at_most([MeasuredPoint(1.0, 1.0, math.inf, 400.0, None)], 9.0, 8.0)


def test_engine_fit_of_an_rtx_4090_follows_the_engine() -> None:
    fitted = engine_fit("RTX4090", LLAMA_8B, 1, 208.0, 215.0)
    model = fitted.model
    assert 0 < model.fit.saturation_rps <= fitted.sustained_rps
    assert len(fitted.errors()) >= 4  # most points lie below the fitted saturation
    assert max(abs(e) for e in fitted.errors()) < 0.15
    assert not model.measured and "gpufleet.perf" in model.source
    # Prefill from the engine's step time: a part of the zero-load P99, not all of it.
    assert 0 < model.prefill_seconds < model.fit.ttft_base_seconds


def test_engine_fit_refuses_what_it_cannot_model() -> None:
    with pytest.raises(KeyError):
        engine_fit("RTX4090", "no-such/model", 1, 208.0, 215.0)
    with pytest.raises(ValueError, match="no room"):
        engine_fit("RTX4090", "meta-llama/Meta-Llama-3-70B-Instruct", 1, 208.0, 215.0)
