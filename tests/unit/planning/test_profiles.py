"""Profiles and the replica model against the io.net measurements they come from."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.api.types import Accelerator, ModelSpec
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.fitting import BuiltinProfile
from gpufleet.planning.profile_data import PROFILES
from gpufleet.planning.profiles import (
    ProfileNotFound,
    replica_model,
    size_class,
)
from gpufleet.sim.replica import engine_params
from tests.pools import SHARED_DATA
from tests.unit.planning.factories import LLAMA_8B, tier_spec

pytestmark = pytest.mark.timeout(2)

DATA = SHARED_DATA / "iog-llm-inference-benchmarks"
FIT_TOLERANCE = 0.25  # stated in gpufleet.planning.fitting; max seen on kept points: 24.5%


def _key(p: BuiltinProfile) -> str:
    return f"{p.accelerator}/{p.size_class}/x{p.gpus}"


def _model(p: BuiltinProfile) -> ReplicaModel:
    name = {"1.5B": "m-1.5B", "8B": "m-8B", "14B": "m-14B", "32B": "m-32B", "70B": "m-70B"}
    tier = tier_spec(accelerator=p.accelerator, gpus_per_replica=p.gpus)
    return replica_model(tier, ModelSpec(name=name[p.size_class]))


KEPT = [
    pytest.param(p, i, id=f"{_key(p)}@{pt.offered_rps:g}rps")
    for p in PROFILES
    for i, pt in enumerate(p.points)
    if p.errors[i].excluded is None
]


@pytest.mark.parametrize(("profile", "index"), KEPT)
def test_model_reproduces_measured_p99_ttft(profile: BuiltinProfile, index: int) -> None:
    point = profile.points[index]
    model = _model(profile)
    predicted = model.ttft_p99_seconds(
        point.served_rps, profile.prompt_tokens, profile.output_tokens
    )
    assert predicted == pytest.approx(point.ttft_p99_seconds, rel=FIT_TOLERANCE)


@pytest.mark.parametrize(("profile", "index"), KEPT)
def test_model_reproduces_measured_tokens_per_second(profile: BuiltinProfile, index: int) -> None:
    point = profile.points[index]
    model = _model(profile)
    shape = (profile.prompt_tokens, profile.output_tokens)
    tokens = model.tokens_per_second(model.served_rps(point.offered_rps, *shape), *shape)
    assert tokens == pytest.approx(point.tokens_per_second, rel=FIT_TOLERANCE)


@pytest.mark.parametrize(("profile", "index"), KEPT)
def test_model_reproduces_measured_tpot(profile: BuiltinProfile, index: int) -> None:
    point = profile.points[index]
    assert point.tpot_seconds is not None
    model = _model(profile)
    tpot = model.tpot_seconds(point.served_rps, profile.prompt_tokens, profile.output_tokens)
    assert tpot == pytest.approx(point.tpot_seconds, rel=FIT_TOLERANCE)


def test_errors_written_in_the_table_are_the_models() -> None:
    for p in PROFILES:
        model = _model(p)
        for point, error in zip(p.points, p.errors, strict=True):
            ttft = model.ttft_p99_seconds(point.served_rps, p.prompt_tokens, p.output_tokens)
            assert ttft / point.ttft_p99_seconds - 1 == pytest.approx(error.ttft_p99, abs=0.002)


def test_only_a_few_points_are_excluded_and_never_a_single_gpu_one() -> None:
    excluded = [(p, e) for p in PROFILES for e in p.errors if e.excluded]
    assert len(excluded) <= 14
    assert all(p.gpus > 1 for p, _ in excluded), [(_key(p), e.offered_rps) for p, e in excluded]


@pytest.mark.timeout(60)
def test_table_is_what_the_script_derives_from_the_data() -> None:
    from tools.derive_profiles import derive, differences, load_runs

    assert differences(PROFILES, tuple(derive(load_runs(DATA)))) == [], (
        "run tools/derive_profiles.py"
    )


@pytest.mark.timeout(60)
def test_the_staleness_check_sees_one_edited_p99(tmp_path: Path) -> None:
    """The check compares within tolerances, yet one run's P99 edited by 3% makes it fail."""
    from tools.derive_profiles import main

    for path in DATA.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    assert main(["--data", str(tmp_path), "--check", "--quiet"]) == 0

    name = "vllm_200prompts16qps_Meta-Llama-3-8B-Instruct_sharegpt_1xNVIDIA-GeForce-RTX-4090.json"
    run = json.loads((tmp_path / name).read_text().splitlines()[0])
    run["p99_ttft_ms"] *= 1.03
    (tmp_path / name).write_text(json.dumps(run) + "\n")
    assert main(["--data", str(tmp_path), "--check", "--quiet"]) == 1


