"""The CRD is generated from the models, committed, structural and explainable."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gpufleet.api import crd
from tests.pools import EXAMPLES, ROOT, invalid_cases, load_example

pytestmark = pytest.mark.timeout(2)

COMMITTED = ROOT / "crds" / "inferencepools.gpufleet.dev.yaml"
FORBIDDEN = {
    "$ref",
    "$defs",
    "title",
    "anyOf",
    "allOf",
    "oneOf",
    "default",
    "const",
    "patternProperties",
}


def schema() -> dict[str, Any]:
    version = crd.crd()["spec"]["versions"][0]
    result: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return result


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def test_committed_crd_is_current() -> None:
    assert COMMITTED.read_text() == crd.render(), "CRD is stale: run `make generate` and commit"


def test_schema_is_structural() -> None:
    for path, node in walk(schema()):
        assert not FORBIDDEN & node.keys(), f"{path} carries {FORBIDDEN & node.keys()}"
        if path not in ("", ".metadata") and "x-kubernetes-preserve-unknown-fields" not in node:
            assert "type" in node, f"{path} has no type"


def test_every_spec_and_status_field_is_described_for_kubectl_explain() -> None:
    missing = [
        path
        for path, node in walk(schema())
        if path.startswith((".spec", ".status"))
        and not path.endswith(("{}", "[]"))
        and not node.get("description")
    ]
    assert missing == []


def test_named_lists_are_list_maps() -> None:
    spec = schema()["properties"]["spec"]["properties"]
    for name in ("tiers", "trafficClasses"):
        assert spec[name]["x-kubernetes-list-type"] == "map"
        assert spec[name]["x-kubernetes-list-map-keys"] == ["name"]


def test_every_list_and_string_in_spec_is_bounded() -> None:
    for path, node in walk(schema()["properties"]["spec"], ".spec"):
        if node.get("type") == "array":
            assert "maxItems" in node, f"{path} is an unbounded list"
        if node.get("type") == "string" and "enum" not in node:
            assert "maxLength" in node, f"{path} is an unbounded string"


def test_spec_has_no_floats_and_no_phase() -> None:
    for path, node in walk(schema()["properties"]["spec"], ".spec"):
        assert node.get("type") != "number", f"{path} is a float"
        assert not path.endswith(".phase")


def test_cross_field_rules_are_cel() -> None:
    spec = schema()["properties"]["spec"]
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert any("exists_one(c, !has(c.match))" in r for r in rules)
    tier_rules = [
        r["rule"] for r in spec["properties"]["tiers"]["items"]["x-kubernetes-validations"]
    ]
    assert any("minReplicas <= self.maxReplicas" in r for r in tier_rules)
    assert any("has(self.profile)" in r for r in tier_rules)


def test_names_status_subresource_and_columns() -> None:
    body = crd.crd()
    assert body["spec"]["names"]["shortNames"] == ["gpool"]
    assert body["spec"]["names"]["categories"] == ["gpufleet"]
    version = body["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert {"Ready", "Tiers", "P99 TTFT", "$/Mtok", "Age"} <= columns.keys()
    assert all(c.get("priority", 0) == 0 for n, c in columns.items() if n in {"Ready", "Age"})
    assert any(c.get("priority") == 1 for c in columns.values())


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_satisfy_the_openapi_schema(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), schema())


# Cases the OpenAPI part alone must refuse (the rest are CEL or unknown-field rules, which
# only the apiserver evaluates: the integration tests apply the whole table).
SCHEMA_ONLY = {
    "negative-min-replicas",
    "max-replicas-above-limit",
    "replicas-as-word",
    "price-as-number",
    "price-not-decimal",
    "unknown-accelerator",
    "zero-gpus-per-replica",
    "no-tiers",
    "model-name-missing",
    "tier-name-upper-case",
}


@pytest.mark.parametrize(
    "case", [c for c in invalid_cases() if c.id in SCHEMA_ONLY], ids=lambda c: c.id
)
def test_openapi_schema_refuses_invalid_values(case: Any) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(case.apply(load_example()), schema())


def test_api_reference_is_current() -> None:
    from gpufleet.api import reference

    committed = (ROOT / "docs" / "api.md").read_text()
    assert committed == reference.render(), "docs/api.md is stale: run `make generate`"
