"""vLLM's scheduler defaults for the OpenAI server: 0.8.5's (the engine the io.net runs
used) and 0.33's (the release gpufleet deploys).

Read from the vllm==0.8.5 wheel (`pip download --no-deps vllm==0.8.5`):

- vllm/engine/arg_utils.py, `EngineArgs._set_default_args_v1`: the V1 engine always uses
  chunked prefill (`enable_chunked_prefill = True`) and enables prefix caching. When the
  device has at least 70 GiB (`device_memory >= 70 * GiB_bytes`: H100, H200, A100 80GB) the
  OpenAI server (`UsageContext.OPENAI_API_SERVER`) defaults to `max_num_batched_tokens=8192`
  and `max_num_seqs=1024`; on smaller devices (RTX 4090, RTX 5090, L40S) to 2048 and 256.
- vllm/config.py, `CacheConfig.gpu_memory_utilization = 0.9`; `block_size` has no static
  default and vllm/platforms/cuda.py `check_and_update_configs` sets it to 16 on CUDA.
- vllm/v1/worker/gpu_worker.py, `determine_available_memory`: KV-cache memory =
  total memory x gpu_memory_utilization - peak memory of a profiling forward pass of
  `max_num_batched_tokens` tokens (weights + activations + non-torch allocations such as
  NCCL buffers and the CUDA context).
- vllm/v1/core/sched/scheduler.py, `Scheduler.schedule`: one token budget per step
  (`max_num_scheduled_tokens` = max_num_batched_tokens). Running requests first, in order:
  a decode takes 1 token, an unfinished prefill takes min(remaining, budget) (chunked).
  When KV blocks run out, the last running request is preempted (recompute: its KV is
  freed and it returns to the front of the waiting queue). Then, only if nothing was
  preempted, waiting requests in arrival order while budget remains and fewer than
  max_num_seqs run, each admitted only if its chunk's KV blocks can be allocated.
- vllm/benchmarks/serve.py `get_request`: request i+1 is sent an interval drawn from
  `np.random.gamma(shape=burstiness, scale=1/(rate*burstiness))` after request i
  (burstiness 1: Poisson), with `np.random.seed(args.seed)` (seed 0 by default).

Read from the vllm==0.33.0 wheel, vllm/engine/arg_utils.py:

- `EngineArgs.get_batch_defaults`, for the OpenAI server: a device of at least 160 GiB
  (B200) 16,384 batched tokens and 1,024 sequences; of at least 70 GiB and not an A100
  ("a100" not in the device's name; PR #17885: larger budgets cost the A100 throughput),
  8,192 and 1,024 (H100, H200); any other, 2,048 and 256 (A100, L40S, RTX 4090, RTX 5090).
- `EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`: `--max-num-batched-tokens`
  and `--max-num-seqs` replace them; `--performance-mode throughput` doubles the ones not set.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class EngineConfig:
    max_num_batched_tokens: int
    max_num_seqs: int
    gpu_memory_utilization: float = 0.9
    block_size: int = 16


def default_config(memory_gib: float) -> EngineConfig:
    """The OpenAI server's defaults on a device with `memory_gib` GiB (vLLM 0.8.5, V1)."""
    if memory_gib >= 70:
        return EngineConfig(max_num_batched_tokens=8192, max_num_seqs=1024)
    return EngineConfig(max_num_batched_tokens=2048, max_num_seqs=256)


def serving_config(memory_gib: float, device: str) -> EngineConfig:
    """vLLM 0.33's OpenAI-server defaults on one device of `memory_gib` GiB named `device`."""
    if memory_gib >= 160:
        return EngineConfig(max_num_batched_tokens=16384, max_num_seqs=1024)
    if memory_gib >= 70 and "a100" not in device.lower():
        return EngineConfig(max_num_batched_tokens=8192, max_num_seqs=1024)
    return EngineConfig(max_num_batched_tokens=2048, max_num_seqs=256)


def with_flags(config: EngineConfig, args: list[str]) -> EngineConfig:
    """`config` as vLLM 0.33 changes it for these server arguments (see the docstring):
    `--max-num-batched-tokens`, `--max-num-seqs` (either `--flag=N` or `--flag N`) and
    `--performance-mode throughput`. Values vLLM would refuse are left to it: ignored."""
    values: dict[str, str] = {}
    for i, arg in enumerate(args):
        flag, sep, value = arg.partition("=")
        if not sep and i + 1 < len(args):
            value = args[i + 1]
        values[flag.replace("_", "-")] = value
    tokens = _positive(values.get("--max-num-batched-tokens"))
    seqs = _positive(values.get("--max-num-seqs"))
    double = 2 if values.get("--performance-mode") == "throughput" else 1
    return EngineConfig(
        max_num_batched_tokens=tokens or config.max_num_batched_tokens * double,
        max_num_seqs=seqs or config.max_num_seqs * double,
        gpu_memory_utilization=config.gpu_memory_utilization,
        block_size=config.block_size,
    )


def _positive(text: str | None) -> int | None:
    try:
        value = int(text) if text is not None else 0
    except ValueError:
        return None
    return value if value > 0 else None
