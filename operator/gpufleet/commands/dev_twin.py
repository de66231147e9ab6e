"""`gpufleet dev twin`: the fleet twin (gpufleet.dev.twin) against a plane, from the command line.

It plays the pods of the plane that --kubeconfig names under the load schedules of --load,
writes Prometheus's file_sd targets to --targets-file, and runs until Ctrl-C, SIGTERM or
--duration. This module parses arguments and prints; the twin is imported only when it
runs, so `gpufleet dev cluster` does not import the twin's numpy.
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading
import time
from pathlib import Path

__all__ = ["add_twin_arguments", "run_twin"]


def add_twin_arguments(parser: argparse.ArgumentParser) -> None:
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


def run_twin(args: argparse.Namespace) -> int:
    """Runs the twin with the arguments add_twin_arguments() declared; 0 when stopped."""
    from kubernetes import config

    from gpufleet.dev.loadstory import PoissonLoad, load_schedules
    from gpufleet.dev.twin import FleetTwin

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    schedules = load_schedules(args.load)
    api = config.new_client_from_config(
        config_file=str(args.kubeconfig) if args.kubeconfig else None
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    twin = FleetTwin(api, targets_file=args.targets_file, port=args.port, seed=args.seed)
    try:
        twin.start()
        began = time.monotonic()
        for item in schedules:
            source = PoissonLoad(
                seed=args.seed + item.seed, schedule=item.schedule, offset_seconds=began
            )
            twin.set_load(item.namespace, item.pool, source)
        print(f"Fleet twin serving metrics on {twin.url}; targets in {args.targets_file}")
        sys.stdout.flush()
        longest = max(s.schedule.seconds for s in schedules)
        limit = args.duration if args.duration is not None else math.inf
        while not stop.wait(1.0):
            if time.monotonic() - began >= limit:
                break
        print(
            f"Fleet twin stopped after {time.monotonic() - began:.0f} s (schedule {longest:.0f} s)"
        )
    finally:
        twin.stop()
        api.close()
    return 0
