"""The InferencePool spec (gpufleet.dev/v1alpha1) as pydantic models.

These models are the single source of truth: the CRD's OpenAPI schema (and so the text of
`kubectl explain`) is generated from them by `gpufleet.api.crd`, and the operator parses
every object it sees with them. Cross-field rules are written twice on purpose: as CEL in
`x-kubernetes-validations` (so the apiserver refuses a bad object at `kubectl apply`) and
as pydantic validators (so `gpufleet plan -f` and the operator refuse the same objects with
the same message when no apiserver is involved).

Conventions (Kubernetes API conventions, checked by tests): integers carry their unit in
the field name, money and other fractional quantities are decimal strings (no floats in a
spec), lists of named objects instead of maps, CamelCase enums, every list and string
bounded, unknown fields refused.
"""

from __future__ import annotations

import re
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from gpufleet.api.constants import DEFAULT_IMAGE
from gpufleet.api.flags import max_model_len_in
from gpufleet.api.status import InferencePoolStatus
from gpufleet.perf.models import tensor_parallel_runs

# A DNS-1035 label: usable as part of a Service name.
DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DECIMAL_PATTERN = r"^[0-9]{1,9}(\.[0-9]{1,6})?$"
# Keys of label selectors: optional DNS prefix, a name of at most 63 characters.
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$"

Name = Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=DNS_LABEL)]
DecimalString = Annotated[str, StringConstraints(max_length=17, pattern=DECIMAL_PATTERN)]
LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=317, pattern=LABEL_KEY)]
LabelValue = Annotated[str, StringConstraints(max_length=63, pattern=LABEL_VALUE)]
Quantity = Annotated[str, StringConstraints(min_length=1, max_length=32, pattern=QUANTITY)]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=253)]
Arg = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
# An environment variable name every Kubernetes version accepts (C_IDENTIFIER with '-' and
# '.', as core/v1 validated names before relaxing them): no '=', nothing outside ASCII.
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# A Gateway API Hostname: a lower-case DNS name, optionally with a leading wildcard label.
HOSTNAME = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# The largest model a size written in the name may claim (as parametersBillions allows).
MAX_BILLIONS = 2000
EnvName = Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=ENV_NAME)]
Hostname = Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=HOSTNAME)]

# vLLM flags gpufleet sets itself (gpufleet.desired.manifests.vllm_args, a unit test keeps the
# two in step). extraArgs may not set them in either form (`--port=1`, or `--port` then
# `1`), nor with vLLM's underscore spelling; nor -tp (the alias of --tensor-parallel-size)
# or --config (a file that may set any of them).
OWNED_FLAGS = (
    "model",
    "served-model-name",
    "host",
    "port",
    "tensor-parallel-size",
    "shutdown-timeout",
)
_OWNED_ALIASES = ("tp", "config")
OWNED_FLAG = (
    "^--?("
    + "|".join(name.replace("-", "[-_]") for name in (*OWNED_FLAGS, *_OWNED_ALIASES))
    + ")([= ].*)?$"
)


# The longest drain a pool may ask for: an hour covers any single generation; a replica
# that holds its GPU longer than that is stuck, not draining.
MAX_DRAIN_SECONDS = 3600

LIST_MAP_BY_NAME: JsonDict = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
}


def cel(*rules: tuple[str, str, str]) -> ConfigDict:
    """Model config carrying CEL rules (rule, message, fieldPath) into the generated CRD."""
    return ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": rule, "message": message, **({"fieldPath": path} if path else {})}
                for rule, message, path in rules
            ]
        }
    )


def decimal(value: str) -> Decimal:
    """A spec decimal string as a Decimal (the pattern already guarantees it parses)."""
    return Decimal(value)


class Model(BaseModel):
    """Base for every API model: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        # Strict like the apiserver: "5" is not an integer and "yes" is not a boolean.
        strict=True,
    )


class Accelerator(StrEnum):
    """GPU models with a built-in performance profile, or Custom with the tier's own.

    H100 PCIe and RTX 4090 profiles are measured (io.net runs); the others are moved from
    their family's measured card by the first-principles model (gpufleet.planning.derived)."""

    H100_PCIE = "H100-PCIe-80GB"
    H100_SXM = "H100-SXM-80GB"
    H200_SXM = "H200-SXM-141GB"
    A100_SXM = "A100-SXM-80GB"
    L40S = "L40S"
    RTX4090 = "RTX4090"
    RTX5090 = "RTX5090"
    CUSTOM = "Custom"


