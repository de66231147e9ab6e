"""`gpufleet dev demo` (`make demo`): the closed loop, end to end, in a few minutes.

Starts the local control plane with its GPU node pools, a real Prometheus on loopback
scraping the fleet twin through file_sd, the twin, and the real operator
(`gpufleet run --prometheus-url ...`); applies an example pool with the demo's overlay
(examples/demo/demo.yaml: short intervals, per-class demand queries); plays the story
(load per class, nodes leaving and coming back) under a live `kubectl get gpool`-style
table; prints a summary, writes a plot and draws the chart's dashboard (its key panels, from
its own queries). Everything it started is stopped and every temp dir removed on the way
out, Ctrl-C included. Bounded: setup waits time out, the story is as long as its phases.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import signal
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import yaml

from gpufleet.dev.loadstory import ClassLoad
from gpufleet.dev.operator import OperatorProcess

DEFAULT_CONFIG = Path("examples/demo/demo.yaml")
DASHBOARD = Path("charts/gpufleet/dashboards/gpufleet.json")  # what the chart ships
SETUP_TIMEOUT_SECONDS = 120.0


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StoryPhase:
    name: str
    seconds: float
    load: Mapping[str, ClassLoad]
    remove_nodes: tuple[str, ...] = ()
    add_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DemoConfig:
    pool_path: Path
    namespace: str
    overlay: Mapping[str, Any]
    demand_query: str | None
    scrape_interval_seconds: float
    seed: int
    story: tuple[StoryPhase, ...] = field(default_factory=tuple)

    @property
    def story_seconds(self) -> float:
        return sum(p.seconds for p in self.story)

    @classmethod
    def load(cls, path: Path) -> DemoConfig:
        raw = yaml.safe_load(path.read_text()) or {}
        story = []
        for item in raw.get("story") or []:
            load = {}
            for name, value in (item.get("load") or {}).items():
                if isinstance(value, Mapping):
                    load[str(name)] = ClassLoad(
                        float(value["tokensPerSecond"]),
                        value.get("promptTokens"),
                        value.get("outputTokens"),
                    )
                else:
                    load[str(name)] = ClassLoad(float(value))
            story.append(
                StoryPhase(
                    name=str(item["name"]),
                    seconds=float(item["seconds"]),
                    load=load,
                    remove_nodes=tuple(item.get("removeNodes") or ()),
                    add_nodes=tuple(item.get("addNodes") or ()),
                )
            )
        return cls(
            pool_path=(path.parent / str(raw["pool"])).resolve(),
            namespace=str(raw.get("namespace", "gpufleet-demo")),
            overlay=raw.get("overlay") or {},
            demand_query=raw.get("demandQuery"),
            scrape_interval_seconds=float(
                (raw.get("prometheus") or {}).get("scrapeIntervalSeconds", 1)
            ),
            seed=int(raw.get("seed", 0)),
            story=tuple(story),
        )


def merge(base: Any, overlay: Any) -> Any:
    """`overlay` deep-merged into `base`; lists of named objects are merged by name."""
    if isinstance(base, Mapping) and isinstance(overlay, Mapping):
        out = dict(base)
        for key, value in overlay.items():
            out[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if (
        isinstance(base, list)
        and isinstance(overlay, list)
        and all(isinstance(i, Mapping) and "name" in i for i in [*base, *overlay])
    ):
        by_name = {i["name"]: i for i in overlay}
        merged = [merge(i, by_name[i["name"]]) if i["name"] in by_name else i for i in base]
        names = {i["name"] for i in base}
        return merged + [copy.deepcopy(i) for i in overlay if i["name"] not in names]
    return copy.deepcopy(overlay)


def pool_body(
    config: DemoConfig, namespace: str | None = None, overlay: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The example pool with the demo overlay (and an extra one), demand queries filled in."""
    namespace = namespace or config.namespace
    body: dict[str, Any] = yaml.safe_load(config.pool_path.read_text())
    body = merge(body, config.overlay)
    if overlay:
        body = merge(body, overlay)
    body["metadata"]["namespace"] = namespace
    name = body["metadata"]["name"]
    if config.demand_query:
        for cls in body["spec"]["trafficClasses"]:
            cls.setdefault(
                "demandQuery",
                Template(config.demand_query).substitute(
                    namespace=namespace, pool=name, traffic_class=cls["name"]
                ),
            )
    return body


# -- the run ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) unwind like Ctrl-C, so the cleanup runs."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_demo(config: DemoConfig, *, output_dir: Path, live: bool | None = None) -> int:
    """The whole demo; returns an exit code."""
    from gpufleet.dev.demoview import DemoView

    started = time.monotonic()
    view = DemoView(config, live=live)
    with _terminate_as_interrupt(), contextlib.ExitStack() as stack:
        work = Path(tempfile.mkdtemp(prefix="gpufleet-demo-"))
        stack.callback(_remove, work)
        try:
            world = _set_up(config, work, stack, view)
            view.note(f"Set up in {time.monotonic() - started:.0f} s; playing the story.")
            played_from = time.time()
            samples = _play(config, world, view)
            view.summary(world, samples, output_dir, started)
            picture = output_dir / "gpufleet-dashboard.png"
            _draw_dashboard(world, played_from, time.time(), picture)
            view.note(f"The chart's dashboard (key panels, its own queries): {picture.resolve()}")
        except KeyboardInterrupt:
            view.note("Interrupted: cleaning up.")
            return 130
        except Exception as error:
            view.note(f"The demo failed: {error}")
            operator: OperatorProcess | None = getattr(view, "operator", None)
            if operator is not None:
                view.note(f"Operator log (last lines):\n{operator.log_tail()}")
            return 1
        finally:
            view.note("Stopping the operator, the twin, Prometheus and the control plane.")
    view.note(f"Done in {time.monotonic() - started:.0f} s; nothing left running.")
    return 0


