"""`gpufleet dev ...`: developer tooling. `gpufleet dev cluster up|down|status` runs the
local control plane (gpufleet.dev.cluster)."""

from __future__ import annotations

import argparse
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
    from gpufleet.dev.cluster import add_cluster_arguments

    add_cluster_arguments(cluster)
    cluster.set_defaults(func=_run_cluster)


def _run_cluster(args: argparse.Namespace) -> int:
    from gpufleet.dev.cluster import run_cluster

    return run_cluster(args)
