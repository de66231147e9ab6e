"""The per-pool loop: a failing pool backs off, its children cannot wake it, a new spec can."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from gpufleet.api.status import Reason
from gpufleet.reconcile import PassResult
from gpufleet.runtime import Loops
from gpufleet.telemetry import Telemetry

pytestmark = pytest.mark.timeout(5)


class Passes:
    """A Reconciler stand-in counting passes; they fail while `failing` is set."""

    def __init__(self) -> None:
        self.kube = self
        self.telemetry = Telemetry()
        self.calls = 0
        self.failing = True

    def get_pool(self, namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"scaling": {"intervalSeconds": 3600}}}

    def reconcile(self, body: dict[str, Any]) -> PassResult:
        self.calls += 1
        failure = Reason.CHILD_APPLY_FAILED if self.failing else None
        return PassResult(False, (), (), (), None, failure=failure)


def test_failing_pool_backs_off_ignores_its_children_and_wakes_on_a_new_spec() -> None:
    async def scenario() -> None:
        passes = Passes()
        loops = Loops(cast(Any, passes), debounce_seconds=0, retry_seconds=0.3)
        loops.spec_changed("ns", "p", 1)
        loops.ensure("ns", "p")
        loops.ensure("ns", "p")  # one loop per pool
        await asyncio.sleep(0.1)
        assert passes.calls == 1 and loops.failures("ns", "p") == 1
        for _ in range(5):  # its own children changing (a hot loop before issue 19)
            loops.wake("ns", "p")
            await asyncio.sleep(0.02)
        assert passes.calls == 1
        await asyncio.sleep(0.3)  # the first backoff
        assert passes.calls == 2 and loops.failures("ns", "p") == 2
        passes.failing = False
        loops.spec_changed("ns", "p", 2)  # a new spec is tried at once
        await asyncio.sleep(0.1)
        assert passes.calls == 3 and loops.failures("ns", "p") == 0
        loops.wake("ns", "p")  # a healthy pool's child wakes it
        await asyncio.sleep(0.1)
        assert passes.calls == 4
        assert loops.running() == {("ns", "p")}
        loops.stop("ns", "p")
        await asyncio.sleep(0)
        await loops.stop_all()
        assert loops.running() == set()

    asyncio.run(scenario())
