"""The local control plane: real Kubernetes components as processes on 127.0.0.1, no Docker.

`ControlPlane` starts etcd, kube-apiserver (client-cert auth, Node+RBAC authorization,
service-account token signing), kube-controller-manager, kube-scheduler and kwok (with our
Stage configuration, tests/cluster/kwok-stages.yaml) from the multi-call `gpufleet-cluster`
binary, each in its own process group, on free loopback ports, with all state in one work
directory. It writes an admin kubeconfig there and removes everything on `stop()`.

This module owns the plane's life: what starts in which order, when it counts as ready, its
kubeconfigs and its state file. The components' flags and ports are in
`gpufleet.dev.clusterflags`, their process groups in `gpufleet.dev.clusterprocs`; the
`gpufleet dev cluster up|down|status` command line is `gpufleet.commands.dev_cluster`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.dev import clusterflags, clusterprocs, tools
from gpufleet.dev.clusterflags import KUBERNETES_SERVICE_IP, Ports
from gpufleet.dev.clusterprocs import ComponentProcess, component_alive
from gpufleet.dev.pki import Pki, kubeconfig, write_pki

__all__ = ["STATE_FILE", "ControlPlane", "ControlPlaneError", "running_plane"]

STATE_FILE = "plane.json"


class ControlPlaneError(RuntimeError):
    """The control plane failed to start or is not in the state asked for."""


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
    _procs: list[ComponentProcess] = field(default_factory=list, init=False)
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
            state = "running" if proc.alive() else f"exited ({proc.exit_code()})"
            parts.append(f"--- {proc.name}: {state}, {proc.log}")
            parts.extend(proc.log_tail(lines))
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

        work_dir, ports, v = self._dir, self.ports, self.verbosity
        t = time.monotonic()
        self._spawn("etcd", clusterflags.etcd_args(work_dir, ports))
        self._spawn("kube-apiserver", clusterflags.apiserver_args(work_dir, ports, v))
        self._wait_until("kube-apiserver /readyz", self._apiserver_ready)
        self.timings["apiserver_ready_s"] = time.monotonic() - t

        t = time.monotonic()
        self._spawn(
            "kube-controller-manager", clusterflags.controller_manager_args(work_dir, ports, v)
        )
        self._spawn("kube-scheduler", clusterflags.scheduler_args(work_dir, ports, v))
        self._spawn("kwok", clusterflags.kwok_args(work_dir, ports, self.stages))
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
        run_dir = self._dir / "run"
        proc = clusterprocs.spawn(
            name,
            [*self._component_argv0(name), *args],
            self.log_dir / f"{name}.log",
            cwd=run_dir,
            home=run_dir,
            tie_to_parent=self.tie_to_parent,
        )
        self._procs.append(proc)

    def _wait_until(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        delay = 0.05
        while True:
            for proc in self._procs:
                if not proc.alive():
                    raise ControlPlaneError(
                        f"{proc.name} exited ({proc.exit_code()}) while waiting for {what}\n"
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
            ComponentProcess(name, [], plane.log_dir / f"{name}.log", pid=int(pid))
            for name, pid in state["pids"].items()
        ]
        plane._started = True
        return plane

    # ---- teardown ------------------------------------------------------------------------
    def _stop_processes(self) -> None:
        clusterprocs.stop_all(self._procs)
        self._procs.clear()

    def _stop_at_exit(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()


def _state_running(state_file: Path) -> bool:
    try:
        pids = json.loads(state_file.read_text()).get("pids", {})
    except (OSError, ValueError):
        return False
    return any(component_alive(int(pid)) for pid in pids.values())


@contextlib.contextmanager
def running_plane(**kwargs: Any) -> Iterator[ControlPlane]:
    """A started plane for the duration of a with-block."""
    plane = ControlPlane(**kwargs)
    try:
        yield plane.start()
    finally:
        plane.stop()
