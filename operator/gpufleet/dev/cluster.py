"""The local control plane: real Kubernetes components as processes on 127.0.0.1, no Docker.

`ControlPlane` starts etcd, kube-apiserver (client-cert auth, Node+RBAC authorization,
service-account token signing), kube-controller-manager, kube-scheduler and kwok (with our
Stage configuration, tests/cluster/kwok-stages.yaml) from the multi-call `gpufleet-cluster`
binary, each in its own process group, on free loopback ports, with all state in one work
directory. It writes an admin kubeconfig there and removes everything on `stop()`.

From the command line (`gpufleet dev cluster ...`, or `python -m gpufleet.dev.cluster ...`):
    up [--dir DIR] [--detach] [--no-nodes]   start; print the kubeconfig; Ctrl-C stops it
    down [--dir DIR]                           stop a detached plane
    status [--dir DIR]                         is it running, where is its kubeconfig
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.dev import tools
from gpufleet.dev.pki import Pki, kubeconfig, write_pki

__all__ = [
    "ControlPlane",
    "ControlPlaneError",
    "add_cluster_arguments",
    "cluster_main",
    "run_cluster",
]

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.1/16"  # kwok hands these out as pod IPs; nothing ever connects to them
# Node addresses are loopback, so anything that would dial a "kubelet" stays on this machine.
NODE_IP = "127.0.0.1"
STATE_FILE = "plane.json"
# Then SIGKILL: kube-apiserver drains for 10+ s on SIGTERM and etcd waits for its clients;
# the state is throwaway, and bbolt survives a killed process.
_EXIT_STOP_S = 1.0


class ControlPlaneError(RuntimeError):
    """The control plane failed to start or is not in the state asked for."""


@dataclass
class _Process:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    pid: int = 0

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_alive(self.pid)


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def pick(cls) -> Ports:
        # Hold all sockets open while picking, so one plane never gets the same port twice.
        with contextlib.ExitStack() as stack:
            ports = []
            for _ in range(6):
                sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                sock.bind(("127.0.0.1", 0))
                ports.append(sock.getsockname()[1])
        return cls(*ports)


@dataclass
class ControlPlane:
    """One local Kubernetes control plane. Use as a context manager or call start()/stop().

    work_dir: where certs, etcd data, kubeconfigs and logs go; a fresh temp dir when None,
    removed again on stop(). A given work_dir is emptied of old state but kept, unless
    remove_work_dir is set. tie_to_parent: the components die with this Python process
    (PR_SET_PDEATHSIG), which is what tests want and a detached CLI plane must not have.
    """

    work_dir: Path | None = None
    binary: Path | None = None
    stages: Path | None = None
    tie_to_parent: bool = True
    remove_work_dir: bool | None = None
    start_timeout_s: float = 120.0
    verbosity: int = 1
    ports: Ports = field(init=False)
    timings: dict[str, float] = field(default_factory=dict, init=False)
    _procs: list[_Process] = field(default_factory=list, init=False)
    _created_dir: bool = field(default=False, init=False)
    _started: bool = field(default=False, init=False)

    # ---- public surface -------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self._dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def log_dir(self) -> Path:
        return self._dir / "logs"

    @property
    def pids(self) -> dict[str, int]:
        return {p.name: p.pid for p in self._procs}

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Starts every component and returns once the plane can schedule pods."""
        if self._started:
            return self
        t0 = time.monotonic()
        self._prepare_dir()
        binary = self.binary or tools.cluster_binary()
        self.binary = binary
        self.timings["build_check_s"] = time.monotonic() - t0
        if self.tie_to_parent:
            atexit.register(self._stop_at_exit)
        # A port taken between picking and binding (another plane, another test) is retried.
        for attempt in range(3):
            self.ports = Ports.pick()
            try:
                self._start_once(binary)
                break
            except ControlPlaneError as exc:
                port_clash = "address already in use" in str(exc).lower()
                self._stop_processes()
                if not port_clash or attempt == 2:
                    self._write_state(failed=str(exc))
                    atexit.unregister(self._stop_at_exit)
                    raise
                shutil.rmtree(self._dir / "etcd", ignore_errors=True)
        self._started = True
        self.timings["start_total_s"] = time.monotonic() - t0
        self._write_state()
        return self

    def stop(self) -> None:
        """Stops every component (SIGTERM, then SIGKILL) and removes the work dir if ours."""
        self._stop_processes()
        atexit.unregister(self._stop_at_exit)
        self._started = False
        if self._should_remove_dir():
            shutil.rmtree(self._dir, ignore_errors=True)
        elif self.work_dir is not None and (self._dir / STATE_FILE).exists():
            (self._dir / STATE_FILE).unlink()

    def running(self) -> bool:
        return bool(self._procs) and all(p.alive() for p in self._procs)

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient authenticated as cluster admin."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout_s: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Runs the venv's kubectl against this plane."""
        result = subprocess.run(
            [str(tools.kubectl()), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    def apply_gateway_api_crds(self, timeout_s: float = 60) -> None:
        """Installs the Gateway API standard CRDs and waits until they are Established."""
        import yaml

        crds = tools.gateway_api_crd_dir()
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
        # The directory also holds a ValidatingAdmissionPolicy, which has no Established.
        names = [
            f"crd/{doc['metadata']['name']}"
            for path in sorted(crds.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text())
            if doc and doc.get("kind") == "CustomResourceDefinition"
        ]
        self.kubectl(
            "wait", "--for=condition=Established", f"--timeout={int(timeout_s)}s", *names,
            timeout_s=timeout_s + 10,
        )  # fmt: skip

    def add_nodes_from_file(self, path: Path | None = None, wait_ready_s: float = 30) -> list[str]:
        """Creates every node of nodes.yaml (default: tests/cluster/nodes.yaml)."""
        from gpufleet.dev import nodes

        pools = nodes.load_pools(path or tools.repo_root() / "tests/cluster/nodes.yaml")
        api = self.api_client()
        try:
            specs = [spec for pool in pools.values() for spec in pool.nodes]
            return nodes.add_nodes(api, specs, wait_ready_s=wait_ready_s)
        finally:
            api.close()

    def describe_failure(self, lines: int = 25) -> str:
        """Where the logs are and the last lines of each component's log."""
        parts = [f"Control plane logs are in {self.log_dir}"]
        for proc in self._procs:
            state = "running" if proc.alive() else f"exited ({_exit_code(proc)})"
            parts.append(f"--- {proc.name}: {state}, {proc.log}")
            parts.extend(_tail(proc.log, lines))
        return "\n".join(parts)

    # ---- start-up ------------------------------------------------------------------------
    @property
    def _dir(self) -> Path:
        if self.work_dir is None:
            raise ControlPlaneError("The control plane has no work dir before start()")
        return self.work_dir

    def _prepare_dir(self) -> None:
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="gpufleet-plane-"))
            self._created_dir = True
        else:
            self.work_dir = self.work_dir.resolve()
            state = self.work_dir / STATE_FILE
            if state.exists() and _state_running(state):
                raise ControlPlaneError(f"A control plane already runs in {self.work_dir}")
            for sub in ("etcd", "pki", "logs", "run"):
                shutil.rmtree(self.work_dir / sub, ignore_errors=True)
        for sub in ("pki", "logs", "run"):
            (self._dir / sub).mkdir(parents=True, exist_ok=True)

    def _should_remove_dir(self) -> bool:
        if self.work_dir is None:
            return False
        if self.remove_work_dir is not None:
            return self.remove_work_dir
        return self._created_dir

    def _start_once(self, binary: Path) -> None:
        t = time.monotonic()
        pki = write_pki(self._dir / "pki", KUBERNETES_SERVICE_IP)
        self._write_kubeconfigs(pki)
        self.timings["pki_s"] = time.monotonic() - t

        t = time.monotonic()
        self._spawn("etcd", self._etcd_args())
        self._spawn("kube-apiserver", self._apiserver_args())
        self._wait_until("kube-apiserver /readyz", self._apiserver_ready)
        self.timings["apiserver_ready_s"] = time.monotonic() - t

        t = time.monotonic()
        self._spawn("kube-controller-manager", self._controller_manager_args())
        self._spawn("kube-scheduler", self._scheduler_args())
        self._spawn("kwok", self._kwok_args())
        self._wait_until("kube-scheduler /healthz", self._scheduler_healthy)
        self._wait_until("kwok /healthz", self._kwok_healthy)
        self._wait_until("ServiceAccount default/default", self._default_service_account)
        self.timings["controllers_ready_s"] = time.monotonic() - t

    def _component_argv0(self, name: str) -> list[str]:
        assert self.binary is not None
        link = self.binary.parent / name
        # The symlink makes argv[0] (and so `ps`) name the component.
        return [str(link)] if link.exists() else [str(self.binary), name]

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.log_dir / f"{name}.log"
        proc = _Process(name, [*self._component_argv0(name), *args], log)
        with log.open("ab") as out:
            proc.popen = subprocess.Popen(
                proc.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self._dir / "run",
                start_new_session=True,  # own process group: one killpg stops it and its children
                preexec_fn=die_with_parent if self.tie_to_parent else None,
                env=_component_env(self._dir),
            )
        proc.pid = proc.popen.pid
        self._procs.append(proc)

    def _wait_until(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        delay = 0.05
        while True:
            for proc in self._procs:
                if not proc.alive():
                    raise ControlPlaneError(
                        f"{proc.name} exited ({_exit_code(proc)}) while waiting for {what}\n"
                        + self.describe_failure()
                    )
            if ready():
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"Timed out after {self.start_timeout_s}s waiting for {what}\n"
                    + self.describe_failure()
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    # ---- component flags -----------------------------------------------------------------
    def _etcd_args(self) -> list[str]:
        client_url = f"http://127.0.0.1:{self.ports.etcd_client}"
        peer_url = f"http://127.0.0.1:{self.ports.etcd_peer}"
        return [
            "--name=gpufleet",
            f"--data-dir={self._dir / 'etcd'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=gpufleet={peer_url}",
            "--initial-cluster-state=new",
            # A throwaway test store: durability is not worth the fsync latency.
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=2147483648",
            "--log-level=warn",
        ]

    def _apiserver_args(self) -> list[str]:
        pki = self._dir / "pki"
        return [
            f"--etcd-servers=http://127.0.0.1:{self.ports.etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports.apiserver}",
            f"--cert-dir={self._dir / 'run' / 'apiserver'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=Node,RBAC",
            "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Aggregated APIs (metrics-server and the like) authenticate the apiserver by these.
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--allow-privileged=true",
            # The endpoint reconciler refuses a loopback address; nothing needs that Endpoint.
            "--endpoint-reconciler-type=none",
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
            f"--v={self.verbosity}",
        ]

    def _controller_manager_args(self) -> list[str]:
        pki = self._dir / "pki"
        kubeconfig = self._dir / "kube-controller-manager.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports.controller_manager}",
            f"--cert-dir={self._dir / 'run' / 'kube-controller-manager'}",
            "--leader-elect=false",
            # As kubeadm does: each controller acts under its own ServiceAccount and RBAC role.
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--controllers=*",
            "--profiling=false",
            f"--v={self.verbosity}",
        ]

    def _scheduler_args(self) -> list[str]:
        kubeconfig = self._dir / "kube-scheduler.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports.scheduler}",
            f"--cert-dir={self._dir / 'run' / 'kube-scheduler'}",
            "--leader-elect=false",
            "--profiling=false",
            f"--v={self.verbosity}",
        ]

    def _kwok_args(self) -> list[str]:
        stages = self.stages or tools.repo_root() / "tests/cluster/kwok-stages.yaml"
        return [
            f"--config={stages}",
            f"--kubeconfig={self._dir / 'kwok.kubeconfig'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address=127.0.0.1:{self.ports.kwok}",
            f"--cidr={POD_CIDR}",
            f"--node-ip={NODE_IP}",
            "--node-lease-duration-seconds=40",
        ]

    # ---- readiness probes ----------------------------------------------------------------
    def _admin_ssl(self) -> ssl.SSLContext:
        pki = self._dir / "pki"
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        return ctx

    def _get(self, url: str, ctx: ssl.SSLContext | None) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (OSError, ssl.SSLError):
            return 0, b""

    def _apiserver_ready(self) -> bool:
        return self._get(f"{self.server}/readyz", self._admin_ssl())[0] == 200

    def _scheduler_healthy(self) -> bool:
        # Its serving cert is self-signed and /healthz is open to anyone: nothing to verify.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return self._get(f"https://127.0.0.1:{self.ports.scheduler}/healthz", ctx)[0] == 200

    def _kwok_healthy(self) -> bool:
        return self._get(f"http://127.0.0.1:{self.ports.kwok}/healthz", None)[0] == 200

    def _default_service_account(self) -> bool:
        url = f"{self.server}/api/v1/namespaces/default/serviceaccounts/default"
        return self._get(url, self._admin_ssl())[0] == 200

    # ---- kubeconfigs and state -----------------------------------------------------------
    def _write_kubeconfigs(self, pki: Pki) -> None:
        users = {
            "kubeconfig": "admin",
            "kube-controller-manager.kubeconfig": "kube-controller-manager",
            "kube-scheduler.kubeconfig": "kube-scheduler",
            "kwok.kubeconfig": "kwok",
        }
        for filename, user in users.items():
            path = self._dir / filename
            path.write_text(json.dumps(kubeconfig(self.server, pki, user), indent=2))
            path.chmod(0o600)

    def _write_state(self, failed: str | None = None) -> None:
        state = {
            "work_dir": str(self._dir),
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "binary": str(self.binary),
            "pids": self.pids,
            "remove_work_dir": self._should_remove_dir(),
            "logs": str(self.log_dir),
            "timings": self.timings,
            "failed": failed,
        }
        (self._dir / STATE_FILE).write_text(json.dumps(state, indent=2))

    @classmethod
    def from_state(cls, work_dir: Path) -> ControlPlane:
        """The plane a detached `up` left running in work_dir (read from its state file)."""
        state = json.loads((work_dir / STATE_FILE).read_text())
        plane = cls(work_dir=Path(state["work_dir"]), binary=Path(state["binary"]))
        plane.remove_work_dir = bool(state.get("remove_work_dir"))
        port = int(state["server"].rsplit(":", 1)[1])
        plane.ports = Ports(0, 0, port, 0, 0, 0)
        plane._procs = [
            _Process(name, [], plane.log_dir / f"{name}.log", pid=int(pid))
            for name, pid in state["pids"].items()
        ]
        plane._started = True
        return plane

    # ---- teardown ------------------------------------------------------------------------
    def _stop_processes(self, timeout_s: float = _EXIT_STOP_S) -> None:
        # Reverse order matters little: every group gets SIGTERM at once, SIGKILL if it lingers.
        procs = list(reversed(self._procs))
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            while proc.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if proc.alive() or _group_alive(proc.pid):
                _signal_group(proc, signal.SIGKILL)
        for proc in procs:
            if proc.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=5)
            else:
                end = time.monotonic() + 5
                while _pid_alive(proc.pid) and time.monotonic() < end:
                    time.sleep(0.05)
        self._procs.clear()

    def _stop_at_exit(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()


# ---- processes ---------------------------------------------------------------------------
def die_with_parent() -> None:
    """In the child before exec: receive SIGKILL when the Python process that started us dies."""
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _component_env(work_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "ETCD"))}
    # kwok and helm read ~/.kwok and ~/.config/helm; keep them inside the plane.
    env["HOME"] = str(work_dir / "run")
    return env


