"""Profiles io.net never measured: a measured row moved by gpufleet.perf's ratios.

The built-in table (`profile_data`) holds what io.net measured: H100 PCIe and RTX 4090
replicas serving one model per size class. A tier gets a moved profile when its replica differs
from the row it would use, in its GPU type (H100 SXM, H200, A100 80GB, L40S, RTX 5090: the
family's row, HBM datacenter cards from the H100 PCIe, GDDR cards from the RTX 4090) or in its
model (a Qwen 2.5 7B on the Llama 3 8B row: the pool's spec.model.architecture, else the
architecture `gpufleet.perf.models` knows by name; a model it does not know keeps the row),
or a Custom accelerator described by its datasheet (`tiers[].gpu`: the measured card of the
nearest memory bandwidth).
The row is moved by the ratios that gpufleet.perf's iteration-level vLLM engine, timed by a
roofline over the datasheets and the models' shapes, computes between the two replicas at the
row's request shape:

- saturation, by the ratio of sustained throughput: requests completed per second while a
  backlog keeps the engine at its largest batch (the middle half of 600 requests offered at
  twice the rate at which the whole KV cache decodes at full batch, so neither the first
  prefills nor the drain of the last long outputs count);
- the queueing term, by the inverse of that ratio: it scales with the time a request holds
  the replica, as it does within one profile (`ReplicaModel._queue_seconds`); the exponent
  and the benchmark's sharpness stay the row's;
- P99 TTFT and mean TPOT at zero load, by the engine's ratios at 1/64 of that rate.

Ratios, not the engine's own numbers, so a moved tier and a measured tier of one pool differ
by physics only, and the row's measurement carries over. What does not carry over is how the
table's benchmark understates a replica's saturation (the completed rate of 200-request runs,
capped by their drain: `make bench-profiles` puts numbers on it): a move keeps the row's
understatement, which is closest to right within a family and a size class. A GPU type with
no runs has no fitted efficiencies either: for the move its engine runs on the source card's
(the same shares of its own peaks, and the same host overheads), so the ratios hold what the
two datasheets differ by and nothing a refit moves; the profile says so. (On DEFAULT's
typical shares instead, a refit of the H100 PCIe that cut its per-request overhead moved the
H100 SXM from 1.42x the PCIe's throughput to 1.17x, with no datasheet changed.) A moved
profile is never presented as measured.

Cost: about 0.1-0.2 s of engine time per (GPU type, model, GPU count), cached for the process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from gpufleet.api.types import GpuDatasheet, ModelArchitecture, WeightDtype
from gpufleet.perf.calibration import DEFAULT, FIELDS, Calibration, calibration
from gpufleet.perf.capacity import decode_bound_rps, sustained_rps
from gpufleet.perf.engine import EngineResult, simulate
from gpufleet.perf.hardware import Gpu, gpu
from gpufleet.perf.models import ModelArch, model
from gpufleet.perf.roofline import Replica
from gpufleet.perf.vllm import EngineConfig
from gpufleet.perf.workload import benchmark_workload
from gpufleet.planning.capacity import Fit

IDLE_REQUESTS = 200
IDLE_OFFERED = 1 / 64  # x the decode bound


class NotDerivable(LookupError):
    """gpufleet.perf cannot model this replica: unknown GPU or model, or no room for KV."""


@dataclass(frozen=True)
class EngineNumbers:
    """What the engine says about one replica at one request shape."""

    gpu: str  # gpufleet.perf's name for the GPU type
    gpus: int
    model: str
    calibrated: bool  # the GPU type's efficiencies were fitted on io.net runs
    throughput_rps: float  # sustained completions per second under a backlog
    idle_ttft_p99_seconds: float
    idle_tpot_seconds: float
    # Not calibrated: the GPU type whose fitted efficiencies it ran on (None: DEFAULT's).
    efficiencies_of: str | None = None


@dataclass(frozen=True)
class Moved:
    """A measured fit moved to another replica."""

    fit: Fit
    throughput_ratio: float
    target: EngineNumbers

    def note(self, row: str) -> str:
        t = self.target
        how = calibration_note(t.calibrated, t.efficiencies_of)
        return (
            f"derived by gpufleet.perf from {row}: {self.throughput_ratio:.2f}x its sustained "
            f"throughput ({t.model} on {t.gpus}x {t.gpu}; {how})"
        )


def calibration_note(calibrated: bool, carried: str | None) -> str:
    """Where a GPU type's efficiencies in the engine came from, for a profile's source."""
    if calibrated:
        return "efficiencies fitted on io.net runs"
    if carried is not None:
        return f"no runs of this GPU type: {carried}'s fitted efficiencies"
    return "no runs of this GPU type: typical efficiencies, not fitted"


def arch_of(name: str) -> ModelArch | None:
    """gpufleet.perf's architecture of the model `name`, None when it has none."""
    try:
        return model(name)
    except KeyError:
        return None


