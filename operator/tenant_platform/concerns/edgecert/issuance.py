"""Issuing the self-signed edge certificate: the one place that makes a private key.

Not pure (a fresh key and a random serial on every call), so it lives outside status/ and
render/; the policy it follows (names, lifetime) is pure and lives in concerns/edgecert/certs.py, the
decision to issue in concerns/edgecert/verdict.py, and the Secret that carries the result in
concerns/edgecert/manifests.py. The clock is passed in; the private key is returned to the caller only, which
sends it to the API server inside the TLS Secret and nowhere else.
"""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tenant_platform.concerns.edgecert import certs

# Backdating absorbs clock skew between the operator and clients.
BACKDATE = dt.timedelta(minutes=5)
ISSUER_ORGANIZATION = "tenant-platform-operator"


def issue_self_signed(
    domain: str,
    *,
    now: dt.datetime,
    validity: dt.timedelta = certs.SELF_SIGNED_VALIDITY,
) -> tuple[bytes, bytes]:
    """A new ECDSA P-256 self-signed server certificate for ``domain``: (cert PEM, key PEM).

    SANs from ``status.certs.self_signed_dns_names``; notBefore is ``now`` minus five minutes;
    notAfter is ``now + validity``. Not a CA (browsers reject CA certificates used as server certificates);
    clients trust it by pinning the certificate itself (the trust ConfigMap).
    """
    key = ec.generate_private_key(ec.SECP256R1())
    domain = certs.normalize(domain)
    common_name = domain if len(domain) <= 64 else "tenant-platform edge certificate"
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ISSUER_ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in certs.self_signed_dns_names(domain)]), critical=False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
