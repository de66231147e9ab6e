"""Performance profiles: which `ReplicaModel` a tier's replicas follow.

A tier's replica model comes from, in order:
1. the tier's own `profile` (measured points in the spec), fitted at run time;
2. the built-in table (`profile_data`, derived by `tools/derive_profiles.py` from the
   io.net / IOG Foundation vLLM 0.8.5 runs in ../shared/data/iog-llm-inference-benchmarks,
   Apache-2.0), keyed by (accelerator, model size class, gpusPerReplica), for the GPU types
   io.net measured (H100 PCIe, RTX 4090);
3. for another GPU type (H100 SXM, H200, A100, L40S, RTX 5090), its family's measured row
   (H100 PCIe for the HBM datacenter cards, RTX 4090 for the GDDR cards; the other one when
   the family has no row of the size class) moved by the first-principles model's ratios
   (`gpufleet.planning.derived`); such a profile says `measured=False`. A Custom
   accelerator described by its datasheet (`tiers[].gpu`) is moved the same way from the
   measured card of the nearest memory bandwidth;
4. on a measured card, a model other than the row's (a Qwen 2.5 7B on the Llama 3 8B row:
   its spec.model.architecture, or gpufleet.perf's table by name) is moved to it the same
   way, on the row's GPUs; a model of unknown shape keeps the row.
When the table has the accelerator and size class but not the GPU count, the profile with
the largest smaller GPU count is used (conservative: it credits the extra GPUs nothing).
When nothing fits, `replica_model` raises `ProfileNotFound` and the planner treats the
tier as eligible for no class, saying why.

Stated assumptions (not measured; each documented where it is used):
- Board power for energy (spec TDP, all GPUs at full power, an upper bound): H100 PCIe
  350 W, H100 SXM 700 W, H200 700 W, A100 400 W, L40S 350 W, RTX 4090 450 W, RTX 5090 575 W.
- Prefill throughput, which splits a request's time between prefill and decode and makes
  TTFT grow with prompt length: dense FP16 tensor TFLOPS x GPUs x 40% utilization
  / (2 x parameters) tokens/s (the datasheets' dense rates, as gpufleet.perf.hardware). The
  resulting prefill share is capped at half the reference request's time and at 80% of the
  zero-load P99. For a Custom accelerator, half the zero-load P99 is prefill.
- Model load time (replica start to Ready, for the simulator): 60 s (container start,
  CUDA init, graph capture) plus the fp16 weights (2 GB per billion parameters) read at
  1 GB/s, i.e. weights already on the node or on fast storage; image already pulled.
- Model size classes: the nearest (in ratio) of 1.5B, 8B, 14B, 32B, 70B; weights must fit
  in 90% of the replica's GPU memory or the tier has no profile.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from gpufleet.api.types import (
    Accelerator,
    InferencePoolSpec,
    ModelSpec,
    PerformanceModel,
    Profile,
    Tier,
)
from gpufleet.perf.hardware import Gpu, gpu
from gpufleet.perf.models import ModelArch, tensor_parallel_refusal
from gpufleet.perf.vllm import GIB, EngineConfig, serving_config, with_flags
from gpufleet.planning.capacity import Fit, ReplicaModel
from gpufleet.planning.derived import (
    Moved,
    NotDerivable,
    Side,
    arch_of,
    architecture,
    calibration_note,
    datasheet_gpu,
    move,
    same_shape,
)
from gpufleet.planning.enginefit import engine_fit
from gpufleet.planning.fitting import BuiltinProfile, MeasuredPoint, fit_points
from gpufleet.planning.profile_data import PROFILES

PREFILL_UTILIZATION = 0.4
CUSTOM_PREFILL_SHARE_OF_BASE = 0.5
MAX_PREFILL_SHARE_OF_REQUEST = 0.5
MAX_PREFILL_SHARE_OF_BASE = 0.8
LOAD_FIXED_SECONDS = 60.0
LOAD_GIGABYTES_PER_SECOND = 1.0
WEIGHT_MEMORY_FRACTION = 0.9
# The request shape a tier's engine fit is made at (performanceModel Engine): the io.net
# runs' mean, where the built-in profiles were fitted.
ENGINE_PROMPT_TOKENS = 208.0
ENGINE_OUTPUT_TOKENS = 215.0
ENGINE_NEEDS_SHAPE = (
    "performanceModel Engine needs the model's shape (spec.model.architecture): "
    "sized on this profile until it is set"
)


@dataclass(frozen=True)
class AcceleratorSpec:
    """Spec-sheet facts about a GPU model."""

    watts: float
    dense_fp16_tflops: float
    memory_gigabytes: float
    profile_from: Accelerator  # whose measurements it uses (moved when not itself)


# Board power, dense FP16/BF16 tensor TFLOPS, memory (GB): gpufleet.perf.hardware's rows.
ACCELERATORS: dict[Accelerator, AcceleratorSpec] = {
    Accelerator.H100_PCIE: AcceleratorSpec(350.0, 756.0, 80.0, Accelerator.H100_PCIE),
    Accelerator.H100_SXM: AcceleratorSpec(700.0, 989.0, 80.0, Accelerator.H100_PCIE),
    Accelerator.H200_SXM: AcceleratorSpec(700.0, 989.0, 141.0, Accelerator.H100_PCIE),
    Accelerator.A100_SXM: AcceleratorSpec(400.0, 312.0, 80.0, Accelerator.H100_PCIE),
    Accelerator.L40S: AcceleratorSpec(350.0, 362.0, 48.0, Accelerator.RTX4090),
    Accelerator.RTX4090: AcceleratorSpec(450.0, 165.0, 24.0, Accelerator.RTX4090),
    Accelerator.RTX5090: AcceleratorSpec(575.0, 209.5, 32.0, Accelerator.RTX4090),
}
MEASURED = (Accelerator.H100_PCIE, Accelerator.RTX4090)

SIZE_CLASSES: dict[str, float] = {"1.5B": 1.5, "8B": 8.0, "14B": 14.0, "32B": 32.0, "70B": 70.0}


class ProfileNotFound(LookupError):
    """No built-in profile fits the tier; the message says what to set."""


def size_class(params_billions: float) -> str:
    """The nearest size class, by ratio."""
    return min(SIZE_CLASSES, key=lambda k: abs(math.log(params_billions / SIZE_CLASSES[k])))


def model_load_seconds(params_billions: float) -> float:
    """Assumed time from replica start to Ready (see module docstring)."""
    return LOAD_FIXED_SECONDS + 2.0 * params_billions / LOAD_GIGABYTES_PER_SECOND


def builtin_profile(accelerator: Accelerator, size: str, gpus: int) -> BuiltinProfile | None:
    """The table row for this key, or the largest smaller GPU count of it; None if none."""
    spec = ACCELERATORS.get(accelerator)
    if spec is None:
        return None
    rows = [
        p
        for p in PROFILES
        if p.accelerator == spec.profile_from.value and p.size_class == size and p.gpus <= gpus
    ]
    return max(rows, key=lambda p: p.gpus) if rows else None


def replica_model(
    tier: Tier, model: ModelSpec, performance: PerformanceModel = PerformanceModel.PROFILES
) -> ReplicaModel:
    """The replica model of a tier serving `model`, from the profiles or, with
    `performance` Engine, from gpufleet.perf's engine at steady state (a tier's own
    `profile` either way); raises ProfileNotFound with a hint."""
    config = scheduler_config(tier, model)
    arch = pool_arch(model)
    if arch is not None:
        refused = tensor_parallel_refusal(arch.heads, arch.kv_heads, tier.gpus_per_replica)
        if refused is not None:  # its pods would never start: no class can go there
            raise ProfileNotFound(f"{_where(tier)}: {model.name}: {refused}; set gpusPerReplica")
    engine = performance is PerformanceModel.ENGINE and tier.profile is None
    if engine and arch is not None:
        return _engine(tier, model, arch, config)
    profiled = _profiled(tier, model, arch)
    if engine:  # a model of unknown shape keeps serving on its profile, which says so
        profiled = replace(profiled, source=f"{profiled.source}; {ENGINE_NEEDS_SHAPE}")
    return replace(
        profiled,
        max_batched_tokens=config.max_num_batched_tokens,
        max_running=config.max_num_seqs,
    )


def pool_model(tier: Tier, spec: InferencePoolSpec) -> ReplicaModel:
    """`replica_model` of a pool's tier, by the pool's spec.scaling.performanceModel."""
    return replica_model(tier, spec.model, spec.scaling.performance_model)


def scheduler_config(tier: Tier, model: ModelSpec) -> EngineConfig:
    """The token budget and running cap vLLM 0.33 takes on this tier: its defaults for the
    card (a card gpufleet.perf does not know gets those of a small one), then the pool's
    extraArgs (`gpufleet.perf.vllm`)."""
    _, card = accelerator_of(tier)
    try:
        row = card if isinstance(card, Gpu) else gpu(card)
        config = serving_config(row.memory_gib, row.name)
    except KeyError:
        config = serving_config(0.0, "")
    return with_flags(config, list(model.extra_args))


def _where(tier: Tier) -> str:
    return f"tier {tier.name} ({tier.accelerator.value} x{tier.gpus_per_replica})"


def _profiled(tier: Tier, model: ModelSpec, arch: ModelArch | None) -> ReplicaModel:
    """The tier's profile: its own points, else the built-in row (moved where it differs);
    `arch` is the pool's model as gpufleet.perf computes it (None: unknown shape)."""
    params = model.size_billions()
    where = _where(tier)
    if tier.profile is not None:
        return _from_spec(tier, tier.profile, params)
    if params is None:
        raise ProfileNotFound(
            f"{where}: model size unknown; set spec.model.parametersBillions or tiers[].profile"
        )
    spec, card = accelerator_of(tier)
    if spec is None:
        raise ProfileNotFound(f"{where}: a Custom accelerator needs tiers[].profile or gpu")
    size = size_class(params)
    memory = spec.memory_gigabytes * tier.gpus_per_replica * WEIGHT_MEMORY_FRACTION
    # 2 bytes a parameter, or less where the shape says the checkpoint is smaller (an FP8
    # 70B fits where a BF16 one does not).
    weights = 2.0 * params
    if arch is not None and arch.weight_memory_bytes / 1e9 < weights:
        weights = arch.weight_memory_bytes / 1e9
    if weights > memory:
        stored = f"{params:g}B fp16" if weights == 2.0 * params else f"{weights:.0f} GB of"
        raise ProfileNotFound(
            f"{where}: {stored} weights do not fit in {memory:.0f} GB; "
            "raise gpusPerReplica or set tiers[].profile"
        )
    if tier.accelerator != spec.profile_from:
        return _moved(tier, size, params, spec, arch, card)
    row = builtin_profile(tier.accelerator, size, tier.gpus_per_replica)
    if row is None:
        raise ProfileNotFound(
            f"{where}: no built-in profile for {size} models; set tiers[].profile"
        )
    source = f"io.net vLLM 0.8.5: {row.model} on {row.gpus}x {row.accelerator}"
    if row.gpus != tier.gpus_per_replica:
        source += f" (fewest measured GPUs <= {tier.gpus_per_replica}, extra GPUs not credited)"
    fit, measured = row.fit, True
    measured_arch = arch_of(row.model)
    if arch is not None and measured_arch is not None and not same_shape(arch, measured_arch):
        # Another model than the one measured (a Qwen 7B on the Llama 3 8B row): moved to
        # it on the same GPUs by the engine's ratios.
        moved = _move_row(row, measured_arch, (row.accelerator, arch, row.gpus), where)
        fit, measured, source = moved.fit, False, moved.note(source)
    return _build(
        name=f"{tier.accelerator.value}/{size}/x{tier.gpus_per_replica}",
        fit=fit,
        prompt_tokens=row.prompt_tokens,
        output_tokens=row.output_tokens,
        gpus=tier.gpus_per_replica,
        params=row.parameters_billions if measured or arch is None else arch.params / 1e9,
        measured_on=(ACCELERATORS[spec.profile_from], row.gpus),
        watts_per_gpu=spec.watts,
        load_seconds=model_load_seconds(params),
        measured=measured,
        source=source,
    )


