"""Generate the InferencePool CustomResourceDefinition from the pydantic models.

The models' JSON schema is turned into a Kubernetes structural schema: `$defs` inlined,
`anyOf [X, null]` folded into X (an optional field is simply not required), `title` and
`default` dropped (defaults are applied when the operator parses, not persisted, so changing
one never needs a migration), and the Kubernetes extensions the models carry in
`json_schema_extra` (CEL rules, list-map markers) kept.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from gpufleet.api.constants import (
    CATEGORIES,
    CRD_NAME,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
)
from gpufleet.api.status import InferencePoolStatus
from gpufleet.api.types import DNS_LABEL, InferencePoolSpec

Schema = dict[str, Any]

# Keywords a structural schema may carry (JSON Schema keywords the apiserver accepts).
_KEPT = {
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "nullable",
}

ROOT_RULES: list[Schema] = [
    {
        "rule": f"self.metadata.name.matches('{DNS_LABEL}')",
        "message": (
            "metadata.name must be a DNS-1035 label (lower case letters, digits and '-', "
            "starting with a letter): it names the tier Services"
        ),
    },
    {
        "rule": "self.spec.tiers.all(t, size(self.metadata.name) + size(t.name) <= 62)",
        "message": (
            "metadata.name and spec.tiers[].name together must be at most 62 characters: "
            "they name each tier's Deployment and Service (<pool>-<tier>)"
        ),
    },
]

PRINTER_COLUMNS: list[Schema] = [
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        "description": "Whether every tier with desired replicas has them Ready.",
    },
    {
        "name": "Tiers",
        "type": "string",
        "jsonPath": ".status.tierSummary",
        "description": "Ready/desired replicas per tier.",
    },
    {
        "name": "P99 TTFT",
        "type": "string",
        "jsonPath": ".status.ttftSummary",
        "description": "P99 time to first token per class against its objective.",
    },
    {
        "name": "$/Mtok",
        "type": "string",
        "jsonPath": ".status.costPerMillionTokens",
        "description": "Dollars per million tokens at the planned demand.",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "Objectives",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="ObjectivesMet")].reason',
        "priority": 1,
        "description": "Whether latency and cost objectives are met, and why not.",
    },
    {
        "name": "Weights",
        "type": "string",
        "jsonPath": ".status.weightSummary",
        "priority": 1,
        "description": "Traffic weights per class and tier.",
    },
    {
        "name": "$/h",
        "type": "string",
        "jsonPath": ".status.costPerHour",
        "priority": 1,
        "description": "Cost of the desired replicas per hour.",
    },
    {
        "name": "Decision",
        "type": "string",
        "jsonPath": ".status.lastDecision.reason",
        "priority": 1,
        "description": "Reason of the last decision.",
    },
]


def structural(schema: Schema) -> Schema:
    """A structural schema from a pydantic JSON schema (with its `$defs`)."""
    defs: Schema = schema.get("$defs", {})
    return _convert(schema, defs)


def _resolve(node: Schema, defs: Schema) -> Schema:
    """Inline a `$ref`; the referring node's own keys (its description) win."""
    if "$ref" not in node:
        return node
    target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
    target = _resolve(target, defs)
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return merged


def _fold_optional(node: Schema, defs: Schema) -> Schema:
    """Fold `anyOf: [X, {type: null}]` into X, keeping the outer description."""
    variants = node.get("anyOf")
    if not variants:
        return node
    non_null = [v for v in variants if v.get("type") != "null"]
    if len(non_null) != 1:
        raise ValueError(f"cannot express a union in a structural schema: {variants}")
    inner = _resolve(non_null[0], defs)
    outer = {k: v for k, v in node.items() if k != "anyOf"}
    return {**inner, **outer}


def _convert(node: Schema, defs: Schema) -> Schema:
    node = _fold_optional(_resolve(node, defs), defs)
    out: Schema = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            out[key] = value
        elif key == "properties":
            out[key] = {name: _convert(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, defs)
        elif key == "patternProperties":
            # A map with constrained keys: the value schema, and a CEL rule for the keys.
            ((key_pattern, value_schema),) = value.items()
            out["additionalProperties"] = _convert(value_schema, defs)
            out.setdefault("x-kubernetes-validations", []).append(
                {
                    "rule": f"self.all(k, k.matches('{key_pattern}'))",
                    "message": "keys must be valid label keys (an optional DNS prefix and a name)",
                }
            )
        elif key == "const":
            out["enum"] = [value]
        elif key in _KEPT:
            out[key] = value
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if "properties" in out:
        out.setdefault("type", "object")
    if out.get("additionalProperties") is False:
        # extra="forbid": the apiserver prunes unknown fields; with kubectl's server-side
        # field validation (the default) an unknown field is refused with its name.
        del out["additionalProperties"]
    if out.get("required") == []:
        del out["required"]
    if "description" in out:
        out["description"] = " ".join(out["description"].split())
    return out


def spec_schema() -> Schema:
    return structural(InferencePoolSpec.model_json_schema(by_alias=True, mode="validation"))


def status_schema() -> Schema:
    return structural(InferencePoolStatus.model_json_schema(by_alias=True, mode="serialization"))


def openapi_schema() -> Schema:
    """The CRD version's openAPIV3Schema."""
    return {
        "type": "object",
        "description": (
            "InferencePool serves one LLM from several GPU tiers and keeps replicas per tier "
            "and traffic weights per class within latency and cost objectives."
        ),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "API version: gpufleet.dev/v1alpha1."},
            "kind": {"type": "string", "description": "Kind: InferencePool."},
            "metadata": {"type": "object"},
            "spec": spec_schema(),
            "status": status_schema(),
        },
        "x-kubernetes-validations": ROOT_RULES,
    }


def crd() -> Schema:
    """The full CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {
                "app.kubernetes.io/name": "gpufleet",
                "app.kubernetes.io/part-of": "gpufleet",
            },
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": list(CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                }
            ],
        },
    }


HEADER = (
    "# Generated by `make generate` (gpufleet.api.crd) from the pydantic models in\n"
    "# operator/gpufleet/api. Do not edit: change the models and regenerate.\n"
)


def render() -> str:
    """The CRD as the YAML text committed under crds/."""
    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=100)
