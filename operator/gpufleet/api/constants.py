"""Names shared by every layer: the API group, labels, annotations, field manager."""

from typing import Final

GROUP: Final = "gpufleet.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "InferencePool"
PLURAL: Final = "inferencepools"
SINGULAR: Final = "inferencepool"
SHORT_NAMES: Final = ("gpool",)
CATEGORIES: Final = ("gpufleet",)
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

LABEL_POOL: Final = f"{GROUP}/pool"
LABEL_TIER: Final = f"{GROUP}/tier"
LABEL_ACCELERATOR: Final = f"{GROUP}/accelerator"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "gpufleet"

FIELD_MANAGER: Final = "gpufleet"
FINALIZER: Final = f"{GROUP}/finalizer"

GPU_RESOURCE: Final = "nvidia.com/gpu"
VLLM_PORT: Final = 8000
DEFAULT_IMAGE: Final = "vllm/vllm-openai:v0.33.0"