def _engine(tier: Tier, model: ModelSpec, arch: ModelArch, config: EngineConfig) -> ReplicaModel:
    """The tier's replicas as gpufleet.perf's engine serves them at steady state, at the
    io.net request shape (`enginefit`): its card (a Custom accelerator's datasheet, on the
    efficiencies of the measured card it is profiled from), the pool's architecture and the
    tier's vLLM settings."""
    spec, card = accelerator_of(tier)
    like = spec.profile_from.value if spec is not None else None
    try:
        fit = engine_fit(
            card,
            arch,
            tier.gpus_per_replica,
            ENGINE_PROMPT_TOKENS,
            ENGINE_OUTPUT_TOKENS,
            config,
            like,
        )
    except NotDerivable as error:
        raise ProfileNotFound(f"{_where(tier)}: {error}; set tiers[].profile") from None
    fitted = fit.model
    params = model.size_billions() or arch.params / 1e9
    return replace(
        fitted,
        source=f"{fitted.source} ({calibration_note(fit.calibrated, fit.efficiencies_of)})",
        name=f"{tier.accelerator.value}/engine/x{tier.gpus_per_replica}",
        watts=fitted.watts if spec is None else spec.watts * tier.gpus_per_replica,
        model_load_seconds=model_load_seconds(params),
    )


