"""What each control plane component is told: its ports and its command-line flags.

Everything listens on 127.0.0.1 on ports picked free for this plane, and keeps its state
under the plane's work dir, so two planes on one machine never share a port or a path.
The flags are those of a kubeadm-like cluster (client-cert auth, Node+RBAC authorization,
service-account token signing, controllers under their own ServiceAccounts), minus what
has no use on a throwaway loopback plane (fsync, leader election, profiling).
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass
from pathlib import Path

from gpufleet.dev import tools

__all__ = [
    "KUBERNETES_SERVICE_IP",
    "Ports",
    "apiserver_args",
    "controller_manager_args",
    "etcd_args",
    "kwok_args",
    "scheduler_args",
]

SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.1/16"  # kwok hands these out as pod IPs; nothing ever connects to them
# Node addresses are loopback, so anything that would dial a "kubelet" stays on this machine.
NODE_IP = "127.0.0.1"


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


def etcd_args(work_dir: Path, ports: Ports) -> list[str]:
    client_url = f"http://127.0.0.1:{ports.etcd_client}"
    peer_url = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        "--name=gpufleet",
        f"--data-dir={work_dir / 'etcd'}",
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


def apiserver_args(work_dir: Path, ports: Ports, verbosity: int) -> list[str]:
    pki = work_dir / "pki"
    return [
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={work_dir / 'run' / 'apiserver'}",
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
        f"--v={verbosity}",
    ]


def controller_manager_args(work_dir: Path, ports: Ports, verbosity: int) -> list[str]:
    pki = work_dir / "pki"
    kubeconfig = work_dir / "kube-controller-manager.kubeconfig"
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.controller_manager}",
        f"--cert-dir={work_dir / 'run' / 'kube-controller-manager'}",
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
        f"--v={verbosity}",
    ]


def scheduler_args(work_dir: Path, ports: Ports, verbosity: int) -> list[str]:
    kubeconfig = work_dir / "kube-scheduler.kubeconfig"
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        f"--cert-dir={work_dir / 'run' / 'kube-scheduler'}",
        "--leader-elect=false",
        "--profiling=false",
        f"--v={verbosity}",
    ]


def kwok_args(work_dir: Path, ports: Ports, stages: Path | None) -> list[str]:
    """stages: kwok's Stage configuration; None: tests/cluster/kwok-stages.yaml."""
    stages = stages or tools.repo_root() / "tests/cluster/kwok-stages.yaml"
    return [
        f"--config={stages}",
        f"--kubeconfig={work_dir / 'kwok.kubeconfig'}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        f"--server-address=127.0.0.1:{ports.kwok}",
        f"--cidr={POD_CIDR}",
        f"--node-ip={NODE_IP}",
        "--node-lease-duration-seconds=40",
    ]
