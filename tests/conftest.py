"""Shared fixtures. The local control plane starts once per session, only when a test asks."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# In CI the property tests draw the same examples every run: whether a submission lands is
# not left to the luck of a draw. Elsewhere (`make test`, `make unit`) each run draws new
# ones, so the properties keep being explored; a world one finds goes into its test as an
# @example, as `test_planner_properties.GIVING_WAY` did.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("GPUFLEET_HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parent.parent
NODES_YAML = ROOT / "tests" / "cluster" / "nodes.yaml"


@pytest.fixture(scope="session")
def plane() -> Iterator[Any]:
    """A started local control plane with the Gateway API CRDs and the nodes of nodes.yaml."""
    from gpufleet.dev.cluster import ControlPlane

    cp = ControlPlane()
    cp.start()
    try:
        t = time.monotonic()
        cp.apply_gateway_api_crds()
        cp.add_nodes_from_file(NODES_YAML)
        cp.timings["crds_and_nodes_s"] = time.monotonic() - t
        print(f"\nLocal control plane {cp.server} in {cp.work_dir}: {_fmt(cp.timings)}")
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def kube_api(plane: Any) -> Iterator[Any]:
    """A kubernetes.client.ApiClient, cluster admin on the session's plane."""
    api = plane.api_client()
    yield api
    api.close()


@pytest.fixture
def namespace(kube_api: Any) -> Iterator[str]:
    """A fresh namespace, deleted (and waited for, so its pods free their GPUs) afterwards."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(kube_api)
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.5)
    raise TimeoutError(f"Namespace {name} still exists 90s after deletion")


@pytest.fixture
def gpu_pools(kube_api: Any) -> Iterator[dict[str, Any]]:
    """The pools of nodes.yaml; afterwards the nodes are put back exactly as the file has them."""
    from kubernetes import client

    from gpufleet.dev import nodes

    pools = nodes.load_pools(NODES_YAML)
    yield pools
    wanted = {spec.name: spec for pool in pools.values() for spec in pool.nodes}
    present = {n.metadata.name for n in client.CoreV1Api(kube_api).list_node().items}
    nodes.remove_nodes(kube_api, present - wanted.keys())
    nodes.add_nodes(kube_api, [wanted[n] for n in wanted.keys() - present])


def _fmt(timings: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.1f}s" for k, v in timings.items())