def accelerator_of(tier: Tier) -> tuple[AcceleratorSpec | None, str | Gpu]:
    """The tier's accelerator facts, and its card as gpufleet.perf takes it (a name, or a
    Custom accelerator's datasheet row, whose profile comes from the measured card of the
    nearest memory bandwidth: decode, most of a request's time, reads memory)."""
    if tier.accelerator is not Accelerator.CUSTOM or tier.gpu is None:
        return ACCELERATORS.get(tier.accelerator), tier.accelerator.value
    card = datasheet_gpu(f"Custom ({tier.name})", tier.gpu)
    nearest = min(
        MEASURED,
        key=lambda a: abs(math.log(card.bandwidth_gbps / gpu(a.value).bandwidth_gbps)),
    )
    spec = AcceleratorSpec(
        watts=card.board_power_w,
        dense_fp16_tflops=card.bf16_tflops,
        memory_gigabytes=card.memory_gib * GIB / 1e9,
        profile_from=nearest,
    )
    return spec, card


def pool_arch(model: ModelSpec) -> ModelArch | None:
    """The pool's model as gpufleet.perf computes it: its spec.model.architecture, else the
    architecture gpufleet.perf knows by name; None when neither says."""
    if model.architecture is not None:
        return architecture(model.name, model.architecture)
    return arch_of(model.name)


