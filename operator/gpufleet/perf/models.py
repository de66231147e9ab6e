"""Model architectures, one row per model, each citing its config.json on the Hugging Face hub.

The numbers are the published config.json values (num_hidden_layers, hidden_size,
num_attention_heads, num_key_value_heads, head_dim where it differs from hidden/heads,
intermediate_size, vocab_size, tie_word_embeddings), written down from the hub pages named
in each row; none is a mixture of experts. `weight_bytes` is 2 for BF16/FP16 checkpoints and 1
for FP8 ones (their embeddings and LM head stay in 16 bits, as compressed-tensors FP8 leaves
them).
"""

from __future__ import annotations

from dataclasses import dataclass

HUB = "https://huggingface.co/{}/blob/main/config.json"


def _kv_heads_split(kv_heads: int, tp: int) -> bool:
    return (tp % kv_heads if tp >= kv_heads else kv_heads % tp) == 0


def tensor_parallel_runs(heads: int, kv_heads: int, tp: int) -> bool:
    """Whether vLLM 0.33 runs a model of these heads on `tp` GPUs (read in its source):
    `ModelConfig.verify_with_parallel_config` (vllm/config/model.py) requires the attention
    heads to divide by the tensor-parallel size, and `QKVParallelLinear`
    (vllm/model_executor/layers/linear.py) splits the key/value heads evenly over the GPUs,
    or replicates them evenly when there are fewer heads than GPUs."""
    return heads % tp == 0 and _kv_heads_split(kv_heads, tp)


def tensor_parallel_refusal(heads: int, kv_heads: int, tp: int) -> str | None:
    """Why vLLM refuses `tp` GPUs for a model of these heads (`tensor_parallel_runs`), and
    which GPU counts it runs on; None when it runs."""
    if heads % tp:
        why = f"its {heads} attention heads do not divide by {tp}"
    elif not _kv_heads_split(kv_heads, tp):
        why = f"its {kv_heads} key/value heads do not split evenly over {tp}"
    else:
        return None
    fits = [n for n in range(1, 9) if tensor_parallel_runs(heads, kv_heads, n)]
    return (
        f"vLLM refuses --tensor-parallel-size {tp}: {why}; "
        f"{' or '.join(str(n) for n in fits)} GPUs per replica would run"
    )