class EnvVarSource(Model):
    """Where an environment variable's value comes from (a subset of core/v1 EnvVarSource)."""

    model_config = cel(
        (
            "has(self.secretKeyRef) != has(self.configMapKeyRef)",
            "set exactly one of secretKeyRef and configMapKeyRef",
            "",
        )
    )

    secret_key_ref: KeySelector | None = Field(
        default=None, description="A key of a Secret in the pool's namespace."
    )
    config_map_key_ref: KeySelector | None = Field(
        default=None, description="A key of a ConfigMap in the pool's namespace."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVarSource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("set exactly one of secretKeyRef and configMapKeyRef")
        return self


class KeySelector(Model):
    """A key of a Secret or ConfigMap."""

    name: ShortText = Field(description="Name of the Secret or ConfigMap.")
    key: ShortText = Field(description="Key inside it.")
    optional: bool | None = Field(default=None, description="Whether the key may be missing.")


class EnvVar(Model):
    """An environment variable of the vLLM container (for example an HF token from a Secret)."""

    model_config = cel(
        ("!has(self.value) || !has(self.valueFrom)", "set at most one of value and valueFrom", "")
    )

    name: EnvName = Field(
        description="Variable name: letters, digits, '_', '-', '.'; not a leading digit."
    )
    value: Annotated[str, StringConstraints(max_length=4096)] | None = Field(
        default=None, description="Literal value."
    )
    value_from: EnvVarSource | None = Field(
        default=None, description="Take the value from a Secret or ConfigMap key."
    )

    @model_validator(mode="after")
    def _value_or_source(self) -> EnvVar:
        if self.value is not None and self.value_from is not None:
            raise ValueError("set at most one of value and valueFrom")
        return self


EnvVarSource.model_rebuild()


# A size in a model name: the 8B in Meta-Llama-3-8B-Instruct, the 1.5B in Qwen-1.5B.
SIZE_IN_NAME = r"(^|[^0-9.])([0-9]+([.][0-9]+)?)[bB]([^a-zA-Z]|$)"


# The number in a name's size (the 8 of "-8B-"), as CEL computes it for the bound above.
_SIZE_CEL = f"double(self.name.find('{SIZE_IN_NAME}').find('[0-9]+([.][0-9]+)?'))"
OWNED_FLAGS_MESSAGE = (
    "extraArgs may not set a flag gpufleet sets: "
    + ", ".join(f"--{f}" for f in OWNED_FLAGS)
    + ", -tp or --config; use the matching spec field"
)


class WeightDtype(StrEnum):
    """How the checkpoint stores its linear layers' weights."""

    BF16 = "bfloat16"
    FP16 = "float16"
    FP8 = "fp8"


class ModelArchitecture(Model):
    """A model's shape, as its Hugging Face config.json gives it (the names in camelCase)."""

    model_config = cel(
        (
            "self.numAttentionHeads % self.numKeyValueHeads == 0",
            "numKeyValueHeads must divide numAttentionHeads (grouped-query attention)",
            ".numKeyValueHeads",
        ),
        (
            "has(self.headDim) || self.hiddenSize % self.numAttentionHeads == 0",
            "hiddenSize must be a multiple of numAttentionHeads, or set headDim",
            ".headDim",
        ),
    )

    num_hidden_layers: int = Field(ge=1, le=1000, description="Decoder layers.")
    hidden_size: int = Field(ge=1, le=262_144, description="Hidden (model) dimension.")
    num_attention_heads: int = Field(ge=1, le=1024, description="Query heads.")
    num_key_value_heads: int = Field(
        ge=1, le=1024, description="Key/value heads (equal to numAttentionHeads without GQA)."
    )
    intermediate_size: int = Field(ge=1, le=1_048_576, description="MLP inner dimension.")
    vocab_size: int = Field(ge=1, le=10_000_000, description="Vocabulary size.")
    head_dim: int | None = Field(
        default=None, ge=1, le=1024, description="Per-head dimension; hiddenSize / heads if unset."
    )
    tie_word_embeddings: bool = Field(
        default=False, description="Whether the LM head shares the embedding's weights."
    )
    weight_dtype: WeightDtype = Field(
        default=WeightDtype.BF16,
        strict=False,
        description="Storage of the linear layers' weights: bfloat16, float16 or fp8.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ModelArchitecture:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                "numKeyValueHeads: numKeyValueHeads must divide numAttentionHeads "
                "(grouped-query attention)"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                "headDim: hiddenSize must be a multiple of numAttentionHeads, or set headDim"
            )
        return self


class ModelSpec(Model):
    """The model every tier serves."""

    model_config = cel(
        (
            f"has(self.parametersBillions) || self.name.matches('{SIZE_IN_NAME}')",
            "parametersBillions is required when model.name carries no size such as 8B",
            ".parametersBillions",
        ),
        (
            f"has(self.parametersBillions) || !self.name.matches('{SIZE_IN_NAME}') || "
            f"{_SIZE_CEL} > 0.0 && {_SIZE_CEL} <= {MAX_BILLIONS}.0",
            f"the size in model.name must be above 0 and at most {MAX_BILLIONS}B: "
            "set parametersBillions",
            ".parametersBillions",
        ),
        (
            f"!has(self.extraArgs) || self.extraArgs.all(a, !a.matches('{OWNED_FLAG}'))",
            OWNED_FLAGS_MESSAGE,
            ".extraArgs",
        ),
    )

    name: ShortText = Field(
        description="Model to load, passed to vLLM as --model (a Hugging Face id or a path)."
    )
    served_model_name: (
        Annotated[str, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$")]
        | None
    ) = Field(
        default=None,
        description=(
            "Name clients use in requests (--served-model-name). Defaults to the pool name."
        ),
    )
    image: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = Field(
        default=None, description=f"vLLM OpenAI server image. Defaults to {DEFAULT_IMAGE}."
    )
    parameters_billions: int | None = Field(
        default=None,
        ge=1,
        le=2000,
        description=(
            "Model size in billions of parameters, used to pick a performance profile and "
            "the model-load time. Defaults to the size in the model name (8B in "
            "Meta-Llama-3-8B-Instruct); required when the name carries none."
        ),
    )
    architecture: ModelArchitecture | None = Field(
        default=None,
        description=(
            "The model's shape (from its config.json), for the first-principles performance "
            "model: it moves the built-in profile to this model. Not needed for a model it "
            "knows by name (Llama, Qwen, Mistral, Gemma and the io.net models)."
        ),
    )
    extra_args: list[Arg] = Field(
        default_factory=list,
        max_length=64,
        description="Extra vLLM arguments, appended after the ones gpufleet sets.",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=64,
        description="Environment of the vLLM container.",
        json_schema_extra=LIST_MAP_BY_NAME,
    )

    @model_validator(mode="after")
    def _size_known(self) -> ModelSpec:
        size = self.size_billions()
        if size is None:
            raise ValueError(
                "parametersBillions is required when model.name carries no size such as 8B"
            )
        if not 0 < size <= MAX_BILLIONS:
            raise ValueError(
                f"parametersBillions: the size in model.name must be above 0 and at most "
                f"{MAX_BILLIONS}B: set parametersBillions"
            )
        owned = [a for a in self.extra_args if re.fullmatch(OWNED_FLAG, a)]
        if owned:
            raise ValueError(f"extraArgs: {OWNED_FLAGS_MESSAGE} (found {', '.join(owned)})")
        return self

    def size_billions(self) -> float | None:
        """parametersBillions, else the size written in the model name."""
        if self.parameters_billions is not None:
            return float(self.parameters_billions)
        found = re.search(SIZE_IN_NAME, self.name)
        return float(found.group(2)) if found else None


class Toleration(Model):
    """A core/v1 toleration for the tier's node pool taints."""

    model_config = cel(
        (
            "!has(self.operator) || self.operator != 'Exists' || !has(self.value) "
            "|| self.value == ''",
            "value must be empty when operator is Exists",
            ".value",
        ),
        (
            "!has(self.tolerationSeconds) || has(self.effect) && self.effect == 'NoExecute'",
            "tolerationSeconds is allowed only with effect NoExecute",
            ".tolerationSeconds",
        ),
        (
            "has(self.key) && self.key != '' || has(self.operator) && self.operator == 'Exists'",
            "operator must be Exists when key is empty (a toleration of every taint)",
            ".operator",
        ),
    )

    key: LabelKey | None = Field(default=None, description="Taint key; empty matches all keys.")
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="Exists or Equal. Defaults to Equal."
    )
    value: LabelValue | None = Field(default=None, description="Taint value for Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to tolerate; empty matches all effects."
    )
    toleration_seconds: int | None = Field(
        default=None, ge=0, le=86400, description="How long a NoExecute taint is tolerated."
    )

    @model_validator(mode="after")
    def _rules(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("value: value must be empty when operator is Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError(
                "tolerationSeconds: tolerationSeconds is allowed only with effect NoExecute"
            )
        if not self.key and self.operator != "Exists":
            raise ValueError(
                "operator: operator must be Exists when key is empty (a toleration of every taint)"
            )
        return self


class ProfilePoint(Model):
    """One measurement of a replica: P99 TTFT and throughput at a request rate."""

    model_config = cel(
        (
            "double(self.requestsPerSecond) > 0.0",
            "requestsPerSecond must be above 0: a replica measured at no load says nothing "
            "about its capacity",
            ".requestsPerSecond",
        )
    )

    requests_per_second: DecimalString = Field(
        description="Offered request rate of the measurement, as a decimal string."
    )
    measured_ttft_p99_milliseconds: int = Field(
        alias="ttftP99Milliseconds",
        ge=1,
        le=3_600_000,
        description="P99 time to first token measured at that rate.",
    )
    tokens_per_second: int = Field(
        ge=1,
        le=10_000_000,
        description="Throughput at that rate, prompt plus generated tokens per second.",
    )
    tpot_milliseconds: int | None = Field(
        default=None, ge=1, le=60_000, description="Mean time per output token at that rate."
    )

    @model_validator(mode="after")
    def _positive_rate(self) -> ProfilePoint:
        if decimal(self.requests_per_second) <= 0:
            raise ValueError(
                "requestsPerSecond: requestsPerSecond must be above 0: a replica measured at "
                "no load says nothing about its capacity"
            )
        return self


class Profile(Model):
    """Measured performance of one replica of this tier, overriding the built-in profile."""

    points: list[ProfilePoint] = Field(
        min_length=2,
        max_length=32,
        description="Measurements at increasing request rates (at least two).",
    )
    prompt_tokens: int = Field(
        default=200,
        ge=1,
        le=1_000_000,
        description="Mean prompt length of the requests measured. Defaults to 200.",
    )
    output_tokens: int = Field(
        default=200,
        ge=1,
        le=1_000_000,
        description="Mean generated length of the requests measured. Defaults to 200.",
    )
    watts_per_gpu: int | None = Field(
        default=None,
        ge=1,
        le=5000,
        description="Board power of one GPU under load, for energy accounting.",
    )
    model_load_seconds: int | None = Field(
        default=None,
        ge=1,
        le=7200,
        description="Time from a replica's start to Ready (model download and load).",
    )


class ResourceList(Model):
    """CPU and memory of the vLLM container (GPUs are set from gpusPerReplica)."""

    cpu: Quantity | None = Field(default=None, description="CPU quantity, e.g. 8 or 500m.")
    memory: Quantity | None = Field(default=None, description="Memory quantity, e.g. 64Gi.")


def quantity(value: str) -> Decimal:
    """A Kubernetes quantity (of the QUANTITY pattern) as a number: "500m" -> 0.5."""
    found = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(m|k|Ki|Mi|Gi|Ti|M|G|T)?", value)
    if found is None:
        raise ValueError(f"not a quantity: {value!r}")
    return Decimal(found.group(1)) * _SUFFIX[found.group(2) or ""]


_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
}


def _request_within_limit(resource: str) -> tuple[str, str, str]:
    both = (
        f"has(self.requests) && has(self.limits) && has(self.requests.{resource}) "
        f"&& has(self.limits.{resource})"
    )
    return (
        f"!({both}) || quantity(self.requests.{resource})"
        f".compareTo(quantity(self.limits.{resource})) <= 0",
        f"requests.{resource} must not exceed limits.{resource}",
        f".requests.{resource}",
    )


class Resources(Model):
    """Requests and limits of the vLLM container, besides its GPUs."""

    model_config = cel(_request_within_limit("cpu"), _request_within_limit("memory"))

    requests: ResourceList | None = Field(default=None, description="Resource requests.")
    limits: ResourceList | None = Field(default=None, description="Resource limits.")

    @model_validator(mode="after")
    def _requests_within_limits(self) -> Resources:
        for resource in ("cpu", "memory"):
            asked = getattr(self.requests, resource, None) if self.requests else None
            limit = getattr(self.limits, resource, None) if self.limits else None
            if asked and limit and quantity(asked) > quantity(limit):
                raise ValueError(
                    f"requests.{resource}: requests.{resource} must not exceed limits.{resource}"
                )
        return self


class GpuDatasheet(Model):
    """An accelerator gpufleet has no profile for, by its datasheet numbers."""

    model_config = cel(
        (
            "!has(self.fp8TFLOPS) || self.fp8TFLOPS >= self.bf16TFLOPS",
            "fp8TFLOPS must be at least bf16TFLOPS (dense rates, no sparsity)",
            ".fp8TFLOPS",
        ),
    )

    bf16_tflops: int = Field(
        ge=1,
        le=100_000,
        alias="bf16TFLOPS",
        description="Dense BF16/FP16 tensor TFLOPS with FP32 accumulate (without sparsity).",
    )
    fp8_tflops: int | None = Field(
        default=None,
        ge=1,
        le=200_000,
        alias="fp8TFLOPS",
        description="Dense FP8 tensor TFLOPS; unset for a GPU without FP8.",
    )
    memory_bandwidth_gbps: int = Field(
        ge=1, le=100_000, alias="memoryBandwidthGBps", description="Memory bandwidth, GB/s."
    )
    memory_gib: int = Field(
        ge=1, le=10_000, alias="memoryGiB", description="GPU memory as the driver reports it, GiB."
    )
    pcie_generation: int = Field(
        default=4, ge=3, le=6, description="PCIe generation of the x16 host link."
    )
    nvlink_gbps: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        alias="nvlinkGBps",
        description="Per-direction NVLink bandwidth per GPU, GB/s; unset without NVLink.",
    )
    peer_to_peer: bool = Field(
        default=True,
        description="GPU-to-GPU DMA (false on GeForce cards: all-reduce is staged in host memory).",
    )
    board_power_watts: int = Field(
        ge=1, le=10_000, description="Board power (TDP), watts, for energy per token."
    )

    @model_validator(mode="after")
    def _fp8(self) -> GpuDatasheet:
        if self.fp8_tflops is not None and self.fp8_tflops < self.bf16_tflops:
            raise ValueError(
                "fp8TFLOPS: fp8TFLOPS must be at least bf16TFLOPS (dense rates, no sparsity)"
            )
        return self