def _moved(
    tier: Tier,
    size: str,
    params: float,
    spec: AcceleratorSpec,
    arch: ModelArch | None,
    card: str | Gpu,
) -> ReplicaModel:
    """A GPU type io.net never measured: its family's row moved by gpufleet.perf."""
    where = _where(tier)
    families = [spec.profile_from] + [a for a in MEASURED if a != spec.profile_from]
    rows = [
        p for a in families for p in PROFILES if p.accelerator == a.value and p.size_class == size
    ]
    if not rows:
        raise ProfileNotFound(
            f"{where}: no built-in profile for {size} models; set tiers[].profile"
        )
    # The family's row on the fewest GPUs: the most direct measurement, and the engine
    # models tensor parallelism on the target's own links (a 4090's host-staged all-reduce
    # and its host lag are not another card's).
    family = [p for p in rows if p.accelerator == rows[0].accelerator]
    row = min(family, key=lambda p: p.gpus)
    measured_arch = arch_of(row.model)
    if measured_arch is None:  # every row's model is in gpufleet.perf's table
        raise ProfileNotFound(f"{where}: no architecture for {row.model}; set tiers[].profile")
    target = arch or measured_arch
    moved = _move_row(row, measured_arch, (card, target, tier.gpus_per_replica), where)
    return _build(
        name=f"{tier.accelerator.value}/{size}/x{tier.gpus_per_replica}",
        fit=moved.fit,
        prompt_tokens=row.prompt_tokens,
        output_tokens=row.output_tokens,
        gpus=tier.gpus_per_replica,
        params=target.params / 1e9,
        measured_on=(spec, tier.gpus_per_replica),
        watts_per_gpu=spec.watts,
        load_seconds=model_load_seconds(params),
        measured=False,
        source=moved.note(f"{row.model} on {row.gpus}x {row.accelerator} (io.net)"),
    )


