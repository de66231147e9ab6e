"""`gpufleet dev ...`: developer tooling. `gpufleet dev cluster up|down|status` runs the
local control plane (gpufleet.commands.dev_cluster); `gpufleet dev twin` plays a fleet of vLLM pods
for Prometheus (gpufleet.dev.twin); `gpufleet dev demo` runs the whole closed loop under a
load story (gpufleet.dev.demo, `make demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("dev", help="developer tooling: the local control plane")
    dev = parser.add_subparsers(dest="dev_command", required=True)
    cluster = dev.add_parser(
        "cluster",
        help="real etcd, kube-apiserver, controller-manager, scheduler and kwok GPU nodes "
        "as processes on 127.0.0.1",
    )
    # Imported here so other commands do not pay for cryptography and the cluster code.
    from gpufleet.commands.dev_cluster import add_cluster_arguments, run_cluster

    add_cluster_arguments(cluster)
    cluster.set_defaults(func=run_cluster)

    twin = dev.add_parser(
        "twin",
        help="the fleet twin: vLLM metrics of a plane's pods under a load schedule, for "
        "Prometheus (file_sd), on 127.0.0.1",
    )
    _twin_arguments(twin)
    twin.set_defaults(func=_run_twin)

    demo = dev.add_parser(
        "demo",
        help="the closed loop: plane, Prometheus, twin and operator under a load story (make demo)",
    )
    _demo_arguments(demo)
    demo.set_defaults(func=_run_demo)


# Arguments are declared here so `gpufleet dev cluster` does not import the twin's numpy.
def _twin_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, default=None, help="default: $KUBECONFIG")
    parser.add_argument(
        "--load", type=Path, required=True, help="load schedule YAML (gpufleet.dev.loadstory)"
    )
    parser.add_argument(
        "--targets-file",
        type=Path,
        required=True,
        help="file_sd JSON to write, in a directory Prometheus's file_sd_configs reads",
    )
    parser.add_argument("--port", type=int, default=0, help="metrics port on 127.0.0.1")
    parser.add_argument("--seed", type=int, default=0, help="seed of arrivals and routing")
    parser.add_argument("--duration", type=float, default=None, help="stop after N seconds")


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, default=None, help="default: examples/demo/demo.yaml"
    )
    parser.add_argument(
        "--output-dir", type=Path, default=Path("out/demo"), help="where the plot goes"
    )
    parser.add_argument(
        "--no-live", action="store_true", help="print a line per interval, no live table"
    )


def _run_twin(args: argparse.Namespace) -> int:
    from gpufleet.dev.twin import run_twin

    return run_twin(args)


def _run_demo(args: argparse.Namespace) -> int:
    from gpufleet.dev.demo import demo_main

    return demo_main(args)