class Tier(Model):
    """One GPU tier: a node pool of one accelerator type and the vLLM replicas on it."""

    model_config = cel(
        (
            "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
            "minReplicas must not exceed maxReplicas",
            ".minReplicas",
        ),
        (
            "self.accelerator != 'Custom' || has(self.profile) || has(self.gpu)",
            "profile or gpu is required when accelerator is Custom",
            ".accelerator",
        ),
        (
            "!has(self.gpu) || self.accelerator == 'Custom'",
            "gpu describes a Custom accelerator only: the built-in ones have their datasheets",
            ".gpu",
        ),
    )

    name: Annotated[str, StringConstraints(min_length=1, max_length=20, pattern=DNS_LABEL)] = Field(
        description="Tier name; the Deployment and Service are named <pool>-<tier>."
    )
    accelerator: Accelerator = Field(
        strict=False,
        description=(
            "GPU model, which picks the built-in performance profile: measured for "
            "H100-PCIe-80GB and RTX4090; for H100-SXM-80GB, H200-SXM-141GB, A100-SXM-80GB, "
            "L40S and RTX5090, its family's measured card moved by the first-principles "
            "model; or Custom with the tier's own profile or its gpu datasheet."
        ),
    )
    gpus_per_replica: int = Field(
        default=1,
        ge=1,
        le=8,
        description="GPUs per replica, passed to vLLM as --tensor-parallel-size. Defaults to 1.",
    )
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        max_length=16,
        description="Node labels that pin this tier's pods to its node pool.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=16, description="Tolerations for the node pool's taints."
    )
    min_replicas: int = Field(
        default=0, ge=0, le=1000, description="Fewest replicas the tier runs. Defaults to 0."
    )
    max_replicas: int = Field(ge=0, le=1000, description="Most replicas the tier may run.")
    price_per_gpu_hour: DecimalString = Field(
        alias="pricePerGPUHour",
        description='Price of one GPU for one hour, as a decimal string such as "2.00".',
    )
    preemptible: bool = Field(
        default=False,
        description="Whether nodes may vanish (idle consumer GPUs); lost capacity overflows.",
    )
    profile: Profile | None = Field(
        default=None,
        description=(
            "This tier's measured performance; a Custom accelerator needs it or gpu. It "
            "takes precedence over every built-in or derived profile."
        ),
    )
    gpu: GpuDatasheet | None = Field(
        default=None,
        description=(
            "A Custom accelerator's datasheet: its profile is derived from the measured card "
            "of the nearest memory bandwidth, moved by the first-principles model run on that "
            "card's fitted efficiencies (nothing measured this one: the profile says so)."
        ),
    )
    resources: Resources | None = Field(
        default=None, description="CPU and memory of each replica's vLLM container."
    )

    @property
    def price_per_replica_hour(self) -> float:
        """Dollars per hour of one replica: the GPU price times its GPUs."""
        return float(decimal(self.price_per_gpu_hour)) * self.gpus_per_replica

    @model_validator(mode="after")
    def _rules(self) -> Tier:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"minReplicas ({self.min_replicas}) must not exceed maxReplicas "
                f"({self.max_replicas})"
            )
        custom = self.accelerator is Accelerator.CUSTOM
        if custom and self.profile is None and self.gpu is None:
            raise ValueError("accelerator: profile or gpu is required when accelerator is Custom")
        if self.gpu is not None and not custom:
            raise ValueError(
                "gpu: gpu describes a Custom accelerator only: the built-in ones have their "
                "datasheets"
            )
        return self