def architecture(name: str, spec: ModelArchitecture) -> ModelArch:
    """gpufleet.perf's architecture from a pool's spec.model.architecture."""
    return ModelArch(
        name=name,
        layers=spec.num_hidden_layers,
        hidden=spec.hidden_size,
        heads=spec.num_attention_heads,
        kv_heads=spec.num_key_value_heads,
        intermediate=spec.intermediate_size,
        vocab=spec.vocab_size,
        weight_bytes=1.0 if spec.weight_dtype is WeightDtype.FP8 else 2.0,
        tied_embeddings=spec.tie_word_embeddings,
        head_dim=spec.head_dim or 0,
    )


def same_shape(a: ModelArch, b: ModelArch) -> bool:
    """Whether two architectures compute alike (their names aside)."""
    return replace(a, name="") == replace(b, name="")


def datasheet_gpu(name: str, sheet: GpuDatasheet) -> Gpu:
    """gpufleet.perf's GPU row for a Custom accelerator's spec datasheet."""
    return Gpu(
        name=name,
        bf16_tflops=float(sheet.bf16_tflops),
        fp8_tflops=None if sheet.fp8_tflops is None else float(sheet.fp8_tflops),
        bandwidth_gbps=float(sheet.memory_bandwidth_gbps),
        memory_gib=float(sheet.memory_gib),
        pcie_gen=sheet.pcie_generation,
        pcie_lanes=16,
        nvlink_gbps=None if sheet.nvlink_gbps is None else float(sheet.nvlink_gbps),
        peer_to_peer=sheet.peer_to_peer,
        board_power_w=float(sheet.board_power_watts),
        source="the pool's spec (tiers[].gpu)",
    )


def engine_numbers(
    accelerator: str | Gpu,
    arch: ModelArch,
    gpus: int,
    prompt: float,
    output: float,
    like: str | None = None,
) -> EngineNumbers:
    """The engine's numbers for `gpus` x `accelerator` (a name gpufleet.perf knows, or a
    datasheet's row) serving `arch` (NotDerivable). A GPU type with no runs runs on the
    fitted efficiencies of `like` (a measured GPU type), or else on DEFAULT's."""
    return _numbers(accelerator, arch, gpus, round(prompt, 1), round(output, 1), like)


def efficiencies(card: Gpu, like: str | None) -> tuple[Calibration, str | None]:
    """The card's fitted efficiencies; for a GPU type no run measured, those of `like` (a
    measured GPU type) when given, else DEFAULT's; with the GPU type they came from."""
    try:
        cal = calibration(card.name)
    except KeyError:  # a datasheet from the spec: nothing measured it
        cal = Calibration(card.name, DEFAULT, False, FIELDS)
    if cal.measured or like is None:
        return cal, None
    carried = calibration(like)
    if not carried.measured:
        return cal, None
    return Calibration(card.name, carried.efficiency, False, cal.datasheet_only), carried.gpu


