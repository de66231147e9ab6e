"""Certificates and kubeconfigs for the local control plane.

One CA signs the apiserver's serving cert and the client certs of the admin and of each
component; a second CA (front-proxy) signs the cert the apiserver presents to aggregated
APIs; an EC key pair signs service-account tokens. EC P-256 throughout: an RSA key would
cost most of a second each, the whole set here takes milliseconds.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CLIENTS", "Pki", "kubeconfig", "write_pki"]

# user -> (CN, O). kwok writes node and pod status and leases: it gets cluster admin.
CLIENTS = {
    "admin": ("gpufleet-admin", "system:masters"),
    "kube-controller-manager": ("system:kube-controller-manager", None),
    "kube-scheduler": ("system:kube-scheduler", None),
    "kwok": ("kwok", "system:masters"),
}
_VALID = dt.timedelta(days=365)


@dataclass(frozen=True)
class Pki:
    dir: Path

    def pem(self, name: str) -> bytes:
        return (self.dir / name).read_bytes()


@dataclass(frozen=True)
class _Ca:
    name: x509.Name
    key: ec.EllipticCurvePrivateKey


def write_pki(directory: Path, service_ip: str) -> Pki:
    """Writes ca.*, apiserver.*, <client>.*, front-proxy-ca.*, front-proxy-client.*, sa.*."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca = _write_ca(directory, "ca", "gpufleet-local-ca", now)
    front_proxy_ca = _write_ca(directory, "front-proxy-ca", "gpufleet-front-proxy-ca", now)

    dns = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", service_ip)]
    server = ExtendedKeyUsageOID.SERVER_AUTH
    client = ExtendedKeyUsageOID.CLIENT_AUTH
    _issue(directory, ca, now, "apiserver", "kube-apiserver", None, server, sans)
    for user, (cn, org) in CLIENTS.items():
        _issue(directory, ca, now, user, cn, org, client)
    _issue(directory, front_proxy_ca, now, "front-proxy-client", "front-proxy-client", None, client)

    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write_key(directory / "sa.key", sa_key)
    (directory / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(directory)


def kubeconfig(server: str, pki: Pki, user: str) -> dict[str, Any]:
    """A kubeconfig for one of CLIENTS, with the certs inlined so the file stands alone."""

    def b64(name: str) -> str:
        return base64.b64encode(pki.pem(name)).decode()

    cluster = {"server": server, "certificate-authority-data": b64("ca.crt")}
    credentials = {
        "client-certificate-data": b64(f"{user}.crt"),
        "client-key-data": b64(f"{user}.key"),
    }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "gpufleet-local", "cluster": cluster}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [
            {"name": "gpufleet-local", "context": {"cluster": "gpufleet-local", "user": user}}
        ],
        "current-context": "gpufleet-local",
    }


def _write_ca(directory: Path, filename: str, cn: str, now: dt.datetime) -> _Ca:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    _write_key(directory / f"{filename}.key", key)
    (directory / f"{filename}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return _Ca(name, key)


def _issue(
    directory: Path,
    ca: _Ca,
    now: dt.datetime,
    filename: str,
    cn: str,
    org: str | None,
    usage: x509.ObjectIdentifier,
    sans: Sequence[x509.GeneralName] = (),
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca.name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    _write_key(directory / f"{filename}.key", key)
    (directory / f"{filename}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not cert_sign,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