def test_the_check_tolerates_fit_noise_but_not_a_changed_fit() -> None:
    from tools.derive_profiles import FIT_RELATIVE_TOLERANCE, differences

    profile = PROFILES[0]
    fit = profile.fit

    def with_sharpness(factor: float) -> tuple[BuiltinProfile, ...]:
        moved = dataclasses.replace(fit, sharpness=fit.sharpness * factor)
        return (dataclasses.replace(profile, fit=moved), *PROFILES[1:])

    assert differences(PROFILES, with_sharpness(1 + 1e-6)) == []
    assert differences(PROFILES, with_sharpness(1 + 3 * FIT_RELATIVE_TOLERANCE)) != []


# -- the numbers the design rests on, from the raw files ------------------------------------


def _run(gpu: str, rate: int) -> dict[str, Any]:
    path = DATA / f"vllm_200prompts{rate}qps_Meta-Llama-3-8B-Instruct_sharegpt_1x{gpu}.json"
    run: dict[str, Any] = json.loads(Path(path).read_text().splitlines()[0])
    return run


@pytest.mark.parametrize(
    ("accelerator", "gpu", "price", "headline"),
    [
        pytest.param("RTX4090", "NVIDIA-GeForce-RTX-4090", 0.25, 0.024, id="rtx4090@16rps"),
        pytest.param("H100-PCIe-80GB", "NVIDIA-H100-PCIe", 2.00, 0.134, id="h100@16rps"),
    ],
)
def test_cost_per_million_tokens_matches_the_raw_runs(
    accelerator: str, gpu: str, price: float, headline: float
) -> None:
    run = _run(gpu, 16)
    raw = price / (run["total_token_throughput"] * 3600) * 1e6
    assert raw == pytest.approx(headline, rel=0.05)  # the README's headline, re-checked
    model = replica_model(tier_spec(accelerator=accelerator), LLAMA_8B)
    shape = (run["total_input_tokens"] / 200, run["total_output_tokens"] / 200)
    completed = model.served_rps(16.0, *shape)
    assert model.cost_per_million_tokens(price, completed, *shape) == pytest.approx(raw, rel=0.20)


def test_rtx4090_is_not_eligible_for_100ms_but_h100_is() -> None:
    rtx = replica_model(tier_spec(accelerator="RTX4090"), LLAMA_8B)
    h100 = replica_model(tier_spec(accelerator="H100-PCIe-80GB"), LLAMA_8B)
    assert rtx.capacity_rps(0.100, 206, 202) == 0.0
    assert not rtx.eligible(0.100, 206, 202)
    assert h100.capacity_rps(0.100, 206, 202) > 10.0
    # At 2 s both are eligible and a 4090 token is cheaper by far.
    rtx_cost = 0.25 / rtx.capacity_rps(2.0, 206, 202)
    h100_cost = 2.00 / h100.capacity_rps(2.0, 206, 202)
    assert rtx_cost < h100_cost / 3


# -- request shape --------------------------------------------------------------------------


@pytest.mark.parametrize("accelerator", ["RTX4090", "H100-PCIe-80GB"])
def test_long_prompts_raise_ttft_and_lower_capacity(accelerator: str) -> None:
    model = replica_model(tier_spec(accelerator=accelerator), LLAMA_8B)
    assert model.ttft_base_seconds(1000) > model.ttft_base_seconds(200) * 1.5
    assert model.ttft_p99_seconds(2.0, 1000, 200) > model.ttft_p99_seconds(2.0, 200, 200)
    assert model.capacity_rps(2.0, 1000, 200) < 0.7 * model.capacity_rps(2.0, 200, 200)
    assert model.saturation_rps(200, 800) < model.saturation_rps(200, 200)


def test_prompt_length_can_make_a_tier_ineligible() -> None:
    model = replica_model(tier_spec(accelerator="RTX4090"), LLAMA_8B)
    assert model.eligible(0.25, 200, 200)
    assert not model.eligible(0.25, 1000, 200)


# -- properties -----------------------------------------------------------------------------

MODELS = [_model(p) for p in PROFILES]
shapes = st.tuples(st.integers(20, 4000), st.integers(10, 2000))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(MODELS), shapes, st.floats(0.01, 5.0), st.floats(0.0, 1.0))
@pytest.mark.timeout(20)
def test_capacity_holds_the_objective_and_p99_grows_with_rate(
    model: ReplicaModel, shape: tuple[int, int], objective: float, fraction: float
) -> None:
    capacity = model.capacity_rps(objective, *shape)
    if capacity > 0:
        assert model.ttft_p99_seconds(capacity, *shape) <= objective * (1 + 1e-9)
        below = capacity * fraction
        assert model.ttft_p99_seconds(below, *shape) <= model.ttft_p99_seconds(capacity, *shape)
    assert model.capacity_rps(objective * 1.5, *shape) >= capacity
    assert model.capacity_rps(objective, *shape) < model.saturation_rps(*shape)
    assert math.isinf(model.ttft_p99_seconds(model.saturation_rps(*shape) * 1.000001, *shape))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(MODELS), shapes, st.floats(0.3, 1.0))
