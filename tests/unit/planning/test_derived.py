"""Profiles of GPU types io.net never measured: a measured row moved by gpufleet.perf."""

from __future__ import annotations

import pytest

from gpufleet.api.status import InferencePoolStatus, Reason
from gpufleet.api.types import Accelerator, InferencePool, ModelSpec
from gpufleet.desired.status import RoutingState, build_status
from gpufleet.perf.models import model
from gpufleet.planning.derived import NotDerivable, engine_numbers, move
from gpufleet.planning.planner import plan
from gpufleet.planning.profile_data import PROFILES
from gpufleet.planning.profiles import ProfileNotFound, replica_model
from tests.pools import pool, tier
from tests.unit.planning.factories import LLAMA_8B, batch, observe, realtime, tier_spec

pytestmark = pytest.mark.timeout(30)

SHAPE = (208.0, 215.0)
LLAMA = "meta-llama/Meta-Llama-3-8B-Instruct"
# Qwen/Qwen2.5-7B-Instruct's config.json.
QWEN_7B = {
    "numHiddenLayers": 28,
    "hiddenSize": 3584,
    "numAttentionHeads": 28,
    "numKeyValueHeads": 4,
    "intermediateSize": 18944,
    "vocabSize": 152064,
}


def _model(accelerator: str, gpus: int = 1, model: ModelSpec = LLAMA_8B):  # type: ignore[no-untyped-def]
    return replica_model(tier_spec(accelerator=accelerator, gpus_per_replica=gpus), model)


def _capacity(accelerator: str, objective: float = 2.0, gpus: int = 1) -> float:
    return _model(accelerator, gpus).capacity_rps(objective, *SHAPE)


def test_moving_a_row_onto_its_own_replica_changes_nothing() -> None:
    row = next(p for p in PROFILES if p.accelerator == "H100-PCIe-80GB" and p.size_class == "8B")
    arch = model(row.model)
    moved = move(
        row.fit,
        prompt=row.prompt_tokens,
        output=row.output_tokens,
        source=(row.accelerator, arch, 1),
        target=(row.accelerator, arch, 1),
    )
    assert moved.fit.saturation_rps == pytest.approx(row.fit.saturation_rps)
    assert moved.fit.ttft_base_seconds == pytest.approx(row.fit.ttft_base_seconds)
    assert moved.throughput_ratio == pytest.approx(1.0)


def test_faster_memory_and_compute_buy_capacity_in_datasheet_order() -> None:
    # Sustained decode is bandwidth-bound: H200 (4.8 TB/s) > H100 SXM (3.35) > H100 PCIe
    # (2.0, measured). The GDDR cards: L40S (48 GB, more KV room) and RTX 5090 (1.8 TB/s)
    # above the measured RTX 4090 (1.0 TB/s, 24 GB).
    h200, sxm, pcie = (_capacity(a) for a in ("H200-SXM-141GB", "H100-SXM-80GB", "H100-PCIe-80GB"))
    assert h200 > sxm > pcie
    l40s, r5090, r4090 = (_capacity(a) for a in ("L40S", "RTX5090", "RTX4090"))
    assert l40s > r4090 and r5090 > r4090


def test_every_derived_gpu_type_says_so_and_where_it_comes_from() -> None:
    measured = {Accelerator.H100_PCIE, Accelerator.RTX4090, Accelerator.CUSTOM}
    for accelerator in Accelerator:
        if accelerator in measured:
            continue
        model = _model(accelerator.value)
        assert not model.measured, accelerator
        assert "derived by gpufleet.perf from" in model.source
        assert "io.net" in model.source
        # No io.net run of these types: for the move, the engine runs them on the fitted
        # efficiencies of the measured card they are moved from, and says so.
        source_card = "H100-PCIe" if "H100-PCIe" in model.source else "RTX-4090"
        assert f"no runs of this GPU type: {source_card}'s fitted efficiencies" in model.source
        assert model.watts is not None and model.watts > 0


def test_the_engine_numbers_respect_the_datasheet() -> None:
    # A replica cannot decode faster than reading its weights once per step allows: an 8B
    # model's 16 GB at 3.35 TB/s is at least 4.8 ms a step, so per-request output time at
    # zero load is bounded below on an H100 SXM.
    numbers = engine_numbers("H100-SXM-80GB", model(LLAMA), 1, *SHAPE)
    assert numbers.idle_tpot_seconds >= 16.06e9 / 3.35e12
    assert 0 < numbers.throughput_rps < 1000
    assert not numbers.calibrated


def test_a_model_too_large_for_the_replica_is_refused_with_a_hint() -> None:
    with pytest.raises(ProfileNotFound, match="raise gpusPerReplica"):
        _model("L40S", 1, ModelSpec(name="meta-llama/Meta-Llama-3-70B-Instruct"))
    seventy = _model("L40S", 4, ModelSpec(name="meta-llama/Meta-Llama-3-70B-Instruct"))
    assert seventy.capacity_rps(2.0, *SHAPE) > 0


def test_an_unknown_gpu_is_not_derivable() -> None:
    with pytest.raises(NotDerivable, match="unknown accelerator"):
        engine_numbers("TPU-v5e", model(LLAMA), 1, *SHAPE)


