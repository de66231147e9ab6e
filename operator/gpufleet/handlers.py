"""Kopf registration, and nothing else: decisions live in planning/, I/O in adapters/.

Only watch-event handlers: a pool's events start, wake and stop its loop
(gpufleet.runtime), events on its children (Deployments, Services, the HTTPRoute) wake it.
No handler needs a finalizer, so Kopf adds none and removes the one older gpufleet versions
added (`settings.persistence.finalizer` names it), and it stores no state on the pools.
Kopf posts no Events of its own (the reconciler posts ours, after its status write).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from gpufleet.api.constants import FINALIZER, GROUP, LABEL_POOL, PLURAL, VERSION

GATEWAY_GROUP = "gateway.networking.k8s.io"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # The finalizer gpufleet up to 0.1 put on every pool: Kopf strips it from each pool it
    # sees, as no handler asks for one, so an upgraded operator leaves none behind.
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60


@kopf.on.cleanup()
async def stop_loops(memo: Any, **_: Any) -> None:
    await memo.loops.stop_all()


@kopf.on.event(GROUP, VERSION, PLURAL, id="pool-changed")
async def pool_changed(
    type: str | None, namespace: str | None, name: str, meta: kopf.Meta, memo: Any, **_: Any
) -> None:
    namespace = namespace or "default"
    if type == "DELETED" or meta.get("deletionTimestamp"):
        memo.loops.stop(namespace, name)
        return
    if not memo.loops.owns(namespace, name):  # another replica's shard
        return
    memo.loops.ensure(namespace, name)
    memo.loops.spec_changed(namespace, name, int(meta.get("generation") or 0))


def _child_changed(namespace: str | None, labels: Mapping[str, str], memo: Any) -> None:
    memo.loops.wake(namespace or "default", labels[LABEL_POOL])


@kopf.on.event("apps", "v1", "deployments", labels={LABEL_POOL: kopf.PRESENT}, id="deployment")
def deployment_changed(
    namespace: str | None, labels: Mapping[str, str], memo: Any, **_: Any
) -> None:
    _child_changed(namespace, labels, memo)


@kopf.on.event("", "v1", "services", labels={LABEL_POOL: kopf.PRESENT}, id="service")
def service_changed(namespace: str | None, labels: Mapping[str, str], memo: Any, **_: Any) -> None:
    _child_changed(namespace, labels, memo)


@kopf.on.event(GATEWAY_GROUP, "v1", "httproutes", labels={LABEL_POOL: kopf.PRESENT}, id="route")
def route_changed(namespace: str | None, labels: Mapping[str, str], memo: Any, **_: Any) -> None:
    _child_changed(namespace, labels, memo)