@pytest.mark.timeout(20)
def test_a_lower_capacity_factor_never_raises_capacity(
    model: ReplicaModel, shape: tuple[int, int], factor: float
) -> None:
    slower = model.with_capacity_factor(factor)
    assert slower.capacity_rps(1.0, *shape) <= model.capacity_rps(1.0, *shape) + 1e-12
    assert slower.saturation_rps(*shape) == pytest.approx(model.saturation_rps(*shape) * factor)


# -- lookup ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("billions", "expected"), [(1.5, "1.5B"), (7, "8B"), (9, "8B"), (13, "14B"), (72, "70B")]
)
def test_size_class_is_nearest_by_ratio(billions: float, expected: str) -> None:
    assert size_class(billions) == expected


def test_h100_sxm_is_moved_from_pcie_and_never_claims_measured() -> None:
    sxm = replica_model(tier_spec(accelerator="H100-SXM-80GB"), LLAMA_8B)
    pcie = replica_model(tier_spec(accelerator="H100-PCIe-80GB"), LLAMA_8B)
    assert not sxm.measured and pcie.measured
    assert "derived by gpufleet.perf from" in sxm.source and "H100-PCIe" in sxm.source
    # More bandwidth and compute than the PCIe card (1.7x and 1.3x on the datasheets, on
    # the PCIe's fitted efficiencies both): more capacity, never less.
    assert sxm.capacity_rps(0.1, 200, 200) > 1.2 * pcie.capacity_rps(0.1, 200, 200)
    assert (sxm.watts, pcie.watts) == (700.0, 350.0)


def test_more_gpus_than_measured_falls_back_to_fewer_and_says_so() -> None:
    model = replica_model(tier_spec(accelerator="H100-PCIe-80GB", gpus_per_replica=2), LLAMA_8B)
    assert "extra GPUs not credited" in model.source
    assert model.watts == 700.0  # two GPUs draw power even if not credited with speed


@pytest.mark.parametrize(
    ("accelerator", "gpus", "model", "hint"),
    [
        pytest.param("RTX4090", 1, "Qwen/Qwen2.5-32B", "do not fit", id="32B-on-one-4090"),
        pytest.param("RTX4090", 4, "Qwen/Qwen2.5-32B", "no built-in profile", id="32B-on-4x4090"),
        pytest.param(
            "H100-PCIe-80GB",
            3,
            "meta-llama/Meta-Llama-3-8B-Instruct",
            r"refuses --tensor-parallel-size 3: its 32 attention heads do not divide by 3; "
            r"1 or 2 or 4 or 8 GPUs per replica would run; set gpusPerReplica",
            id="8B-on-3xH100-heads",
        ),
        pytest.param(
            "H100-PCIe-80GB",
            5,
            "Qwen/Qwen2.5-14B-Instruct",
            r"its 8 key/value heads do not split evenly over 5",
            id="14B-on-5xH100-kv-heads",
        ),
    ],
)
def test_missing_profile_says_what_to_set(
    accelerator: str, gpus: int, model: str, hint: str
) -> None:
    with pytest.raises(ProfileNotFound, match=hint):
        replica_model(
            tier_spec(accelerator=accelerator, gpus_per_replica=gpus), ModelSpec(name=model)
        )


def test_spec_profile_overrides_and_is_fitted_to_its_points() -> None:
    measured = [(1, 60, 1000), (4, 70, 3900), (8, 150, 7000)]  # req/s, P99 ms, tokens/s
    points = [
        {"requestsPerSecond": str(r), "ttftP99Milliseconds": p99, "tokensPerSecond": tokens}
        for r, p99, tokens in measured
    ]
    tier = tier_spec(
        accelerator=Accelerator.CUSTOM.value,
        profile={"points": points, "promptTokens": 500, "outputTokens": 500, "wattsPerGpu": 300},
    )
    model = replica_model(tier, LLAMA_8B)
    assert model.source.startswith("tiers[t].profile")
    assert model.watts == 300.0
    for _, p99, tokens in measured:
        predicted = model.ttft_p99_seconds(tokens / 1000, 500, 500)
        assert predicted == pytest.approx(p99 / 1000, rel=FIT_TOLERANCE)


def test_a_tier_s_engine_runs_vllm_s_budget_for_its_card_and_the_pool_s_flags() -> None:
    h100 = replica_model(tier_spec(accelerator="H100-PCIe-80GB"), LLAMA_8B)
    rtx = replica_model(tier_spec(accelerator="RTX4090"), LLAMA_8B)
    assert (h100.max_batched_tokens, h100.max_running) == (8192, 1024)
    assert (rtx.max_batched_tokens, rtx.max_running) == (2048, 256)
    flagged = LLAMA_8B.model_copy(update={"extra_args": ["--max-num-batched-tokens=512"]})
    assert replica_model(tier_spec(accelerator="H100-PCIe-80GB"), flagged).max_batched_tokens == 512
    # The simulator's engine takes them (`sim.replica.engine_params`).
    assert engine_params(h100).max_batched_tokens == 8192
    assert engine_params(rtx).max_running == 256
