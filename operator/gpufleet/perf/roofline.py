"""The time of one vLLM step from a roofline, and a replica's KV-cache capacity.

A step runs T new tokens for R requests (decodes and prefill chunks together) over contexts
already in the KV cache. With tensor parallelism over `tp` GPUs each GPU holds 1/tp of the
weights, heads and KV cache and does 1/tp of the FLOPs; every decoder layer then all-reduces
its attention output and its MLP output (2 all-reduces of T x hidden values per layer, as
vLLM's Llama/Qwen/Gemma layers do).

    compute = FLOPs / (peak x eff_compute)
    memory  = bytes / (bandwidth x eff_memory)
    launch  = layers x layer_launch (the host launching each layer's kernels; with vLLM's
              piecewise CUDA graphs attention runs eagerly between graph pieces, so a slow
              host CPU can leave the GPU waiting: small models on the 4090 hosts; fitted
              apart for tensor-parallel replicas, whose hosts differ)
    gpu     = max(compute, memory) + layers x KERNELS_PER_LAYER x KERNEL_LATENCY
    step    = max(gpu, launch) + all-reduces + step_overhead + R x per_seq

Kernel latency: every kernel costs a few microseconds on the GPU beyond its roofline time
(ramp-up and tail, even inside a CUDA graph), which is what makes small steps of small
models slower than bytes / bandwidth. Fitted on Vidur's 2,088 H100 projection timings
(../shared/data/vidur-profiling, see gpufleet.perf.vidur): a plain max roofline is within 25%
of them on 67% of points; adding a per-kernel latency, on 93% (9 us, median error 7.8%); a
K-norm knee between compute and memory time ((tc^K + tm^K)^(1/K), K = 1.24) on top, on 97%
(6 us, median error 4.6%). On the io.net runs the knee made the replay worse (H100 P99 TTFT
within 15% on 23% of runs against 37% with the plain max, median TPOT 77% vs 69%, RTX 4090
TPOT 47% vs 55%), so KNEE is None (plain max) and the knee's 6 us is kept: the lower of the
two estimates, as vLLM's CUDA graphs remove the launch gaps that Vidur's eager timings hold.
Nine kernels per decoder layer (vLLM's Llama/Qwen layer: fused add+RMSNorm, QKV, rotary,
attention, O, fused add+RMSNorm, gate/up, SiLU-and-mul, down). Stated constants, not fitted
on the io.net runs.

FLOPs: 2 per weight per token for the decoder's linear maps, 2 x hidden x vocab per request
for the LM head (vLLM computes logits only at each request's last position), and 4 x q_dim
per (query, key) pair per layer for attention (QK^T and PV). Bytes: every weight once per
step, the KV of every context token attended to, and the activations each GEMM reads and
writes. An all-reduce of m bytes costs latency + 2(tp-1)/tp x m / (link x eff_link) (ring).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from gpufleet.perf.hardware import Gpu
from gpufleet.perf.models import ModelArch
from gpufleet.perf.vllm import GIB, EngineConfig, default_config

ACT_BYTES = 2.0  # activations in BF16/FP16
# Memory a profiling pass holds besides weights and its activations: the CUDA context
# left out (vLLM measures from after it), NCCL buffers and cuBLAS workspaces. vLLM logs
# 0.2-1 GiB of "non-torch memory" on these GPUs; a stated estimate, not fitted.
KNEE: float | None = None  # K-norm of compute and memory time; None: max (see the docstring)
KERNEL_LATENCY_S = 6e-6  # per kernel, on the GPU even inside a CUDA graph (same fit)
KERNELS_PER_LAYER = 9
NON_TORCH_GIB = 0.5
NON_TORCH_GIB_PER_PEER = 0.25


@dataclass(frozen=True)
class Efficiency:
    """The handful of numbers fitted per GPU type (or datasheet defaults)."""

    compute: float = 0.5  # share of the dense tensor peak reached by GEMMs and attention
    memory: float = 0.75  # share of the memory bandwidth reached streaming weights and KV
    link: float = 0.6  # share of the interconnect bandwidth an all-reduce reaches
    step_overhead_s: float = 0.002  # CPU time per step: scheduling, launch, sampling
    per_seq_overhead_s: float = 2e-5  # CPU time per request per step: inputs, detokenize
    api_overhead_s: float = 0.005  # per request, from the client to the scheduler
    allreduce_latency_s: float = 3e-5  # per all-reduce, 2 GPUs (scales as 2(tp-1)/tp)
    layer_launch_s: float = 5e-5  # host time to launch one layer's kernels (a step floor)
    # The same with tensor parallelism (one worker process per GPU, each launching its own
    # kernels, on the multi-GPU hosts); None: as on one GPU.
    tp_layer_launch_s: float | None = None
    measured: tuple[str, ...] = field(default=())  # the fields fitted on measurements

    def launch_per_layer(self, tp: int) -> float:
        if tp > 1 and self.tp_layer_launch_s is not None:
            return self.tp_layer_launch_s
        return self.layer_launch_s


@dataclass(frozen=True)
class Replica:
    """One vLLM server: a model on `tp` GPUs of one type, with its engine settings."""

    gpu: Gpu
    model: ModelArch
    tp: int = 1
    eff: Efficiency = field(default_factory=Efficiency)
    config: EngineConfig | None = None

    @property
    def engine(self) -> EngineConfig:
        return self.config or default_config(self.gpu.memory_gib)

    # --- memory ---
    def activation_peak_bytes(self) -> float:
        """Per GPU, the profiling pass of max_num_batched_tokens tokens and the sampler's."""
        m, tp, n = self.model, self.tp, self.engine.max_num_batched_tokens
        # Live at the MLP: the residual stream, the normed input and gate/up's output.
        per_token = 4 * m.hidden + (m.q_dim + 2 * m.kv_dim + 2 * m.intermediate) / tp
        logits = self.engine.max_num_seqs * m.vocab * 4 * 2  # float32 logits and probs
        non_torch = NON_TORCH_GIB + (NON_TORCH_GIB_PER_PEER if tp > 1 else 0.0)
        return n * per_token * ACT_BYTES + logits + non_torch * GIB

    def weight_bytes_per_gpu(self) -> float:
        return self.model.weight_memory_bytes / self.tp

    def kv_cache_bytes_per_gpu(self) -> float:
        usable = self.gpu.memory_gib * GIB * self.engine.gpu_memory_utilization
        return usable - self.weight_bytes_per_gpu() - self.activation_peak_bytes()

    def kv_capacity_tokens(self) -> int:
        """Tokens the KV cache holds (0 when the weights leave no room), whole blocks."""
        per_token = self.model.kv_bytes_per_token / self.tp
        tokens = max(0.0, self.kv_cache_bytes_per_gpu()) / per_token
        block = self.engine.block_size
        return int(tokens // block) * block

    def fits(self) -> bool:
        return self.kv_capacity_tokens() >= self.engine.block_size

    # --- time ---
    def step_seconds(self, tokens: int, requests: int, attn_pairs: float, kv_read: float) -> float:
        """One step: `tokens` new tokens of `requests` requests; `attn_pairs` (query, key)
        pairs attended; `kv_read` context tokens whose K and V are read."""
        return coefficients(self).step(tokens, requests, attn_pairs, kv_read)

    def parts(
        self, tokens: int, requests: int, attn_pairs: float, kv_read: float
    ) -> dict[str, float]:
        """The step's compute, memory, all-reduce and overhead times, seconds."""
        c = coefficients(self)
        return {
            "compute": c.flop_time(tokens, requests, attn_pairs),
            "memory": c.byte_time(tokens, kv_read),
            "allreduce": c.comm_time(tokens),
            "launch": c.launch,
            "overhead": c.overhead + c.per_seq * requests,
        }

    def linear_layer_seconds(self, tokens: int) -> float:
        """One decoder layer's linear maps (QKV, O, gate/up, down) on `tokens` tokens,
        roofline only (no overheads): what Vidur's mlp.csv profiles per layer."""
        m, tp, e, g = self.model, self.tp, self.eff, self.gpu
        flops = 2 * m.layer_params * tokens / tp
        weight = m.layer_params * m.weight_bytes / tp
        act = tokens * (2 * m.hidden + (m.q_dim + 2 * m.kv_dim) / tp + m.q_dim / tp)
        act += tokens * (m.hidden + 2 * m.intermediate / tp + m.intermediate / tp + m.hidden)
        bytes_ = weight + act * ACT_BYTES
        peak = g.peak_tflops(m.weight_bytes) * 1e12 * e.compute
        tc, tm = flops / peak, bytes_ / (g.bandwidth_gbps * 1e9 * e.memory)
        return combine(tc, tm) + 4 * KERNEL_LATENCY_S


@dataclass(frozen=True)
class Coefficients:
    """Per-replica constants of step_seconds, computed once (the engine calls it a lot)."""

    flop_per_token: float
    flop_per_request: float
    flop_per_pair: float
    weight_bytes: float
    act_bytes_per_token: float
    kv_bytes_per_token: float
    peak_flops: float
    bandwidth: float
    comm_latency: float
    comm_bytes_per_token: float
    overhead: float
    per_seq: float
    launch: float
    kernel_latency: float = 0.0

    @staticmethod
    def of(r: Replica) -> Coefficients:
        m, tp, g, e = r.model, r.tp, r.gpu, r.eff
        act_layer = 10 * m.hidden + (2 * m.q_dim + 2 * m.kv_dim + 3 * m.intermediate) / tp
        n_ar = 2 * m.layers if tp > 1 else 0
        ring = 2 * (tp - 1) / tp
        return Coefficients(
            flop_per_token=2.0 * m.layers * m.layer_params / tp,
            flop_per_request=2.0 * m.hidden * m.vocab / tp,
            flop_per_pair=4.0 * m.layers * m.q_dim / tp,
            weight_bytes=(m.layers * m.layer_params * m.weight_bytes + m.vocab * m.hidden * 2.0)
            / tp,
            act_bytes_per_token=m.layers * act_layer * ACT_BYTES,
            kv_bytes_per_token=m.kv_bytes_per_token / tp,
            peak_flops=g.peak_tflops(m.weight_bytes) * 1e12 * e.compute,
            bandwidth=g.bandwidth_gbps * 1e9 * e.memory,
            comm_latency=n_ar * e.allreduce_latency_s * ring,
            comm_bytes_per_token=n_ar * ring * m.hidden * ACT_BYTES / (g.link_gbps * 1e9 * e.link)
            if tp > 1
            else 0.0,
            overhead=e.step_overhead_s,
            per_seq=e.per_seq_overhead_s,
            launch=m.layers * e.launch_per_layer(tp),
            kernel_latency=m.layers * KERNELS_PER_LAYER * KERNEL_LATENCY_S,
        )

    def flop_time(self, tokens: int, requests: int, pairs: float) -> float:
        flops = (
            self.flop_per_token * tokens
            + self.flop_per_request * requests
            + self.flop_per_pair * pairs
        )
        return flops / self.peak_flops

    def byte_time(self, tokens: int, kv_read: float) -> float:
        bytes_ = (
            self.weight_bytes
            + self.act_bytes_per_token * tokens
            + self.kv_bytes_per_token * (kv_read + tokens)
        )
        return bytes_ / self.bandwidth

    def comm_time(self, tokens: int) -> float:
        if self.comm_latency == 0.0 and self.comm_bytes_per_token == 0.0:
            return 0.0
        return self.comm_latency + self.comm_bytes_per_token * tokens

    def step(self, tokens: int, requests: int, pairs: float, kv_read: float) -> float:
        gpu = combine(self.flop_time(tokens, requests, pairs), self.byte_time(tokens, kv_read))
        gpu += self.kernel_latency
        return (
            max(gpu, self.launch) + self.comm_time(tokens) + self.overhead + self.per_seq * requests
        )


@lru_cache(maxsize=1024)
def coefficients(replica: Replica) -> Coefficients:
    """The replica's step-time constants (replicas are frozen, so this caches)."""
    return Coefficients.of(replica)


def combine(compute: float, memory: float) -> float:
    """A GEMM's time from its compute and memory roofs (KNEE None: the plain max)."""
    if KNEE is None:
        return max(compute, memory)
    return float((compute**KNEE + memory**KNEE) ** (1.0 / KNEE))


def prefill_pairs(prior: int, chunk: int) -> float:
    """(query, key) pairs of a causal prefill chunk of `chunk` tokens after `prior` tokens."""
    return chunk * (prior + (chunk + 1) / 2)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)