def test_status_says_which_tier_runs_on_a_derived_profile() -> None:
    tiers = [
        tier("sxm", "H100-SXM-80GB", minReplicas=1),
        tier("rtx4090", "RTX4090", maxReplicas=16),
        tier("l40s", "L40S"),
    ]
    body = pool(tiers=tiers, classes=[realtime(), batch()])
    the_pool = InferencePool.model_validate(body)
    s = the_pool.spec
    seen = observe(s, {"realtime": 2000, "batch": 20000}, ready={"sxm": 1})
    decided = plan(s, seen, InferencePoolStatus())
    routing = RoutingState(True, Reason.ROUTE_APPLIED, "applied")
    status = build_status(the_pool, seen, decided, routing, InferencePoolStatus())
    by_name = {t.name: t for t in status.tiers}
    assert by_name["rtx4090"].profile_measured is True
    assert by_name["rtx4090"].profile is not None and "io.net" in by_name["rtx4090"].profile
    for name in ("sxm", "l40s"):
        assert by_name[name].profile_measured is False
        assert by_name[name].profile is not None
        assert by_name[name].profile.startswith("derived by gpufleet.perf from")


def test_another_model_on_a_measured_card_is_moved_to_it_and_says_so() -> None:
    # io.net measured DeepSeek-R1-Distill-Qwen-7B on one 4090 at 43.8-58.1 ms P99 from 1 to
    # 8 req/s: under a 100 ms objective, where the Llama 3 8B row it shares a size class
    # with is not (110.7 ms at 1 req/s). Half the KV heads of Llama 3 8B and fewer layers:
    # the moved profile makes the 4090 eligible for the class, the row did not.
    qwen = _model("RTX4090", 1, ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"))
    llama = _model("RTX4090", 1, LLAMA_8B)
    assert llama.measured and not qwen.measured
    assert "Qwen/Qwen2.5-7B-Instruct" in qwen.source and "Meta-Llama-3-8B" in qwen.source
    assert llama.capacity_rps(0.1, *SHAPE) == 0.0 < qwen.capacity_rps(0.1, *SHAPE)
    assert qwen.capacity_rps(2.0, *SHAPE) > llama.capacity_rps(2.0, *SHAPE)


def test_the_same_architecture_under_another_name_keeps_the_measured_row() -> None:
    # DeepSeek-R1-Distill-Llama-8B has Llama 3.1 8B's shape: nothing to move.
    distill = _model("RTX4090", 1, ModelSpec(name="deepseek-ai/DeepSeek-R1-Distill-Llama-8B"))
    assert distill.measured and distill.fit == _model("RTX4090", 1, LLAMA_8B).fit


def test_a_spec_architecture_moves_the_row_like_the_known_model() -> None:
    described = ModelSpec.model_validate({"name": "acme/private-7b", "architecture": QWEN_7B})
    known = _model("H100-PCIe-80GB", 1, ModelSpec(name="Qwen/Qwen2.5-7B-Instruct"))
    moved = _model("H100-PCIe-80GB", 1, described)
    assert not moved.measured and "acme/private-7b" in moved.source
    assert moved.fit.saturation_rps == pytest.approx(known.fit.saturation_rps, rel=0.02)
    # An unknown name without an architecture keeps its size class's row.
    plain = _model("H100-PCIe-80GB", 1, ModelSpec(name="acme/private-7b"))
    assert plain.measured


def test_an_impossible_architecture_is_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="numKeyValueHeads"):
        ModelSpec.model_validate(
            {"name": "m-7B", "architecture": {**QWEN_7B, "numKeyValueHeads": 5}}
        )
    with pytest.raises(ValueError, match="headDim"):
        ModelSpec.model_validate({"name": "m-7B", "architecture": {**QWEN_7B, "hiddenSize": 3585}})
    with pytest.raises(ValueError, match="hiddenSize"):
        ModelSpec.model_validate({"name": "m-7B", "architecture": {**QWEN_7B, "hiddenSize": 0}})
    # A model too large for the replica's memory: the tier has no profile, and says why.
    huge = ModelSpec.model_validate(
        {"name": "m-7B", "architecture": {**QWEN_7B, "numHiddenLayers": 400}}
    )
    with pytest.raises(ProfileNotFound, match="no room for the KV cache"):
        _model("RTX4090", 1, huge)


def _custom(sheet: dict[str, object], gpus: int = 1):  # type: ignore[no-untyped-def]
    tier = tier_spec(accelerator="Custom", gpus_per_replica=gpus, gpu=sheet)
    return replica_model(tier, LLAMA_8B)


L40S_SHEET = {
    "bf16TFLOPS": 362,
    "fp8TFLOPS": 733,
    "memoryBandwidthGBps": 864,
    "memoryGiB": 44,
    "boardPowerWatts": 350,
}


def test_a_custom_accelerator_by_its_datasheet_is_derived_like_a_listed_one() -> None:
    # The L40S's own datasheet entered as a Custom accelerator: the same card as the
    # built-in L40S (44.5 GiB there), so nearly the same profile, moved from the 4090
    # (the measured card of the nearest memory bandwidth).
    custom = _custom(L40S_SHEET)
    listed = _model("L40S")
    assert not custom.measured and "RTX4090" in custom.source
    assert custom.watts == 350.0
    assert custom.fit.saturation_rps == pytest.approx(listed.fit.saturation_rps, rel=0.05)
    # An HBM card of 5.3 TB/s and an H100 SXM's compute moves from the H100 PCIe and
    # outruns it. (With the L40S's 362 TFLOPS it need not: at a 2 s objective the batch is
    # large, and the engine's steps there are bound by compute and per-request overhead.)
    hbm_sheet = {"bf16TFLOPS": 989, "fp8TFLOPS": 1979, "memoryBandwidthGBps": 5300}
    hbm = _custom({**L40S_SHEET, **hbm_sheet, "memoryGiB": 192})
    assert "H100-PCIe" in hbm.source
    assert hbm.capacity_rps(2.0, *SHAPE) > _model("H100-PCIe-80GB").capacity_rps(2.0, *SHAPE)


def test_a_custom_accelerator_too_small_for_the_model_has_no_profile() -> None:
    with pytest.raises(ProfileNotFound, match="do not fit"):
        _custom({**L40S_SHEET, "memoryGiB": 8})