def engine_replica(
    accelerator: str | Gpu,
    arch: ModelArch,
    gpus: int,
    like: str | None,
    config: EngineConfig | None = None,
) -> tuple[Replica, Calibration, str | None]:
    """The engine's replica of `gpus` x `accelerator` (a name gpufleet.perf knows, or a
    datasheet's row) serving `arch` on `efficiencies(card, like)`, with those efficiencies
    and the GPU type they came from; NotDerivable for an unknown GPU or no room for KV."""
    try:
        card = accelerator if isinstance(accelerator, Gpu) else gpu(accelerator)
    except KeyError as error:
        raise NotDerivable(str(error.args[0])) from None
    cal, carried = efficiencies(card, like)
    replica = Replica(card, arch, gpus, cal.efficiency, config)
    if not replica.fits():
        raise NotDerivable(
            f"{arch.name} leaves no room for the KV cache on {gpus} x {card.name} "
            f"({card.memory_gib:g} GiB each)"
        )
    return replica, cal, carried


@functools.lru_cache(maxsize=128)
def _numbers(
    accelerator: str | Gpu,
    arch: ModelArch,
    gpus: int,
    prompt: float,
    output: float,
    like: str | None,
) -> EngineNumbers:
    replica, cal, carried = engine_replica(accelerator, arch, gpus, like)
    card = replica.gpu
    throughput = sustained_rps(replica, prompt, output)
    if throughput <= 0:
        raise NotDerivable(f"{arch.name} on {gpus} x {card.name}: most requests never served")
    bound = decode_bound_rps(replica, prompt, output) / 1.5
    idle = _run(replica, bound * IDLE_OFFERED, IDLE_REQUESTS, prompt, output)
    if np.any(np.isnan(idle.ttft)):
        raise NotDerivable(
            f"{arch.name} on {gpus} x {card.name}: its KV cache cannot hold the longest "
            "reference prompts"
        )
    tpot = idle.tpot[~np.isnan(idle.tpot)]
    return EngineNumbers(
        gpu=card.name,
        gpus=gpus,
        model=arch.name,
        calibrated=cal.measured,
        efficiencies_of=carried,
        throughput_rps=throughput,
        idle_ttft_p99_seconds=float(np.percentile(idle.ttft, 99)),
        idle_tpot_seconds=float(np.mean(tpot)) if len(tpot) else 0.0,
    )


def _run(replica: Replica, rate: float, n: int, prompt: float, output: float) -> EngineResult:
    work = benchmark_workload(rate, n, prompt, output)
    return simulate(replica, work.arrivals, work.prompts, work.outputs)


Side = tuple[str | Gpu, ModelArch, int]  # accelerator, model, GPUs


def move(fit: Fit, *, prompt: float, output: float, source: Side, target: Side) -> Moved:
    """`fit`, measured on `source`, moved to `target` (NotDerivable)."""
    was = engine_numbers(*source, prompt, output)
    # A GPU type no run measured runs on the source card's fitted efficiencies (shares of
    # its peaks), so the ratios hold the two datasheets' differences, not a fit's.
    now = engine_numbers(*target, prompt, output, like=was.gpu if was.calibrated else None)
    speed = now.throughput_rps / was.throughput_rps
    ttft = now.idle_ttft_p99_seconds / was.idle_ttft_p99_seconds
    tpot = now.idle_tpot_seconds / was.idle_tpot_seconds if was.idle_tpot_seconds > 0 else 1.0
    moved = replace(
        fit,
        saturation_rps=fit.saturation_rps * speed,
        ttft_base_seconds=fit.ttft_base_seconds * ttft,
        ttft_queue_seconds=fit.ttft_queue_seconds / speed,
        tpot_base_seconds=fit.tpot_base_seconds * tpot,
        tpot_queue_seconds=fit.tpot_queue_seconds * tpot,
    )
    return Moved(moved, speed, now)
