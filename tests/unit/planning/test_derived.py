"""Profiles of GPU types io.net never measured: a measured row moved by gpufleet.perf."""

from __future__ import annotations

import pytest

from gpufleet.api.status import InferencePoolStatus, Reason
from gpufleet.api.types import Accelerator, InferencePool, ModelSpec
from gpufleet.desired.status import RoutingState, build_status
from gpufleet.planning.derived import NotDerivable, engine_numbers, move
from gpufleet.planning.planner import plan
from gpufleet.planning.profile_data import PROFILES
from gpufleet.planning.profiles import ProfileNotFound, replica_model
from tests.pools import pool, tier
from tests.unit.planning.factories import LLAMA_8B, batch, observe, realtime, tier_spec

pytestmark = pytest.mark.timeout(30)

SHAPE = (208.0, 215.0)


def _model(accelerator: str, gpus: int = 1, model: ModelSpec = LLAMA_8B):  # type: ignore[no-untyped-def]
    return replica_model(tier_spec(accelerator=accelerator, gpus_per_replica=gpus), model)


def _capacity(accelerator: str, objective: float = 2.0, gpus: int = 1) -> float:
    return _model(accelerator, gpus).capacity_rps(objective, *SHAPE)


def test_moving_a_row_onto_its_own_replica_changes_nothing() -> None:
    row = next(p for p in PROFILES if p.accelerator == "H100-PCIe-80GB" and p.size_class == "8B")
    moved = move(
        row.fit,
        model_name=row.model,
        prompt=row.prompt_tokens,
        output=row.output_tokens,
        source=(row.accelerator, 1),
        target=(row.accelerator, 1),
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
        # No io.net run of these types: the engine's efficiencies are not fitted.
        assert "typical efficiencies, not fitted" in model.source
        assert model.watts is not None and model.watts > 0


def test_the_engine_numbers_respect_the_datasheet() -> None:
    # A replica cannot decode faster than reading its weights once per step allows: an 8B
    # model's 16 GB at 3.35 TB/s is at least 4.8 ms a step, so per-request output time at
    # zero load is bounded below on an H100 SXM.
    numbers = engine_numbers("H100-SXM-80GB", "meta-llama/Meta-Llama-3-8B-Instruct", 1, *SHAPE)
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
        engine_numbers("TPU-v5e", "meta-llama/Meta-Llama-3-8B-Instruct", 1, *SHAPE)


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
