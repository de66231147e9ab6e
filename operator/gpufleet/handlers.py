"""Kopf registration, and nothing else: decisions live in planning/, I/O in adapters/.

One daemon per InferencePool runs the level-based loop (gpufleet.runtime); watch events on
pools and on their Deployments only wake that loop. Kopf keeps its finalizer and any state
under gpufleet.dev, and posts no Events of its own (the reconciler posts ours, only for
decisions and only after the status write succeeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from gpufleet.api.constants import FINALIZER, GROUP, LABEL_POOL, PLURAL, VERSION


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60


@kopf.daemon(GROUP, VERSION, PLURAL, id="reconcile", cancellation_timeout=5.0)
async def reconcile(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    await memo.loops.run(namespace or "default", name)


@kopf.on.event(GROUP, VERSION, PLURAL, id="pool-changed")
def pool_changed(namespace: str | None, name: str, meta: kopf.Meta, memo: Any, **_: Any) -> None:
    memo.loops.spec_changed(namespace or "default", name, int(meta.get("generation") or 0))


@kopf.on.event("apps", "v1", "deployments", labels={LABEL_POOL: kopf.PRESENT}, id="child-changed")
def child_changed(namespace: str | None, labels: Mapping[str, str], memo: Any, **_: Any) -> None:
    memo.loops.wake(namespace or "default", labels[LABEL_POOL])
