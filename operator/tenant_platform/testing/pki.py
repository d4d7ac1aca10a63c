"""The control plane's certificates and kubeconfigs, written into its work dir.

``write_pki`` makes a CA, the apiserver's serving certificate, an admin client certificate
(group system:masters) and a service-account key pair; ``write_kubeconfig`` writes a kubeconfig
with the CA and the user's credentials embedded. Keys and certificates come from
``testing.certs``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tenant_platform.testing.certs import cert_pem, key_pem, new_key

CERT_VALIDITY: Final = datetime.timedelta(days=30)
# Names the apiserver's serving certificate covers, besides 127.0.0.1 and the first service IP.
APISERVER_DNS_NAMES: Final = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclasses.dataclass(frozen=True)
class Pki:
    """Paths of the files ``write_pki`` wrote (PEM, mode 0600)."""

    ca_crt: Path
    apiserver_crt: Path
    apiserver_key: Path
    admin_crt: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path

    @classmethod
    def under(cls, directory: Path) -> Pki:
        """The paths ``write_pki(directory)`` writes (nothing is read or written here)."""
        return cls(
            ca_crt=directory / "ca.crt",
            apiserver_crt=directory / "apiserver.crt",
            apiserver_key=directory / "apiserver.key",
            admin_crt=directory / "admin.crt",
            admin_key=directory / "admin.key",
            sa_key=directory / "sa.key",
            sa_pub=directory / "sa.pub",
        )


def _sign(
    *,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    extensions: Sequence[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + CERT_VALIDITY)
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _leaf_extensions(usage: x509.ObjectIdentifier) -> list[tuple[x509.ExtensionType, bool]]:
    return [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (_key_usage(cert_sign=False), True),
        (x509.ExtendedKeyUsage([usage]), False),
    ]


def write_pki(directory: Path, *, service_ip: str) -> Pki:
    """A CA, the apiserver's serving cert, an admin client cert and a service-account key pair.

    All ECDSA P-256, as envtest's tinyca does; the apiserver and KCM accept ECDSA SA keys (ES256).
    The serving cert covers ``APISERVER_DNS_NAMES``, 127.0.0.1 and ``service_ip``.
    """
    directory.mkdir(mode=0o700)
    ca_key = new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tenant-platform-test-ca")])
    ca = _sign(
        subject=ca_name,
        key=ca_key,
        issuer=ca_name,
        issuer_key=ca_key,
        extensions=[
            (x509.BasicConstraints(ca=True, path_length=None), True),
            (_key_usage(cert_sign=True), True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ],
    )
    serving_key = new_key()
    san = x509.SubjectAlternativeName(
        [x509.DNSName(name) for name in APISERVER_DNS_NAMES]
        + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", service_ip)]
    )
    serving = _sign(
        subject=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        key=serving_key,
        issuer=ca_name,
        issuer_key=ca_key,
        extensions=[*_leaf_extensions(ExtendedKeyUsageOID.SERVER_AUTH), (san, False)],
    )
    admin_key = new_key()
    admin = _sign(
        subject=x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
            ]
        ),
        key=admin_key,
        issuer=ca_name,
        issuer_key=ca_key,
        extensions=_leaf_extensions(ExtendedKeyUsageOID.CLIENT_AUTH),
    )
    sa_key = new_key()
    pki = Pki.under(directory)
    files = {
        pki.ca_crt: cert_pem(ca),
        directory / "ca.key": key_pem(ca_key),
        pki.apiserver_crt: cert_pem(serving),
        pki.apiserver_key: key_pem(serving_key),
        pki.admin_crt: cert_pem(admin),
        pki.admin_key: key_pem(admin_key),
        pki.sa_key: key_pem(sa_key),
        pki.sa_pub: sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    }
    for path, data in files.items():
        path.write_bytes(data)
        path.chmod(0o600)
    return pki


def b64(path: Path) -> str:
    """The file's bytes in base64, as kubeconfigs embed them."""
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, *, server: str, ca: Path, user: dict[str, str]) -> Path:
    """A kubeconfig (mode 0600) for ``server``, trusting ``ca``, authenticating as ``user``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
        "current-context": "local",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