class HeaderMatch(Model):
    """A request header a traffic class matches on."""

    name: Annotated[
        str,
        StringConstraints(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$"),
    ] = Field(description="Header name (case-insensitive).")
    value: Annotated[str, StringConstraints(min_length=1, max_length=4096)] = Field(
        description="Header value to match."
    )
    type: Literal["Exact", "RegularExpression"] = Field(
        default="Exact", description="Exact or RegularExpression. Defaults to Exact."
    )


class ClassMatch(Model):
    """Which requests belong to a traffic class: all headers must match."""

    headers: list[HeaderMatch] = Field(
        min_length=1, max_length=8, description="Headers that must all match."
    )


class TrafficClass(Model):
    """A class of requests with its own latency objective and priority."""

    name: Name = Field(description="Class name.")
    match: ClassMatch | None = Field(
        default=None,
        description="Requests this class takes. Exactly one class has no match: the default.",
    )
    ttft_p99_objective_milliseconds: int = Field(
        alias="ttftP99Milliseconds",
        ge=1,
        le=600_000,
        description="Objective: P99 time to first token, in milliseconds.",
    )
    priority: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="When capacity runs short, higher priority classes are served first.",
    )
    mean_prompt_tokens: int = Field(
        default=200,
        ge=1,
        le=1_000_000,
        description=(
            "Typical prompt length of this class, used to turn demand in tokens into "
            "requests and to scale TTFT with prompt length. Defaults to 200."
        ),
    )
    mean_output_tokens: int = Field(
        default=200,
        ge=1,
        le=1_000_000,
        description="Typical generated length of this class. Defaults to 200.",
    )
    demand_query: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = Field(
        default=None,
        description=(
            "PromQL giving this class's demand in tokens per second (prompt plus generated), "
            "for example from a gateway's per-route counters. Without it, demand is inferred "
            "from each tier's token rates and the routing weights over the metrics window."
        ),
    )

    @property
    def objective_seconds(self) -> float:
        """The P99 TTFT objective in seconds, the unit the planner computes in."""
        return self.ttft_p99_objective_milliseconds / 1000.0

    @property
    def shape(self) -> tuple[float, float]:
        """Mean prompt and output tokens of one request of this class."""
        return float(self.mean_prompt_tokens), float(self.mean_output_tokens)

    @property
    def tokens_per_request(self) -> float:
        return float(self.mean_prompt_tokens + self.mean_output_tokens)


