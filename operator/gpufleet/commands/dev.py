"""`gpufleet dev ...`: developer tooling, one subcommand each.

`gpufleet dev cluster up|down|status` runs the local control plane (commands.dev_cluster,
gpufleet.dev.cluster); `gpufleet dev twin` plays a fleet of vLLM pods for Prometheus
(commands.dev_twin, gpufleet.dev.twin); `gpufleet dev demo` runs the whole closed loop under
a load story (gpufleet.dev.demo, `make demo`)."""

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
    # Only the argument declarations: the twin and its numpy are imported when it runs.
    from gpufleet.commands.dev_twin import add_twin_arguments, run_twin

    add_twin_arguments(twin)
    twin.set_defaults(func=run_twin)

    demo = dev.add_parser(
        "demo",
        help="the closed loop: plane, Prometheus, twin and operator under a load story (make demo)",
    )
    _demo_arguments(demo)
    demo.set_defaults(func=_run_demo)


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


def _run_demo(args: argparse.Namespace) -> int:
    from gpufleet.dev.demo import demo_main

    return demo_main(args)
