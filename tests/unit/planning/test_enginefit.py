"""The replica model fitted on the engine at steady state (gpufleet.planning.enginefit)."""

from __future__ import annotations

import math

import pytest

from gpufleet.api.types import ModelSpec, PerformanceModel, Tier
from gpufleet.perf.models import model
from gpufleet.planning.capacity import Fit, ReplicaModel
from gpufleet.planning.derived import NotDerivable
from gpufleet.planning.enginefit import engine_fit
from gpufleet.planning.fitting import MAX_STEADY_RHO, MeasuredPoint, fit_at_most
from gpufleet.planning.profiles import ProfileNotFound, replica_model

LLAMA_8B = "meta-llama/Meta-Llama-3-8B-Instruct"
ENGINE = PerformanceModel.ENGINE


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
    fitted = engine_fit("RTX4090", model(LLAMA_8B), 1, 208.0, 215.0)
    replica = fitted.model
    assert 0 < replica.fit.saturation_rps <= fitted.sustained_rps
    assert len(fitted.errors()) >= 4  # most points lie below the fitted saturation
    assert max(abs(e) for e in fitted.errors()) < 0.15
    assert not replica.measured and "gpufleet.perf" in replica.source
    # Prefill from the engine's step time: a part of the zero-load P99, not all of it.
    assert 0 < replica.prefill_seconds < replica.fit.ttft_base_seconds
    # vLLM 0.8.5's defaults on a 24 GB card, as the io.net runs had.
    assert (replica.max_batched_tokens, replica.max_running) == (2048, 256)


def test_engine_fit_refuses_what_it_cannot_model() -> None:
    with pytest.raises(NotDerivable, match="no-such-gpu"):
        engine_fit("no-such-gpu", model(LLAMA_8B), 1, 208.0, 215.0)
    with pytest.raises(NotDerivable, match="no room"):
        engine_fit("RTX4090", model("meta-llama/Meta-Llama-3-70B-Instruct"), 1, 208.0, 215.0)


def _tier(**fields: object) -> Tier:
    body: dict[str, object] = {
        "name": "t",
        "accelerator": "RTX4090",
        "minReplicas": 0,
        "maxReplicas": 1,
        "pricePerGPUHour": "0.25",
    }
    body.update(fields)
    return Tier.model_validate(body)


def test_an_engine_tier_runs_its_card_model_and_vllm_settings() -> None:
    spec = ModelSpec.model_validate({"name": LLAMA_8B, "extraArgs": ["--max-num-seqs=64"]})
    capped = replica_model(_tier(), spec, ENGINE)
    # vLLM 0.33's token budget on a 24 GB card, and the pool's own cap on running requests.
    assert (capped.max_batched_tokens, capped.max_running) == (2048, 64)
    default = replica_model(_tier(), ModelSpec(name=LLAMA_8B), ENGINE)
    assert default.max_running == 256
    assert capped.fit.saturation_rps < default.fit.saturation_rps  # fewer requests at once
    assert not default.measured and "gpufleet.perf at steady state" in default.source
    assert default.watts == 450.0 and default.model_load_seconds > 60.0


def test_an_h100s_engine_model_holds_the_load_its_profile_understates() -> None:
    h100 = _tier(accelerator="H100-PCIe-80GB", pricePerGPUHour="2.00")
    spec = ModelSpec(name=LLAMA_8B)
    profiled = replica_model(h100, spec)
    engine = replica_model(h100, spec, ENGINE)
    # The profile's saturation is the completed rate of 200-request runs (14.7 req/s); the
    # engine's steady stream of new prompts drains up to about 50 (BENCHMARKS.md).
    ratio = engine.saturation_rps(208, 215) / profiled.saturation_rps(208, 215)
    assert 2.5 < ratio < 5.0
    # ... and reads a higher zero-load P99: no prompt found in the prefix cache.
    assert engine.ttft_base_seconds(208) > profiled.ttft_base_seconds(208)


def test_an_engine_tier_says_what_it_needs() -> None:
    # A model of unknown shape keeps its pool serving on the profile, and says why.
    unknown = replica_model(_tier(), ModelSpec(name="acme/unlisted-8B"), ENGINE)
    assert unknown.source.endswith("sized on this profile until it is set")
    assert "spec.model.architecture" in unknown.source and "/engine/" not in unknown.name
    with pytest.raises(ProfileNotFound, match="no room"):
        replica_model(_tier(), ModelSpec(name="meta-llama/Meta-Llama-3-70B-Instruct"), ENGINE)
    # The tier's own measured points win over either model.
    points = {
        "promptTokens": 200,
        "outputTokens": 200,
        "points": [
            {"requestsPerSecond": "1", "tokensPerSecond": 400, "ttftP99Milliseconds": 90},
            {"requestsPerSecond": "4", "tokensPerSecond": 1600, "ttftP99Milliseconds": 120},
        ],
    }
    own = replica_model(_tier(profile=points), ModelSpec(name=LLAMA_8B), ENGINE)
    assert own.source.startswith("tiers[t].profile")


def test_a_custom_datasheet_tier_runs_on_its_nearest_measured_cards_efficiencies() -> None:
    sheet = {
        "bf16TFLOPS": 165,
        "fp8TFLOPS": 330,
        "memoryBandwidthGBps": 1008,
        "memoryGiB": 24,
        "boardPowerWatts": 450,
        "pcieGeneration": 4,
        "peerToPeer": False,
    }
    spec = ModelSpec(name=LLAMA_8B)
    custom = replica_model(_tier(accelerator="Custom", gpu=sheet), spec, ENGINE)
    rtx = replica_model(_tier(), spec, ENGINE)
    # An RTX 4090's datasheet as a Custom card: the 4090's fitted efficiencies, so the same
    # replica within the datasheets' rounding.
    assert custom.fit.saturation_rps == pytest.approx(rtx.fit.saturation_rps, rel=0.05)
    assert custom.name.startswith("Custom/engine")
