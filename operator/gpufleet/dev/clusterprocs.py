"""The control plane's processes: how a component is started, recognised and stopped.

Each component runs in its own process group (one killpg stops it and whatever it forked),
with a HOME inside the plane's work dir, and, for a plane tied to its Python process, dies
with that process (PR_SET_PDEATHSIG). A detached plane outlives the process that started
it: `down` and `status` then know its components only by the pids in its state file, and
the system reuses pids, so a pid counts as ours only while /proc names one of our
components as its program, and a zombie counts as dead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "COMPONENTS",
    "ComponentProcess",
    "component_alive",
    "die_with_parent",
    "spawn",
    "stop_all",
]

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# Then SIGKILL: kube-apiserver drains for 10+ s on SIGTERM and etcd waits for its clients;
# the state is throwaway, and bbolt survives a killed process.
_EXIT_STOP_S = 1.0


@dataclass
class ComponentProcess:
    """One component: started here (popen set) or known by the pid a state file recorded."""

    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    pid: int = 0

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid)

    def exit_code(self) -> str:
        if self.popen is not None and self.popen.returncode is not None:
            return f"exit code {self.popen.returncode}"
        return "unknown exit code"

    def log_tail(self, lines: int) -> list[str]:
        try:
            return self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ["(no log)"]


def spawn(
    name: str, argv: list[str], log: Path, *, cwd: Path, home: Path, tie_to_parent: bool
) -> ComponentProcess:
    """Starts one component in its own process group, its output appended to `log`."""
    proc = ComponentProcess(name, argv, log)
    with log.open("ab") as out:
        proc.popen = subprocess.Popen(
            proc.argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,  # own process group: one killpg stops it and its children
            preexec_fn=die_with_parent if tie_to_parent else None,
            env=_component_env(home),
        )
    proc.pid = proc.popen.pid
    return proc


def stop_all(procs: list[ComponentProcess], timeout_s: float = _EXIT_STOP_S) -> None:
    """SIGTERM to every group at once, SIGKILL to what lingers, then waits for them to go."""
    # Reverse order matters little: every group gets SIGTERM at once, SIGKILL if it lingers.
    procs = list(reversed(procs))
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
            while pid_alive(proc.pid) and time.monotonic() < end:
                time.sleep(0.05)


def die_with_parent() -> None:
    """In the child before exec: receive SIGKILL when the Python process that started us dies."""
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def component_alive(pid: int) -> bool:
    """The pid runs, and runs one of our components (not a process that reused the pid)."""
    return pid_alive(pid) and _is_our_component(pid)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _component_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "ETCD"))}
    # kwok and helm read ~/.kwok and ~/.config/helm; keep them inside the plane.
    env["HOME"] = str(home)
    return env


def _signal_group(proc: ComponentProcess, sig: signal.Signals) -> None:
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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
