"""The chart's metadata, values and CRD agree with the package, and helm accepts it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from gpufleet.api import chart, crd
from tests.pools import ROOT, load_example
from tests.unit.chart.helm import CHART, Helm, documents, find, write_values
from tests.unit.chart.values_doc import misnamed, read_values, undocumented

pytestmark = pytest.mark.timeout(30)

VALUES = CHART / "values.yaml"
SCHEMA = CHART / "values.schema.json"


def load_yaml(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(path.read_text())
    return body


def test_app_version_is_the_package_version() -> None:
    package = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    meta = load_yaml(CHART / "Chart.yaml")
    assert meta["appVersion"] == package
    assert meta["apiVersion"] == "v2"


def test_every_value_is_documented_by_a_comment_starting_with_its_key() -> None:
    values = read_values(VALUES)
    assert len(values) > 20, "the values parser found too few keys"
    assert undocumented(values) == []
    assert misnamed(values) == []


def test_default_values_satisfy_the_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(load_yaml(VALUES), schema)


def test_schema_knows_exactly_the_top_level_values() -> None:
    schema = json.loads(SCHEMA.read_text())
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(load_yaml(VALUES))


def test_committed_crd_template_is_current() -> None:
    committed = (CHART / "templates" / "crd.yaml").read_text()
    assert committed == chart.render(), "the chart's CRD is stale: run `make generate`"


def test_crd_renderer_refuses_text_helm_would_template(monkeypatch: pytest.MonkeyPatch) -> None:
    original = crd.crd

    def with_braces() -> dict[str, Any]:
        body = original()
        body["spec"]["names"]["kind"] = "{{ .Values }}"
        return body

    monkeypatch.setattr(crd, "crd", with_braces)
    with pytest.raises(ValueError, match="escape it"):
        chart.render()


def test_helm_lint_strict_passes(helm: Helm) -> None:
    result = helm.run("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in result.stdout


def test_rendered_crd_is_the_generated_crd(helm: Helm) -> None:
    rendered = find(documents(helm.template()), "CustomResourceDefinition")
    generated = crd.crd()
    assert rendered["spec"] == generated["spec"]
    assert rendered["metadata"]["name"] == generated["metadata"]["name"]
    assert rendered["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert generated["metadata"]["labels"].items() <= rendered["metadata"]["labels"].items()


@pytest.mark.parametrize(
    ("values", "has_crd", "kept"),
    [
        ({}, True, True),
        ({"crds": {"keep": False}}, True, False),
        ({"crds": {"enabled": False}}, False, False),
    ],
    ids=["default", "not-kept", "disabled"],
)
def test_crd_switches(
    values: dict[str, Any], has_crd: bool, kept: bool, helm: Helm, tmp_path: Path
) -> None:
    docs = documents(helm.template(write_values(tmp_path / "v.yaml", values)))
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == (1 if has_crd else 0)
    if has_crd:
        annotations = crds[0]["metadata"].get("annotations", {})
        assert (annotations.get("helm.sh/resource-policy") == "keep") is kept


def test_every_resource_carries_the_standard_labels(helm: Helm) -> None:
    for doc in documents(helm.template()):
        labels = doc["metadata"]["labels"]
        for key in ("name", "instance", "version", "managed-by", "part-of"):
            assert f"app.kubernetes.io/{key}" in labels, f"{doc['kind']} lacks {key}"
        assert labels["app.kubernetes.io/version"] == load_yaml(CHART / "Chart.yaml")["appVersion"]


def test_one_kind_per_template_file() -> None:
    for path in sorted((CHART / "templates").glob("*.yaml")):
        kinds = {
            line.split(":", 1)[1].strip()
            for line in path.read_text().splitlines()
            if line.startswith("kind:")
        }
        assert len(kinds) == 1, f"{path.name} holds {kinds}"


def test_the_vllm_pod_monitor_selects_the_pods_the_operator_runs(
    helm: Helm, tmp_path: Path
) -> None:
    """Its selector, port and path match every tier's Deployment the operator writes, and
    its relabelings keep the labels the operator's queries select on."""
    from gpufleet.adapters import promql
    from gpufleet.api.types import InferencePool
    from gpufleet.desired import manifests

    values = {"prometheus": {"vllmPodMonitor": {"enabled": True}}}
    docs = documents(helm.template(write_values(tmp_path / "v.yaml", values)))
    spec = find(docs, "PodMonitor")["spec"]
    pool = InferencePool.model_validate(
        {**load_example(), "metadata": {"name": "p", "namespace": "llm"}}
    )
    for tier in pool.spec.tiers:
        template = manifests.deployment(pool, tier, 1)["spec"]["template"]
        labels = template["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        for expression in spec["selector"]["matchExpressions"]:
            assert expression["operator"] == "Exists" and expression["key"] in labels
        ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        endpoint = spec["podMetricsEndpoints"][0]
        assert endpoint["port"] in ports
        assert endpoint["path"] == template["metadata"]["annotations"]["prometheus.io/path"]
    endpoint = spec["podMetricsEndpoints"][0]
    assert endpoint["interval"] == "15s"  # prometheus.scrapeIntervalSeconds' default
    kept = endpoint["relabelings"]
    for label in (promql.POOL_LABEL, promql.TIER_LABEL):
        assert any(r.get("action") == "labelmap" and label in r["regex"] for r in kept)
    assert {r.get("targetLabel") for r in kept} >= {promql.NAMESPACE_LABEL, promql.POD_LABEL}
    assert spec["namespaceSelector"] == {"any": True}
    # Off by default.
    assert not [d for d in documents(helm.template()) if d["kind"] == "PodMonitor"]
