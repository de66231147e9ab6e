"""The closed loop for e2e scenarios: Prometheus, the fleet twin and the real operator on the plane.

One `Loop` per module (the pieces take ~10 s to start and are shared); each scenario gets a
namespace and a pool of its own, and a `Timeline` that samples what a user would look at
(`gpufleet.dev.fleetview.Sample`) every second and prints it at the end, pass or fail.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client

from gpufleet.dev.demo import DemoConfig, pool_body
from gpufleet.dev.fleetview import Sample, sample
from gpufleet.dev.loadstory import ClassLoad
from gpufleet.dev.loop import loop_processes
from gpufleet.dev.operator import OperatorProcess
from gpufleet.dev.prometheus import PrometheusServer, free_port
from gpufleet.dev.tools import prometheus_binary
from gpufleet.dev.twin import FleetTwin
from tests.harness import wait_for

ROOT = Path(__file__).resolve().parents[2]
DEMO_CONFIG = ROOT / "examples" / "demo" / "demo.yaml"
REALTIME_MS, BATCH_MS = 100.0, 2000.0  # the demo pool's objectives
T = TypeVar("T")


@dataclass(frozen=True)
class Books:
    """What became of a pool's requests so far, from the twin's books: taken by the
    gateway, answered with an error (by code: 502 cut, 503 no replica, 404 no route), and
    held by replicas as they left: drained, cut at the end of the drain time, lost
    mid-decode with a vanished node, or still draining."""

    sent: int
    errors: Mapping[str, int]
    drained: int
    cut: int
    lost: int
    draining: int

    @property
    def held(self) -> int:
        """Requests leaving replicas held that are accounted for: drained or cut."""
        return self.drained + self.cut

    def __str__(self) -> str:
        errors = ", ".join(f"{code}: {n}" for code, n in sorted(self.errors.items())) or "none"
        return (
            f"{self.sent} requests sent, errors {errors}; held by leaving replicas: "
            f"{self.drained} drained, {self.cut} cut, {self.lost} lost with a node"
            + (f", {self.draining} replicas still draining" if self.draining else "")
        )


@dataclass
class Loop:
    """Everything a scenario drives; the pool is the demo's (examples/demo/demo.yaml)."""

    plane: Any
    api: Any
    prometheus: PrometheusServer
    twin: FleetTwin
    operator: OperatorProcess
    config: DemoConfig = field(default_factory=lambda: DemoConfig.load(DEMO_CONFIG))

    @property
    def interval(self) -> float:
        return float(self.config.overlay["spec"]["scaling"]["intervalSeconds"])

    def apply_pool(self, namespace: str, overlay: dict[str, Any] | None = None) -> str:
        body = pool_body(self.config, namespace, overlay)
        self.plane.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(body))
        return str(body["metadata"]["name"])

    def serve(
        self, namespace: str, overlay: dict[str, Any] | None = None, **tokens_per_second: float
    ) -> str:
        """Apply the pool and start its load once the twin routes for it: its HTTPRoute is
        written and every tier it weights serves, so that no request meets a pool that is
        still starting. The pool's name."""
        name = self.apply_pool(namespace, overlay)

        def routed() -> bool:
            changes = self.twin.route_changes(namespace, name)
            serving = self.twin.serving(namespace, name)
            weights = changes[-1].weights if changes else {}
            weighted = {t for w in weights.values() for t, n in w.items() if n > 0}
            return bool(changes) and all(serving.get(t, 0) > 0 for t in weighted)

        wait_for(f"the twin to route for {namespace}/{name}", routed, 60)
        self.load(namespace, name, **tokens_per_second)
        return name

    def load(self, namespace: str, name: str, **tokens_per_second: float) -> None:
        self.twin.poisson(namespace, name).set(
            {cls: ClassLoad(v) for cls, v in tokens_per_second.items()}
        )

    def sample(self, namespace: str, name: str, phase: str = "") -> Sample:
        return sample(
            self.api,
            namespace,
            name,
            query=self.prometheus.query,
            serving=self.twin.serving(namespace, name),
            phase=phase,
        )

    def books(self, namespace: str, name: str) -> Books:
        outcome = self.twin.drained(namespace, name)
        answered = self.twin.answered(namespace, name)
        return Books(
            sent=self.twin.arrived(namespace, name),
            errors={code: n for code, n in answered.items() if code != "200" and n},
            drained=outcome.drained,
            cut=outcome.cut,
            lost=outcome.lost,
            draining=outcome.draining,
        )

    def deployment_replicas(self, namespace: str, name: str) -> dict[str, int]:
        apps = client.AppsV1Api(self.api)
        found = apps.list_namespaced_deployment(
            namespace, label_selector=f"gpufleet.dev/pool={name}"
        )
        return {
            d.metadata.labels["gpufleet.dev/tier"]: int(d.spec.replicas or 0) for d in found.items
        }

    def events(self, namespace: str, name: str) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the pool's Events, oldest first."""
        listed = client.CoreV1Api(self.api).list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        items = sorted(listed.items, key=lambda e: e.metadata.creation_timestamp)
        return [(e.type, e.reason, e.message or "") for e in items]

    def restart_prometheus(self) -> None:
        self.prometheus.start()