def _signal_group(proc: _Process, sig: signal.Signals) -> None:
    if proc.pid <= 0:
        return
    if proc.popen is None and not _is_our_component(proc.pid):
        return  # a detached plane's pid that the system reused for something else
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _is_our_component(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and (
        cmdline[0].endswith(tuple(c.encode() for c in (*COMPONENTS, "gpufleet-cluster")))
    )


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _exit_code(proc: _Process) -> str:
    if proc.popen is not None and proc.popen.returncode is not None:
        return f"exit code {proc.popen.returncode}"
    return "unknown exit code"


def _tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ["(no log)"]


def _state_running(state_file: Path) -> bool:
    try:
        pids = json.loads(state_file.read_text()).get("pids", {})
    except (OSError, ValueError):
        return False
    return any(_pid_alive(int(pid)) and _is_our_component(int(pid)) for pid in pids.values())


# ---- command line ------------------------------------------------------------------------
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
    alive = {n: _pid_alive(int(p)) and _is_our_component(int(p)) for n, p in state["pids"].items()}
    running = bool(alive) and all(alive.values())
    print(f"Control plane in {work_dir}: {'running' if running else 'not running'}")
    for name, ok in alive.items():
        print(f"  {name:<24} {'up' if ok else 'down'}")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0 if running else 1


@contextlib.contextmanager
def running_plane(**kwargs: Any) -> Iterator[ControlPlane]:
    """A started plane for the duration of a with-block."""
    plane = ControlPlane(**kwargs)
    try:
        yield plane.start()
    finally:
        plane.stop()


if __name__ == "__main__":
    sys.exit(cluster_main())