class Objectives(Model):
    """Cost objectives; latency objectives live on the traffic classes."""

    max_cost_per_million_tokens: DecimalString | None = Field(
        default=None,
        description="Objective: the most to pay per million tokens served, in dollars.",
    )
    max_hourly_cost: DecimalString | None = Field(
        default=None,
        description="Hard budget: the fleet never costs more per hour than this, in dollars.",
    )


class PerformanceModel(StrEnum):
    """Which model of a replica's capacity and latency the planner and the simulator use."""

    PROFILES = "Profiles"
    ENGINE = "Engine"


class Scaling(Model):
    """How often and how carefully the operator re-decides."""

    interval_seconds: int = Field(
        default=30, ge=5, le=3600, description="Seconds between decisions. Defaults to 30."
    )
    scale_down_delay_seconds: int = Field(
        default=300,
        ge=0,
        le=86400,
        description=(
            "A tier shrinks only after this long of lower recommendations. Defaults to 300."
        ),
    )
    headroom_percent: int = Field(
        default=20,
        ge=0,
        le=400,
        description="Capacity bought above observed demand, in percent. Defaults to 20.",
    )
    forecast_percentile: int = Field(
        default=90,
        ge=50,
        le=99,
        description=(
            "The quantile of the demand forecast planned for, in percent: 50 plans for the "
            "expected demand; higher holds a burst reserve sized from the demand's own "
            "volatility over a replica's lead time, and holds the peak of recurring bursts "
            "shorter than that lead time until the next is due at this quantile. Defaults "
            "to 90."
        ),
    )
    hedge_preemptible: bool = Field(
        default=True,
        description=(
            "Run, on each preemptible tier, the replicas it is expected to lose within its "
            "lead time (at forecastPercentile), from its node loss rate learned online. "
            "Defaults to true."
        ),
    )
    performance_model: PerformanceModel = Field(
        default=PerformanceModel.PROFILES,
        strict=False,
        description=(
            "The model of a replica's capacity and P99 TTFT the planner sizes with. Profiles: "
            "fitted on io.net's 200-request vLLM runs (H100 PCIe, RTX 4090; other GPU types "
            "moved from them), whose completed rate understates a replica under steady load "
            "and whose H100 runs were mostly served from the prefix cache. Engine: "
            "gpufleet's first-principles vLLM engine run at steady state with new prompts, on "
            "the tier's GPU datasheet, the model's architecture and the tier's vLLM settings "
            "(BENCHMARKS.md compares both with every io.net run); a model whose shape "
            "gpufleet does not know is sized on its profile until spec.model.architecture is "
            "set. A tier's own profile is used either way. Defaults to Profiles."
        ),
    )
    drain_seconds: int | None = Field(
        default=None,
        ge=0,
        le=MAX_DRAIN_SECONDS,
        description=(
            "How long a replica that is leaving keeps serving the requests it already has "
            "(vLLM's --shutdown-timeout) before it stops. Defaults to the longest a request "
            "of any class should need: its TTFT objective plus its output tokens at a slow "
            "decode rate. 0 stops at once, cutting requests in flight."
        ),
    )


