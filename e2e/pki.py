"""The local cluster's certificates: one CA for serving and clients, one for the front proxy, a service-account key.

Everything is made fresh per cluster directory, valid for a day, for 127.0.0.1 only; nothing here is a secret
outside the throw-away cluster it was made for.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


class _Authority:
    def __init__(self, directory: Path, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.subject = _name(name)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.subject)
            .issuer_name(self.subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
        self.pair.cert.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self.pair.key, self.key)

    def issue(
        self,
        directory: Path,
        file_stem: str,
        common_name: str,
        *,
        organization: str | None = None,
        server_names: tuple[str, ...] = (),
        server_ips: tuple[str, ...] = (),
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server_names or server_ips else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server_names or server_ips:
            alt: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            alt += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        pair = KeyPair(directory / f"{file_stem}.crt", directory / f"{file_stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(pair.key, key)
        return pair


@dataclass(frozen=True)
class ClusterPki:
    ca: KeyPair
    apiserver: KeyPair
    admin: KeyPair
    controller_manager: KeyPair
    scheduler: KeyPair
    kubelet_client: KeyPair
    front_proxy_ca: KeyPair
    front_proxy_client: KeyPair
    service_account_key: Path
    service_account_pub: Path


def make_pki(directory: Path, service_ip: str) -> ClusterPki:
    """Write a complete set of certificates for one local cluster into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _Authority(directory, "ca")
    front = _Authority(directory, "front-proxy-ca")
    apiserver = ca.issue(
        directory,
        "apiserver",
        "kube-apiserver",
        server_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        server_ips=("127.0.0.1", service_ip),
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_private = directory / "sa.key"
    _write_key(sa_private, sa_key)
    sa_public = directory / "sa.pub"
    sa_public.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return ClusterPki(
        ca=ca.pair,
        apiserver=apiserver,
        admin=ca.issue(directory, "admin", "e2e-admin", organization="system:masters"),
        controller_manager=ca.issue(directory, "controller-manager", "system:kube-controller-manager"),
        scheduler=ca.issue(directory, "scheduler", "system:kube-scheduler"),
        kubelet_client=ca.issue(
            directory, "apiserver-kubelet-client", "kube-apiserver-kubelet-client", organization="system:masters"
        ),
        front_proxy_ca=front.pair,
        front_proxy_client=front.issue(directory, "front-proxy-client", "front-proxy-client"),
        service_account_key=sa_private,
        service_account_pub=sa_public,
    )
