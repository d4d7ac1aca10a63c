"""Certificates for tests and demos: a tiny CA, leaves with chosen names and dates, TLS Secrets.

Everything is ECDSA P-256 and built with ``cryptography``. ``tls_secret`` returns a Secret dict
ready for the API (base64 ``data``), so tests can exercise every edge-certificate outcome.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def cert_pem(*certs: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def make_ca(
    common_name: str = "test root CA",
    *,
    now: dt.datetime,
    parent: Issued | None = None,
    days: int = 365,
) -> Issued:
    """A CA certificate: a self-signed root, or an intermediate signed by ``parent``."""
    key = new_key()
    issuer_name = parent.cert.subject if parent else _name(common_name)
    signing_key = parent.key if parent else key
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(signing_key, hashes.SHA256())
    )
    return Issued(cert, key)


def make_leaf(
    dns_names: Sequence[str],
    *,
    now: dt.datetime,
    issuer: Issued | None = None,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
    common_name: str | None = None,
) -> Issued:
    """A server certificate for ``dns_names``, self-signed unless ``issuer`` is given."""
    key = new_key()
    subject = _name(common_name or (dns_names[0] if dns_names else "no-san"))
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - dt.timedelta(days=1))
        .not_valid_after(not_after or now + dt.timedelta(days=90))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
    cert = builder.sign(issuer.key if issuer else key, hashes.SHA256())
    return Issued(cert, key)


def tls_secret(
    name: str,
    namespace: str,
    *,
    chain: Sequence[x509.Certificate],
    key: ec.EllipticCurvePrivateKey,
    ca: Sequence[x509.Certificate] = (),
    secret_type: str = "kubernetes.io/tls",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    data = {
        "tls.crt": base64.b64encode(cert_pem(*chain)).decode(),
        "tls.key": base64.b64encode(key_pem(key)).decode(),
    }
    if ca:
        data["ca.crt"] = base64.b64encode(cert_pem(*ca)).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "type": secret_type,
        "data": data,
    }