class ParentRef(Model):
    """A Gateway the pool's HTTPRoute attaches to."""

    name: Name = Field(description="Gateway name.")
    namespace: Name | None = Field(
        default=None, description="Gateway namespace. Defaults to the pool's namespace."
    )
    section_name: Name | None = Field(default=None, description="Listener name on the Gateway.")


class Routing(Model):
    """Where the pool's traffic enters: the HTTPRoute's parents."""

    parent_refs: list[ParentRef] = Field(
        default_factory=list,
        max_length=8,
        description="Gateways the HTTPRoute attaches to. Without any, no HTTPRoute is written.",
    )
    hostnames: list[Hostname] = Field(
        default_factory=list, max_length=16, description="Hostnames the HTTPRoute matches."
    )


class PodOptions(Model):
    """Settings of the vLLM pods that are not about the model or a tier."""

    automount_service_account_token: bool = Field(
        default=False,
        description=(
            "Mount the namespace's default ServiceAccount token into the vLLM pods. Defaults "
            "to false: vLLM needs no Kubernetes API access."
        ),
    )


# vLLM splits the attention heads evenly over a replica's GPUs (--tensor-parallel-size),
# and the key/value heads too, or replicates them evenly where there are fewer of them than
# GPUs (gpufleet.perf.models.tensor_parallel_runs, which the Python check calls): where a
# model's shape is given, a tier whose pods vLLM would refuse to start is refused.
_TP_CEL = (
    "self.model.architecture.numAttentionHeads % t.gpusPerReplica == 0 && "
    "(t.gpusPerReplica >= self.model.architecture.numKeyValueHeads ? "
    "t.gpusPerReplica % self.model.architecture.numKeyValueHeads == 0 : "
    "self.model.architecture.numKeyValueHeads % t.gpusPerReplica == 0)"
)
# A context the spec sets as one plain `--max-model-len=N`: the apiserver holds the classes'
# lengths within it (the operator reads every form vLLM takes: `api.flags`).
_CONTEXT_ARG = "^--max[-_]model[-_]len=[0-9]{1,9}$"
_DEFAULT_PROMPT = TrafficClass.model_fields["mean_prompt_tokens"].default
_DEFAULT_OUTPUT = TrafficClass.model_fields["mean_output_tokens"].default
_CONTEXT_CEL = (
    "!has(self.model.extraArgs) || "
    "size(self.model.extraArgs.filter(a, a.matches('^--max[-_]model[-_]len'))) != 1 || "
    f"!self.model.extraArgs.exists(a, a.matches('{_CONTEXT_ARG}')) || "
    "self.trafficClasses.all(c, "
    f"(has(c.meanPromptTokens) ? c.meanPromptTokens : {_DEFAULT_PROMPT}) + "
    f"(has(c.meanOutputTokens) ? c.meanOutputTokens : {_DEFAULT_OUTPUT}) <= "
    f"int(self.model.extraArgs.filter(a, a.matches('{_CONTEXT_ARG}'))[0].split('=')[1]))"
)
CONTEXT_MESSAGE = (
    "every traffic class's meanPromptTokens + meanOutputTokens must fit the model's "
    "--max-model-len: vLLM refuses a prompt of the context or more and stops an output "
    "where the context ends; lower them, or raise --max-model-len in spec.model.extraArgs"
)
TP_MESSAGE = (
    "every tier's gpusPerReplica must divide model.architecture.numAttentionHeads and split "
    "its numKeyValueHeads evenly: vLLM refuses another --tensor-parallel-size"
)