def _draw_dashboard(world: World, start: float, end: float, path: Path) -> None:
    """The chart's Grafana dashboard's key panels over the story, from its own queries
    against the demo's Prometheus (which scrapes the operator's /metrics)."""
    from gpufleet.dev import dashboard, tools

    board = dashboard.load(tools.repo_root() / DASHBOARD)
    dashboard.render(
        board,
        world.prometheus.query_range,
        namespace=world.namespace,
        pool=world.name,
        start=start,
        end=end,
        path=path,
    )


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


@dataclass
class World:
    """Everything the demo started."""

    plane: Any
    api: Any
    prometheus: Any
    twin: Any
    operator: OperatorProcess
    body: dict[str, Any]

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


def _set_up(config: DemoConfig, work: Path, stack: contextlib.ExitStack, view: Any) -> World:
    from kubernetes import client

    from gpufleet.dev import tools
    from gpufleet.dev.cluster import ControlPlane
    from gpufleet.dev.loop import loop_processes
    from gpufleet.dev.prometheus import ScrapeGroup

    view.note("Starting the local control plane (etcd, kube-apiserver, scheduler, kwok GPU nodes)")
    plane = ControlPlane(work_dir=work / "plane", remove_work_dir=True)
    stack.callback(plane.stop)
    plane.start()
    plane.apply_gateway_api_crds()
    names = plane.add_nodes_from_file()
    crd = tools.repo_root() / "crds" / "inferencepools.gpufleet.dev.yaml"
    plane.kubectl("apply", "--server-side", "-f", str(crd))
    plane.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/inferencepools.gpufleet.dev",
        timeout_s=70,
    )
    view.note(
        f"Control plane up with {len(names)} GPU nodes; starting Prometheus, the fleet twin "
        "and the operator"
    )
    api = plane.api_client()
    stack.callback(api.close)
    loop = stack.enter_context(
        loop_processes(
            plane,
            work,
            scrape_interval_seconds=config.scrape_interval_seconds,
            seed=config.seed,
        )
    )
    view.operator = loop.operator
    # The operator's own /metrics beside the twin's vLLM targets (twin.json): the dashboard's.
    loop.prometheus.set_targets(
        [ScrapeGroup([f"127.0.0.1:{loop.operator.metrics_port}"], {"job": "gpufleet"})]
    )
    view.note(
        f"Prometheus {loop.prometheus.url}, fleet twin {loop.twin.url}, operator running; "
        f"applying {config.pool_path.name} with the demo overlay"
    )
    body = pool_body(config)
    namespace = body["metadata"]["namespace"]
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
    )
    plane.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(body))
    world = World(plane, api, loop.prometheus, loop.twin, loop.operator, body)
    _wait_ready(world)
    return world


def _wait_ready(world: World) -> None:
    from gpufleet.dev.fleetview import sample

    deadline = time.monotonic() + SETUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        now = sample(world.api, world.namespace, world.name)
        if now.condition("Ready")[0] == "True" and now.condition("RoutingApplied")[0] == "True":
            return
        time.sleep(0.5)
    raise RuntimeError(f"The pool was not Ready after {SETUP_TIMEOUT_SECONDS:.0f} s")


def _play(config: DemoConfig, world: World, view: Any) -> list[Any]:
    from gpufleet.dev import nodes, tools
    from gpufleet.dev.fleetview import sample

    pools = nodes.load_pools(tools.repo_root() / "tests/cluster/nodes.yaml")
    specs = {spec.name: spec for pool in pools.values() for spec in pool.nodes}
    load = world.twin.poisson(world.namespace, world.name)
    samples = []
    view.begin(world)
    try:
        for phase in config.story:
            begun = time.monotonic()
            view.phase(phase, begun)
            if phase.remove_nodes:
                nodes.remove_nodes(world.api, phase.remove_nodes, wait_gone_s=30)
            if phase.add_nodes:
                nodes.add_nodes(world.api, [specs[n] for n in phase.add_nodes], wait_ready_s=30)
            load.set(phase.load)
            while time.monotonic() - begun < phase.seconds:
                now = sample(
                    world.api,
                    world.namespace,
                    world.name,
                    query=world.prometheus.query,
                    serving=world.twin.serving(world.namespace, world.name),
                    phase=phase.name,
                )
                samples.append(now)
                view.update(now)
                time.sleep(max(0.0, 1.0 - (time.monotonic() - now.at)))
        load.set({})
    finally:
        view.end()
    return samples


# -- command line ----------------------------------------------------------------------------


def demo_main(args: argparse.Namespace) -> int:
    from gpufleet.dev import tools

    path = args.config or tools.repo_root() / DEFAULT_CONFIG
    config = DemoConfig.load(path)
    return run_demo(config, output_dir=args.output_dir, live=False if args.no_live else None)