@contextlib.contextmanager
def closed_loop(plane: Any, work: Path, prometheus_major: int = 2) -> Iterator[Loop]:
    """Prometheus of that major (1 s scrapes, a fixed port so it can come back), twin,
    operator."""
    from tests.harness import install_crd

    api = plane.api_client()
    install_crd(api)
    processes = loop_processes(
        plane,
        work,
        scrape_interval_seconds=1,
        prometheus_port=free_port(),
        prometheus_binary=prometheus_binary(prometheus_major),
    )
    try:
        with processes as running:
            operator = running.operator
            try:
                yield Loop(plane, api, running.prometheus, running.twin, operator)
            finally:
                print(f"\nOperator log (last lines, {operator.log_path}):\n{operator.log_tail(40)}")
    finally:
        api.close()


class Timeline:
    """Samples a pool every second in a thread; `print()` shows what changed, when."""

    def __init__(self, loop: Loop, namespace: str, name: str, every: float = 1.0) -> None:
        self.loop, self.namespace, self.name, self.every = loop, namespace, name, every
        self.t0 = time.monotonic()
        self.phase = "start"
        self.samples: list[Sample] = []
        self.marks: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Timeline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.print()

    def mark(self, phase: str) -> float:
        now = time.monotonic()
        with self._lock:
            self.phase = phase
            self.marks.append((now, phase))
        return now

    def _run(self) -> None:
        while not self._stop.is_set():
            begun = time.monotonic()
            with contextlib.suppress(Exception):  # the apiserver is busy: skip a sample
                s = self.loop.sample(self.namespace, self.name, self.phase)
                with self._lock:
                    self.samples.append(s)
            self._stop.wait(max(0.0, self.every - (time.monotonic() - begun)))

    @property
    def latest(self) -> Sample:
        return self.wait("a first sample", lambda s: True, 30)

    def since(self, t: float) -> list[Sample]:
        with self._lock:
            return [s for s in self.samples if s.at >= t]

    def wait(
        self,
        what: str,
        check: Callable[[Sample], bool],
        timeout: float,
        since: float | None = None,
        *,
        hold: float = 0.0,
    ) -> Sample:
        """The first sample from now (or from monotonic time `since`) on for which `check`
        holds; fails `timeout` seconds from now.

        With `hold`: the first sample of a run of samples for which `check` holds `hold`
        seconds on end; the run must begin within `timeout`, the wait lasts until it has
        held.
        """
        begun = time.monotonic() if since is None else since
        deadline = time.monotonic() + timeout
        while True:
            start: Sample | None = None
            for s in self.since(begun):
                if not check(s):
                    start = None
                elif start is None:
                    start = s
                if start is not None and s.at - start.at >= hold:
                    return start
            now = time.monotonic()
            if now >= deadline and (start is None or start.at > deadline):
                break
            if now > deadline + hold + 10:  # a run begun in time, but samples stopped
                break
            time.sleep(0.2)
        last = self.since(begun)[-1:] or self.samples[-1:]
        held = f" to hold for {hold:.0f}s" if hold else ""
        raise AssertionError(
            f"Timed out after {timeout:.0f}s waiting for {what}{held}; last: "
            f"{last[0].line(self.t0) if last else None}"
        )

    def after(self, t: float, what: str = "", timeout: float = 60) -> Sample:
        """The first sample taken at or after monotonic time `t`."""
        return self.wait(what or f"a sample {t - self.t0:.0f}s in", lambda s: s.at >= t, timeout)

    def print(self) -> None:
        print(
            f"\nTimeline of {self.namespace}/{self.name} (t=0 at the start; a line when replicas,"
            " weights, conditions or the decision change, else every 5 s):"
        )
        previous: tuple[Any, ...] = ()
        printed = -math.inf
        marks = list(self.marks)
        for s in self.samples:
            while marks and marks[0][0] <= s.at:
                at, phase = marks.pop(0)
                print(f"--- t={at - self.t0:6.1f}s {phase}")
            key = (s.tiers, s.weights_text(), tuple(s.conditions.items()), s.decision)
            if key != previous or s.at - printed >= 5:
                print(s.line(self.t0))
                previous, printed = key, s.at


def p99(s: Sample, cls: str) -> float:
    value = s.p99_ms.get(cls)
    return math.inf if value is None else value


def within(s: Sample) -> bool:
    return p99(s, "realtime") <= REALTIME_MS and p99(s, "batch") <= BATCH_MS


def settled(s: Sample) -> bool:
    """Every desired replica Ready, metrics read, both classes within their objectives."""
    return (
        bool(s.tiers)
        and all(t.ready == t.desired for t in s.tiers)
        and s.condition("MetricsAvailable")[0] == "True"
        and s.tier("rtx4090").desired > 0
        and within(s)
    )


def settle(
    loop: Loop,
    timeline: Timeline,
    timeout: float = 150,
    check: Callable[[Sample], bool] = settled,
) -> Sample:
    """Wait for a settled pool (`check`) whose replica counts held for a whole interval."""
    deadline = time.monotonic() + timeout
    while True:
        first = timeline.wait("the pool to settle", check, max(deadline - time.monotonic(), 1))
        counts = [t.desired for t in first.tiers]
        later = timeline.after(first.at + loop.interval, "the next interval", loop.interval + 10)
        if check(later) and [t.desired for t in later.tiers] == counts:
            return later
        if time.monotonic() > deadline:
            raise AssertionError(f"The pool did not settle in {timeout:.0f}s: {later}")
