"""The per-pool loop: a failing pool backs off, its children cannot wake it, a new spec can."""

from __future__ import annotations

import asyncio
import time
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
        self.early: list[str | None] = []  # each pass's `early`

    def get_pool(self, namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"scaling": {"intervalSeconds": 3600}}}

    def reconcile(self, body: dict[str, Any], early: str | None = None) -> PassResult:
        self.calls += 1
        self.early.append(early)
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


class SlowPasses(Passes):
    """Passes that take a while in their thread, recording when each ends."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.ended: list[str] = []

    def reconcile(self, body: dict[str, Any], early: str | None = None) -> PassResult:
        import time

        time.sleep(0.2)
        self.ended.append(body["metadata"]["name"])
        return super().reconcile(body)


def test_retired_pools_finish_their_pass_in_flight_and_stop_and_others_go_on() -> None:
    async def scenario() -> None:
        passes = SlowPasses()
        owned = {"a", "b"}
        loops = Loops(cast(Any, passes), debounce_seconds=0, owns=lambda ns, n: n in owned)
        for name in ("a", "b", "c"):
            loops.ensure("ns", name)
        assert loops.running() == {("ns", "a"), ("ns", "b")}  # c is another replica's
        await asyncio.sleep(0.05)  # a's and b's first passes are in their threads
        await loops.retire(lambda ns, n: n == "a")
        # Retire returned only after a's pass in flight had ended: nothing of a runs now.
        assert "a" in passes.ended
        assert loops.running() == {("ns", "b")}
        loops.wake("ns", "a")  # a child of a changes: no loop of a to wake any more
        await asyncio.sleep(0.3)
        assert passes.ended.count("a") == 1
        await loops.stop_all()

    asyncio.run(scenario())


def test_a_spec_change_is_timed_until_the_pass_that_reads_it_and_passes_count_by_shard() -> None:
    class Versioned(SlowPasses):
        generation = 1

        def get_pool(self, namespace: str, name: str) -> dict[str, Any]:
            body = super().get_pool(namespace, name)
            body["metadata"]["generation"] = self.generation
            return body

    def depth(telemetry: Telemetry, shard: str) -> float | None:
        return telemetry.registry.get_sample_value(
            "gpufleet_reconcile_queue_depth", {"shard": shard}
        )

    async def scenario() -> None:
        passes = Versioned()
        telemetry = passes.telemetry
        loops = Loops(cast(Any, passes), debounce_seconds=0)
        loops.shard_of = lambda namespace, name: 3
        loops.spec_changed("ns", "p", 1)
        loops.ensure("ns", "p")
        await asyncio.sleep(0.05)
        assert depth(telemetry, "3") == 1  # running in its thread
        await asyncio.sleep(0.25)
        assert depth(telemetry, "3") == 0
        count = "gpufleet_spec_change_to_reconcile_seconds_count"
        assert telemetry.registry.get_sample_value(count) == 0  # the first sight is no change
        passes.generation = 2
        loops.spec_changed("ns", "p", 2)
        loops.spec_changed("ns", "p", 2)  # the same change seen twice is timed once
        await asyncio.sleep(0.3)
        assert telemetry.registry.get_sample_value(count) == 1
        total = telemetry.registry.get_sample_value("gpufleet_spec_change_to_reconcile_seconds_sum")
        assert total is not None and 0 < total < 0.2  # woken at once, timed at the read
        await loops.stop_all()

    asyncio.run(scenario())


def test_the_event_loop_lag_shows_a_blocking_call() -> None:
    from gpufleet.runtime import measure_lag

    async def scenario() -> list[float]:
        lags: list[float] = []
        task = asyncio.create_task(measure_lag(lags.append, period=0.02))
        await asyncio.sleep(0.1)
        import time

        time.sleep(0.3)  # noqa: ASYNC251  (holds the loop, as planning on its thread would)
        await asyncio.sleep(0.1)
        task.cancel()
        return lags

    lags = asyncio.run(scenario())
    assert len(lags) >= 5
    assert max(lags) >= 0.25  # the held timer came late by about the block
    assert sorted(lags)[len(lags) // 2] < 0.05  # the others on time


def test_retiring_calls_off_passes_still_waiting_for_a_thread_and_they_never_write() -> None:
    async def scenario() -> float:
        passes = SlowPasses()  # 0.2 s a pass, on the one worker thread: a backlog
        loops = Loops(cast(Any, passes), debounce_seconds=0, workers=1)
        for name in ("a", "b", "c"):
            loops.ensure("ns", name)
        await asyncio.sleep(0.05)  # a's pass runs; b's and c's wait for the thread
        started = time.monotonic()
        await loops.retire(lambda namespace, name: name in {"b", "c"})
        took = time.monotonic() - started
        assert loops.running() == {("ns", "a")}
        await asyncio.sleep(0.5)
        assert passes.ended == ["a"]  # b and c never ran: nothing of theirs was written
        await loops.stop_all()
        return took

    took = asyncio.run(scenario())
    assert took < 0.1  # not behind a's pass (0.2 s), nor their own


def test_passes_have_their_own_threads_so_a_backlog_does_not_hold_up_other_work() -> None:
    """The Lease renewals go to the event loop's default executor: however many passes
    wait for a worker, a renewal there runs at once."""

    async def scenario() -> float:
        passes = SlowPasses()
        loops = Loops(cast(Any, passes), debounce_seconds=0, workers=1)
        for name in "abcdefgh":  # 8 passes of 0.2 s queued on one worker: 1.6 s
            loops.ensure("ns", name)
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await asyncio.to_thread(lambda: None)  # as a renewal would
        took = time.monotonic() - started
        await loops.stop_all()
        return took

    assert asyncio.run(scenario()) < 0.1


def test_a_pass_whose_hold_is_not_fresh_is_skipped_and_tried_again() -> None:
    async def scenario() -> None:
        passes = SlowPasses()
        fresh = [False]
        loops = Loops(cast(Any, passes), debounce_seconds=0, retry_seconds=0.1)
        loops.held = lambda namespace, name: fresh[0]
        loops.ensure("ns", "p")
        await asyncio.sleep(0.25)
        assert passes.ended == [] and loops.running() == {("ns", "p")}  # skipped, still looping
        assert loops.failures("ns", "p") == 0  # not a failure of the pool
        fresh[0] = True
        await asyncio.sleep(0.4)
        assert passes.ended == ["p"]
        await loops.stop_all()

    asyncio.run(scenario())


def test_an_early_wake_runs_a_pass_that_says_why_and_a_failing_pool_is_not_woken() -> None:
    async def scenario() -> None:
        passes = Passes()
        passes.failing = False
        ran: list[tuple[str, str, frozenset[str]]] = []
        loops = Loops(cast(Any, passes), debounce_seconds=0, retry_seconds=60)
        loops.passed = lambda namespace, name, sent, resized: ran.append((namespace, name, resized))
        assert not loops.wake_early("ns", "p", "before its loop")  # no loop: nothing to wake
        loops.ensure("ns", "p")
        await asyncio.sleep(0.1)
        # The stand-in's passes resize nothing, and the watch hears so.
        assert passes.early == [None] and ran == [("ns", "p", frozenset())]
        assert loops.wake_early("ns", "p", "9 requests waiting on h100 (0 at the last pass)")
        await asyncio.sleep(0.1)
        assert passes.early == [None, "9 requests waiting on h100 (0 at the last pass)"]
        early = passes.telemetry.registry.get_sample_value("gpufleet_early_passes_total")
        assert early == 1
        assert ran == [("ns", "p", frozenset())] * 2
        loops.wake("ns", "p")  # an ordinary wake: no reason carried over
        await asyncio.sleep(0.1)
        assert passes.early[-1] is None
        passes.failing = True
        loops.wake("ns", "p")
        await asyncio.sleep(0.1)
        assert loops.failures("ns", "p") == 1
        calls = passes.calls
        assert not loops.wake_early("ns", "p", "a surge")  # backing off: not woken
        await asyncio.sleep(0.1)
        assert passes.calls == calls
        await loops.stop_all()

    asyncio.run(scenario())
