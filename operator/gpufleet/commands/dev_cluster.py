"""`gpufleet dev cluster up|down|status`: the local control plane from the command line.

    up [--dir DIR] [--detach] [--no-nodes]   start; print the kubeconfig; Ctrl-C stops it
    down [--dir DIR]                           stop a detached plane
    status [--dir DIR]                         is it running, where is its kubeconfig

Also `python -m gpufleet.commands.dev_cluster ...`. The plane itself is
`gpufleet.dev.cluster.ControlPlane`; this module parses arguments and prints.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gpufleet.dev.cluster import STATE_FILE, ControlPlane
from gpufleet.dev.clusterprocs import component_alive

__all__ = ["add_cluster_arguments", "cluster_main", "run_cluster"]


def default_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpufleet" / "cluster"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the up/down/status subcommands to `parser` (for `gpufleet dev cluster`)."""
    sub = parser.add_subparsers(dest="cluster_command", required=True)
    up = sub.add_parser("up", help="start a local control plane")
    up.add_argument("--dir", type=Path, default=None, help=f"work dir (default {default_dir()})")
    up.add_argument("--detach", action="store_true", help="leave it running and return")
    up.add_argument("--no-nodes", action="store_true", help="skip the fake GPU nodes")
    up.add_argument("--nodes", type=Path, default=None, help="a nodes.yaml of GPU pools")
    up.add_argument("--no-gateway-api", action="store_true", help="skip the Gateway API CRDs")
    for name, text in (("down", "stop a detached plane"), ("status", "show a plane's state")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--dir", type=Path, default=None, help=f"work dir (default {default_dir()})")


def run_cluster(args: argparse.Namespace) -> int:
    """Runs the subcommand parsed by a parser that add_cluster_arguments() set up."""
    work_dir: Path = (args.dir or default_dir()).resolve()
    if args.cluster_command == "up":
        return _cmd_up(work_dir, args)
    if args.cluster_command == "down":
        return _cmd_down(work_dir)
    return _cmd_status(work_dir)


def cluster_main(argv: Sequence[str] | None = None) -> int:
    """`gpufleet dev cluster up|down|status` as a standalone entry point."""
    parser = argparse.ArgumentParser(prog="gpufleet dev cluster", description="Local control plane")
    add_cluster_arguments(parser)
    return run_cluster(parser.parse_args(argv))


def _cmd_up(work_dir: Path, args: argparse.Namespace) -> int:
    work_dir.mkdir(parents=True, exist_ok=True)
    plane = ControlPlane(work_dir=work_dir, tie_to_parent=not args.detach, remove_work_dir=False)
    try:
        plane.start()
        if not args.no_gateway_api:
            plane.apply_gateway_api_crds()
        if not args.no_nodes:
            plane.add_nodes_from_file(args.nodes)
    except Exception as exc:
        plane.stop()
        print(f"Control plane failed to start: {exc}", file=sys.stderr)
        print(f"Logs: {plane.log_dir}", file=sys.stderr)
        return 1
    print(f"Control plane is up in {plane.timings['start_total_s']:.1f}s: {plane.server}")
    print(f"Logs: {plane.log_dir}")
    print(f"export KUBECONFIG={plane.kubeconfig}")
    if args.detach:
        print(f"Stop it with: gpufleet dev cluster down --dir {work_dir}")
        return 0
    print("Press Ctrl-C to stop it.")
    return _serve_until_interrupted(plane)


def _serve_until_interrupted(plane: ControlPlane) -> int:
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    code = 0
    while not stop:
        if not plane.running():
            print(plane.describe_failure(), file=sys.stderr)
            code = 1
            break
        time.sleep(0.5)
    plane.stop()
    print("Control plane stopped.")
    return code


def _cmd_down(work_dir: Path) -> int:
    if not (work_dir / STATE_FILE).exists():
        print(f"No control plane state in {work_dir}", file=sys.stderr)
        return 1
    plane = ControlPlane.from_state(work_dir)
    plane.stop()
    print(f"Stopped the control plane in {work_dir}")
    return 0


def _cmd_status(work_dir: Path) -> int:
    state_file = work_dir / STATE_FILE
    if not state_file.exists():
        print(f"No control plane in {work_dir}")
        return 1
    state = json.loads(state_file.read_text())
    alive = {name: component_alive(int(pid)) for name, pid in state["pids"].items()}
    running = bool(alive) and all(alive.values())
    print(f"Control plane in {work_dir}: {'running' if running else 'not running'}")
    for name, ok in alive.items():
        print(f"  {name:<24} {'up' if ok else 'down'}")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0 if running else 1


if __name__ == "__main__":
    sys.exit(cluster_main())
