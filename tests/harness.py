"""Helpers for tests against the real plane: the CRD, the real operator process, waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet.api.constants import GROUP, PLURAL, VERSION
from gpufleet.dev.operator import OperatorProcess

__all__ = ["OperatorProcess"]

ROOT = Path(__file__).resolve().parent.parent
CRD_FILE = ROOT / "crds" / "inferencepools.gpufleet.dev.yaml"

T = TypeVar("T")


def wait_for(
    what: str, check: Callable[[], T | None], timeout_s: float = 60, every_s: float = 0.5
) -> T:
    """Poll until `check` returns something truthy; fail with `what` after the timeout."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except ApiException as error:
            last = f"{error.status} {error.reason}"
        if last:
            return last  # type: ignore[no-any-return]
        time.sleep(every_s)
    raise AssertionError(f"Timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def install_crd(api: client.ApiClient) -> None:
    """Apply the committed CRD (server-side) and wait until it is Established."""
    body = yaml.safe_load(CRD_FILE.read_text())
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as error:
        if error.status != 409:
            raise
        ext.patch_custom_resource_definition(
            body["metadata"]["name"],
            body,
            field_manager="tests",
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def established() -> bool:
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    wait_for("the InferencePool CRD to be Established", established, 30)


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def create_pool(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = custom(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    return result


def get_pool(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = custom(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return result


def condition(pool: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in pool.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return None


def reason_of(
    api: client.ApiClient, namespace: str, name: str, type_: str, reason: str
) -> Callable[[], tuple[dict[str, Any], dict[str, Any]] | None]:
    """For `wait_for`: the pool and its `type_` condition once that carries `reason`."""

    def check() -> tuple[dict[str, Any], dict[str, Any]] | None:
        found = get_pool(api, namespace, name)
        cond = condition(found, type_)
        return (found, cond) if cond is not None and cond["reason"] == reason else None

    return check


def tier_status(pool: dict[str, Any], name: str) -> dict[str, Any]:
    for t in pool.get("status", {}).get("tiers", []):
        if t["name"] == name:
            return dict(t)
    return {}


def kubectl(plane: Any, *args: str) -> str:
    """The plane's kubectl; its stdout, or AssertionError with stderr when it fails."""
    result = plane.kubectl(*args, check=False)
    if result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return str(result.stdout)


def wait_pools_admitted(plane: Any, timeout_s: float = 60.0) -> None:
    """Wait until the apiserver admits a plain pool again after a chart release with the
    pool admission policy is uninstalled: its cached binding keeps refusing pools ("no
    params found") for a moment, and the next test on the shared plane must not meet a
    release that is gone. A server-side dry run as the admin, in `default`."""
    from tests.pools import load_example

    body = load_example()
    body["metadata"]["namespace"] = "default"
    deadline = time.monotonic() + timeout_s
    while True:
        result = plane.kubectl(
            "create", "--dry-run=server", "-f", "-", input=yaml.safe_dump(body), check=False
        )
        if result.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"pools still refused {timeout_s:.0f}s on: {result.stderr}")
        time.sleep(0.5)


def ready_pods(core: client.CoreV1Api, namespace: str, pool: str) -> list[Any]:
    """The pool's pods that are Ready and not terminating."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"gpufleet.dev/pool={pool}").items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]