class InferencePoolSpec(Model):
    """What to serve, on which GPU tiers, for which traffic classes and objectives."""

    model_config = cel(
        (
            "self.tiers.all(t, self.tiers.exists_one(u, u.name == t.name))",
            "tiers names must be unique",
            ".tiers",
        ),
        (
            "self.trafficClasses.all(c, self.trafficClasses.exists_one(d, d.name == c.name))",
            "trafficClasses names must be unique",
            ".trafficClasses",
        ),
        (
            "self.trafficClasses.exists_one(c, !has(c.match))",
            "trafficClasses must have exactly one default class (one without match)",
            ".trafficClasses",
        ),
        (
            "self.trafficClasses.all(c, !has(c.match) || "
            "self.trafficClasses.exists_one(d, has(d.match) && d.match == c.match))",
            "trafficClasses must not share a match: the second class would never get traffic",
            ".trafficClasses",
        ),
        (
            f"!has(self.model.architecture) || self.tiers.all(t, {_TP_CEL})",
            TP_MESSAGE,
            ".tiers",
        ),
        (_CONTEXT_CEL, CONTEXT_MESSAGE, ".trafficClasses"),
    )

    model: ModelSpec = Field(description="The model every tier serves.")
    tiers: list[Tier] = Field(
        min_length=1,
        max_length=8,
        description="GPU tiers, each pinned to a node pool.",
        json_schema_extra=LIST_MAP_BY_NAME,
    )
    traffic_classes: list[TrafficClass] = Field(
        min_length=1,
        max_length=8,
        description="Traffic classes with their latency objectives; exactly one has no match.",
        json_schema_extra=LIST_MAP_BY_NAME,
    )
    objectives: Objectives = Field(
        default_factory=Objectives, description="Cost objectives and the hourly budget."
    )
    scaling: Scaling = Field(default_factory=Scaling, description="Decision interval and delays.")
    routing: Routing = Field(default_factory=Routing, description="Gateway API routing.")
    pods: PodOptions = Field(
        default_factory=PodOptions, description="Settings of the vLLM pods of every tier."
    )

    @model_validator(mode="after")
    def _rules(self) -> InferencePoolSpec:
        for field, items in (("tiers", self.tiers), ("trafficClasses", self.traffic_classes)):
            names = [item.name for item in items]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ValueError(f"{field} names must be unique: {', '.join(duplicates)} repeated")
        matches = [
            tuple((h.name, h.value, h.type) for h in c.match.headers)
            for c in self.traffic_classes
            if c.match is not None
        ]
        if len(matches) != len(set(matches)):
            raise ValueError(
                "trafficClasses must not share a match: the second class would never get traffic"
            )
        defaults = [c.name for c in self.traffic_classes if c.match is None]
        if len(defaults) != 1:
            raise ValueError(
                "trafficClasses must have exactly one default class (one without match), "
                f"found {len(defaults)}"
            )
        context = max_model_len_in(self.model.extra_args)
        for i, c in enumerate(self.traffic_classes):
            total = c.mean_prompt_tokens + c.mean_output_tokens
            if context is not None and total > context:
                raise ValueError(
                    f"trafficClasses[{i}]: {CONTEXT_MESSAGE} (it is {context}; "
                    f"{c.name}'s lengths add up to {total})"
                )
        shape = self.model.architecture
        if shape is not None:
            heads, kv = shape.num_attention_heads, shape.num_key_value_heads
            for i, t in enumerate(self.tiers):
                n = t.gpus_per_replica
                if not tensor_parallel_runs(heads, kv, n):
                    raise ValueError(f"tiers[{i}].gpusPerReplica: {TP_MESSAGE} (it is {n})")
        return self