@dataclass(frozen=True)
class ModelArch:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    weight_bytes: float = 2.0  # bytes per linear-layer weight (1 for FP8)
    tied_embeddings: bool = False
    head_dim: int = 0  # 0: hidden // heads
    kv_bytes: float = 2.0  # KV-cache element size (BF16 unless configured otherwise)

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.dim_head

    @property
    def layer_params(self) -> int:
        """Weights of one decoder layer's linear maps (QKV, O, gate+up, down)."""
        qkv = self.hidden * (self.q_dim + 2 * self.kv_dim)
        out = self.q_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return qkv + out + mlp

    @property
    def linear_params(self) -> int:
        """Every matrix a forward pass multiplies by: the layers and the LM head."""
        return self.layers * self.layer_params + self.vocab * self.hidden

    @property
    def params(self) -> int:
        """Total parameters (norms left out: under 0.01%)."""
        embed = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.linear_params + embed

    @property
    def weight_memory_bytes(self) -> float:
        """Bytes the checkpoint takes in GPU memory (embedding and LM head in 16 bits)."""
        emb_and_head = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.layer_params * self.weight_bytes + emb_and_head * 2.0

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V of one token, all layers (all tensor-parallel ranks together)."""
        return 2 * self.layers * self.kv_dim * self.kv_bytes


def _m(repo: str, *args: int, **kw: object) -> tuple[str, ModelArch]:
    return repo, ModelArch(repo, *args, **kw)  # type: ignore[arg-type]


# Columns: layers, hidden, heads, kv_heads, intermediate, vocab. Source: HUB.format(repo),
# except where a row says otherwise (a distilled or fine-tuned model with its base's config).
MODELS: dict[str, ModelArch] = dict(
    (
        # --- the io.net runs' models ---
        # HUB: meta-llama/Meta-Llama-3-8B-Instruct
        _m("meta-llama/Meta-Llama-3-8B-Instruct", 32, 4096, 32, 8, 14336, 128256),
        # HUB: meta-llama/Meta-Llama-3-70B-Instruct
        _m("meta-llama/Meta-Llama-3-70B-Instruct", 80, 8192, 64, 8, 28672, 128256),
        # HUB: deepseek-ai/DeepSeek-R1-Distill-Llama-8B (Llama-3.1-8B shape)
        _m("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 32, 4096, 32, 8, 14336, 128256),
        # HUB: deepseek-ai/DeepSeek-R1-Distill-Llama-70B (Llama-3.3-70B shape)
        _m("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", 80, 8192, 64, 8, 28672, 128256),
        # HUB: deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B (Qwen2.5-Math-1.5B, untied)
        _m("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 28, 1536, 12, 2, 8960, 151936),
        # HUB: deepseek-ai/DeepSeek-R1-Distill-Qwen-7B (Qwen2.5-Math-7B)
        _m("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 28, 3584, 28, 4, 18944, 152064),
        # HUB: deepseek-ai/DeepSeek-R1-Distill-Qwen-14B (Qwen2.5-14B)
        _m("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", 48, 5120, 40, 8, 13824, 152064),
        # HUB: deepseek-ai/DeepSeek-R1-Distill-Qwen-32B (Qwen2.5-32B)
        _m("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 64, 5120, 40, 8, 27648, 152064),
        # HUB: Qwen/QwQ-32B-Preview (Qwen2.5-32B)
        _m("Qwen/QwQ-32B-Preview", 64, 5120, 40, 8, 27648, 152064),
        # HUB: nvidia/AceMath-7B-Instruct (Qwen2.5-Math-7B-Instruct)
        _m("nvidia/AceMath-7B-Instruct", 28, 3584, 28, 4, 18944, 152064),
        # HUB: google/gemma-2-9b-it (head_dim 256, tied embeddings)
        _m(
            "google/gemma-2-9b-it",
            42,
            3584,
            16,
            8,
            14336,
            256000,
            tied_embeddings=True,
            head_dim=256,
        ),
        # HUB: microsoft/phi-4
        _m("microsoft/phi-4", 40, 5120, 40, 10, 17920, 100352),
        # HUB: neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic (Llama-3.1-70B
        # shape, FP8 weights and dynamic FP8 activations, BF16 embeddings, LM head and KV)
        _m(
            "neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic",
            80,
            8192,
            64,
            8,
            28672,
            128256,
            weight_bytes=1.0,
        ),
        # --- common sizes ---
        # HUB: meta-llama/Llama-2-7b-hf, meta-llama/Llama-2-70b-hf, meta-llama/Meta-Llama-3-8B
        # (Vidur's profiled models)
        _m("meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 11008, 32000),
        _m("meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 28672, 32000),
        _m("meta-llama/Meta-Llama-3-8B", 32, 4096, 32, 8, 14336, 128256),
        # HUB: meta-llama/Llama-3.1-8B-Instruct, Llama-3.1-70B-Instruct, Llama-3.1-405B-Instruct
        _m("meta-llama/Llama-3.1-8B-Instruct", 32, 4096, 32, 8, 14336, 128256),
        _m("meta-llama/Llama-3.1-70B-Instruct", 80, 8192, 64, 8, 28672, 128256),
        _m("meta-llama/Llama-3.1-405B-Instruct", 126, 16384, 128, 8, 53248, 128256),
        # HUB: meta-llama/Llama-3.3-70B-Instruct
        _m("meta-llama/Llama-3.3-70B-Instruct", 80, 8192, 64, 8, 28672, 128256),
        # HUB: meta-llama/Llama-3.2-1B-Instruct, Llama-3.2-3B-Instruct (tied embeddings)
        _m("meta-llama/Llama-3.2-1B-Instruct", 16, 2048, 32, 8, 8192, 128256, tied_embeddings=True),
        _m("meta-llama/Llama-3.2-3B-Instruct", 28, 3072, 24, 8, 8192, 128256, tied_embeddings=True),
        # HUB: Qwen/Qwen2.5-{0.5B,1.5B,3B} tie their embeddings; 7B and up do not.
        _m("Qwen/Qwen2.5-0.5B-Instruct", 24, 896, 14, 2, 4864, 151936, tied_embeddings=True),
        _m("Qwen/Qwen2.5-1.5B-Instruct", 28, 1536, 12, 2, 8960, 151936, tied_embeddings=True),
        _m("Qwen/Qwen2.5-3B-Instruct", 36, 2048, 16, 2, 11008, 151936, tied_embeddings=True),
        _m("Qwen/Qwen2.5-7B-Instruct", 28, 3584, 28, 4, 18944, 152064),
        _m("Qwen/Qwen2.5-14B-Instruct", 48, 5120, 40, 8, 13824, 152064),
        _m("Qwen/Qwen2.5-32B-Instruct", 64, 5120, 40, 8, 27648, 152064),
        _m("Qwen/Qwen2.5-72B-Instruct", 80, 8192, 64, 8, 29568, 152064),
        # HUB: mistralai/Mistral-7B-Instruct-v0.3
        _m("mistralai/Mistral-7B-Instruct-v0.3", 32, 4096, 32, 8, 14336, 32768),
        # HUB: google/gemma-2-2b-it, google/gemma-2-27b-it (tied embeddings)
        _m(
            "google/gemma-2-2b-it", 26, 2304, 8, 4, 9216, 256000, tied_embeddings=True, head_dim=256
        ),
        _m(
            "google/gemma-2-27b-it",
            46,
            4608,
            32,
            16,
            36864,
            256000,
            tied_embeddings=True,
            head_dim=128,
        ),
    )
)


def model(name: str) -> ModelArch:
    """The architecture of `name` (hub id, or its last path part); KeyError names the choices."""
    if name in MODELS:
        return MODELS[name]
    short = {k.split("/")[-1].lower(): v for k, v in MODELS.items()}
    key = name.split("/")[-1].lower()
    if key in short:
        return short[key]
    raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