def _move_row(row: BuiltinProfile, measured: ModelArch, target: Side, where: str) -> Moved:
    """`row`'s fit moved to `target` by gpufleet.perf; ProfileNotFound says why it can't be."""
    try:
        return move(
            row.fit,
            prompt=row.prompt_tokens,
            output=row.output_tokens,
            source=(row.accelerator, measured, row.gpus),
            target=target,
        )
    except NotDerivable as error:
        raise ProfileNotFound(f"{where}: {error}; set tiers[].profile") from None


def _from_spec(tier: Tier, profile: Profile, params: float | None) -> ReplicaModel:
    shape = profile.prompt_tokens + profile.output_tokens
    points = tuple(
        (
            float(p.requests_per_second),
            p.tokens_per_second / shape,
            p.measured_ttft_p99_milliseconds / 1000.0,
            float(p.tokens_per_second),
            None if p.tpot_milliseconds is None else p.tpot_milliseconds / 1000.0,
        )
        for p in profile.points
    )
    fit = _fit_cached(points)
    spec = ACCELERATORS.get(tier.accelerator)
    watts = None if profile.watts_per_gpu is None else float(profile.watts_per_gpu)
    if watts is None and spec is not None:
        watts = spec.watts
    if profile.model_load_seconds is not None:
        load = float(profile.model_load_seconds)
    else:
        load = model_load_seconds(params if params is not None else 8.0)
    return _build(
        name=f"{tier.name}/spec",
        fit=fit,
        prompt_tokens=float(profile.prompt_tokens),
        output_tokens=float(profile.output_tokens),
        gpus=tier.gpus_per_replica,
        params=params,
        measured_on=(spec, tier.gpus_per_replica),
        watts_per_gpu=watts,
        load_seconds=load,
        measured=True,
        source=f"tiers[{tier.name}].profile ({len(points)} points)",
    )


@functools.lru_cache(maxsize=256)
def _fit_cached(points: tuple[tuple[float, float, float, float, float | None], ...]) -> Fit:
    return fit_points([MeasuredPoint(*p) for p in points]).fit


def _build(
    *,
    name: str,
    fit: Fit,
    prompt_tokens: float,
    output_tokens: float,
    gpus: int,
    params: float | None,
    measured_on: tuple[AcceleratorSpec | None, int],  # the card the fit's prefill ran on
    watts_per_gpu: float | None,
    load_seconds: float,
    measured: bool,
    source: str,
) -> ReplicaModel:
    reference_seconds = 1.0 / fit.saturation_rps
    spec, measured_gpus = measured_on
    if spec is None or params is None:
        prefill = CUSTOM_PREFILL_SHARE_OF_BASE * fit.ttft_base_seconds
    else:
        # Compute-bound prefill on the GPUs the profile was measured with.
        flops = spec.dense_fp16_tflops * 1e12 * measured_gpus * PREFILL_UTILIZATION
        prefill = prompt_tokens * 2.0 * params * 1e9 / flops
    prefill = min(
        prefill,
        MAX_PREFILL_SHARE_OF_REQUEST * reference_seconds,
        MAX_PREFILL_SHARE_OF_BASE * fit.ttft_base_seconds,
    )
    return ReplicaModel(
        name=name,
        fit=fit,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        prefill_seconds=prefill,
        gpus=gpus,
        watts=None if watts_per_gpu is None else watts_per_gpu * gpus,
        model_load_seconds=load_seconds,
        measured=measured,
        source=source,
    )