class ObjectMeta(Model):
    """The parts of metadata the operator reads."""

    model_config = ConfigDict(
        extra="ignore", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    name: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class InferencePool(Model):
    """An InferencePool as the operator sees it: metadata, spec and (raw) status."""

    model_config = ConfigDict(
        extra="ignore", alias_generator=to_camel, populate_by_name=True, frozen=True
    )

    api_version: Literal["gpufleet.dev/v1alpha1"] = "gpufleet.dev/v1alpha1"
    kind: Literal["InferencePool"] = "InferencePool"
    metadata: ObjectMeta
    spec: InferencePoolSpec
    status: InferencePoolStatus = Field(default_factory=InferencePoolStatus)

    @model_validator(mode="after")
    def _names_fit(self) -> InferencePool:
        if not _matches(DNS_LABEL, self.metadata.name):
            raise ValueError(
                "metadata.name must be a DNS-1035 label (lower case letters, digits and '-', "
                "starting with a letter): it names the tier Services"
            )
        for tier in self.spec.tiers:
            if len(self.metadata.name) + 1 + len(tier.name) > 63:
                raise ValueError(
                    f"metadata.name and spec.tiers[].name {tier.name!r} together exceed 62 "
                    "characters: they name the tier's Deployment and Service"
                )
        return self


def _matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None
