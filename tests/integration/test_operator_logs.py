"""The operator's JSON log (the chart's default) against a real apiserver: one object per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpufleet.api.constants import GROUP, PLURAL, VERSION
from tests.harness import OperatorProcess, create_pool, get_pool, wait_for
from tests.pools import pool

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def _ready(api: Any, namespace: str, name: str) -> bool:
    tiers = get_pool(api, namespace, name).get("status", {}).get("tiers", [])
    return bool(tiers) and all(t.get("readyReplicas") == t.get("desiredReplicas") for t in tiers)


def test_every_line_the_operator_writes_is_a_json_object(
    plane: Any, kube_api: Any, crd: None, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "operator.log"
    # Verbose: Kopf's debug lines quote objects and patches, the hardest messages to keep
    # as JSON.
    operator = OperatorProcess(
        plane.kubeconfig, log, "--no-leader-election", "--log-format=json", "--verbose"
    ).start()
    try:
        body = pool("logs", namespace=namespace)
        body["spec"]["scaling"]["intervalSeconds"] = 5
        create_pool(kube_api, namespace, body)
        wait_for("the pool to be ready", lambda: _ready(kube_api, namespace, "logs"), 90)
        client.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "logs"
        )
        wait_for(
            "the pool to be deleted",
            lambda: (
                not client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL
                )["items"]
            ),
            60,
        )
    finally:
        operator.stop()
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) > 10
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:  # pragma: no cover - the failure's message
            pytest.fail(f"line {number} of the operator's log is not JSON ({error}): {line!r}")
    assert all(
        isinstance(r, dict) and {"time", "level", "logger", "message"} <= set(r) for r in records
    )
    assert any(r["logger"].startswith("gpufleet") for r in records)
    assert any(r["logger"].startswith("kopf") for r in records)
