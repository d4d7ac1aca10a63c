"""Pure edge-certificate analysis: every reason, TLS wildcard rules, trust bundle, self-signed issuer."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from tests.support import platform

from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.concerns.edgecert import certs, issuance, manifests
from tenant_platform.testing import certs as factory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DOMAIN = "kamiwaza.example.com"
RENEW = dt.timedelta(hours=720)


def analyze(secret: dict | None, domain: str = DOMAIN, now: dt.datetime = NOW) -> certs.CertReport:
    return certs.analyze_secret(secret, domain=domain, now=now, renew_before=RENEW, where="istio-system/edge")


def secret_for(leaf: factory.Issued, *chain: x509.Certificate, **kwargs: object) -> dict:
    return factory.tls_secret("edge", "istio-system", chain=[leaf.cert, *chain], key=leaf.key, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "domain", "expected"),
    [
        pytest.param("kamiwaza.example.com", "kamiwaza.example.com", True, id="exact"),
        pytest.param("KAMIWAZA.example.com.", "kamiwaza.EXAMPLE.com", True, id="case and trailing dot"),
        pytest.param("*.example.com", "kamiwaza.example.com", True, id="wildcard one label"),
        pytest.param("*.example.com", "example.com", False, id="wildcard never covers the parent"),
        pytest.param("*.example.com", "a.b.example.com", False, id="wildcard covers one label only"),
        pytest.param("*.com", "example.com", False, id="no wildcard under a single label"),
        pytest.param("k*.example.com", "kamiwaza.example.com", False, id="no partial wildcard"),
        pytest.param("kamiwaza.*.com", "kamiwaza.example.com", False, id="wildcard only leftmost"),
        pytest.param("*.*.com", "a.example.com", False, id="one wildcard only"),
        pytest.param("other.example.com", "kamiwaza.example.com", False, id="different name"),
        pytest.param("", "kamiwaza.example.com", False, id="empty"),
    ],
)
def test_name_matches(pattern: str, domain: str, expected: bool) -> None:
    assert certs.name_matches(pattern, domain) is expected


def test_self_signed_valid_publishes_itself_and_no_key() -> None:
    leaf = factory.make_leaf([DOMAIN], now=NOW)
    report = analyze(secret_for(leaf))
    assert report.reason == Reason.VALID, report.message
    assert report.facts is not None and report.facts.self_signed
    assert report.facts.dns_names == [DOMAIN]
    assert x509.load_pem_x509_certificates(report.trust_pem.encode())[0] == leaf.cert
    assert "PRIVATE KEY" not in report.trust_pem
    assert not report.publicly_trusted
    recorded = report.facts.recorded(publicly_trusted=report.publicly_trusted)
    assert recorded["selfSigned"] is True
    assert recorded["notAfter"] == (NOW + dt.timedelta(days=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert recorded["dnsNames"] == [DOMAIN]


def test_ca_issued_with_root_in_chain_publishes_the_root() -> None:
    root = factory.make_ca(now=NOW)
    leaf = factory.make_leaf([DOMAIN], now=NOW, issuer=root)
    report = analyze(secret_for(leaf, root.cert))
    assert report.reason == Reason.VALID, report.message
    assert report.facts is not None and not report.facts.self_signed
    assert report.facts.issuer == "CN=test root CA"
    assert x509.load_pem_x509_certificates(report.trust_pem.encode()) == [root.cert]


def test_ca_issued_with_ca_crt_publishes_ca_crt() -> None:
    root = factory.make_ca(now=NOW)
    inter = factory.make_ca("test intermediate", now=NOW, parent=root)
    leaf = factory.make_leaf([DOMAIN], now=NOW, issuer=inter)
    report = analyze(secret_for(leaf, inter.cert, ca=[root.cert]))
    assert report.reason == Reason.VALID, report.message
    assert x509.load_pem_x509_certificates(report.trust_pem.encode()) == [root.cert]
    assert "ca.crt" in report.trust_source


def test_chain_without_root_is_assumed_public() -> None:
    root = factory.make_ca(now=NOW)
    inter = factory.make_ca("test intermediate", now=NOW, parent=root)
    leaf = factory.make_leaf([DOMAIN], now=NOW, issuer=inter)
    report = analyze(secret_for(leaf, inter.cert))
    assert report.reason == Reason.VALID
    assert report.trust_pem == ""
    assert report.publicly_trusted
    assert "assumed to be publicly trusted" in report.message


def test_wildcard_certificate_covers_the_domain() -> None:
    leaf = factory.make_leaf(["*.example.com"], now=NOW)
    assert analyze(secret_for(leaf)).reason == Reason.VALID
    assert analyze(secret_for(leaf), domain="a.b.example.com").reason == Reason.DOMAIN_NOT_COVERED


def test_wrong_san_is_domain_not_covered_even_if_common_name_matches() -> None:
    leaf = factory.make_leaf(["other.example.com"], now=NOW, common_name=DOMAIN)
    report = analyze(secret_for(leaf))
    assert report.reason == Reason.DOMAIN_NOT_COVERED
    assert "other.example.com" in report.message and DOMAIN in report.message


def test_expired() -> None:
    leaf = factory.make_leaf(
        [DOMAIN], now=NOW, not_before=NOW - dt.timedelta(days=100), not_after=NOW - dt.timedelta(days=1)
    )
    report = analyze(secret_for(leaf))
    assert report.reason == Reason.EXPIRED
    assert report.seconds_to_expiry(NOW) == pytest.approx(-86400)


def test_not_yet_valid() -> None:
    leaf = factory.make_leaf([DOMAIN], now=NOW, not_before=NOW + dt.timedelta(days=1))
    assert analyze(secret_for(leaf)).reason == Reason.NOT_YET_VALID


def test_expiring_soon_within_renew_before() -> None:
    leaf = factory.make_leaf([DOMAIN], now=NOW, not_after=NOW + dt.timedelta(days=10))
    report = analyze(secret_for(leaf))
    assert report.reason == Reason.EXPIRING_SOON
    assert "720h" in report.message


def test_key_mismatch() -> None:
    leaf = factory.make_leaf([DOMAIN], now=NOW)
    other = factory.new_key()
    secret = factory.tls_secret("edge", "istio-system", chain=[leaf.cert], key=other)
    report = analyze(secret)
    assert report.reason == Reason.KEY_MISMATCH
    assert "PRIVATE KEY" not in report.message


def test_chain_out_of_order_is_chain_invalid() -> None:
    root = factory.make_ca(now=NOW)
    other = factory.make_ca("unrelated CA", now=NOW)
    leaf = factory.make_leaf([DOMAIN], now=NOW, issuer=root)
    assert analyze(secret_for(leaf, other.cert)).reason == Reason.CHAIN_INVALID


def test_several_problems_are_all_named() -> None:
    leaf = factory.make_leaf(["other.example.com"], now=NOW, not_after=NOW - dt.timedelta(days=1))
    report = analyze(secret_for(leaf))
    assert report.reason == Reason.DOMAIN_NOT_COVERED
    assert "expired" in report.message


def test_missing_wrong_type_and_malformed() -> None:
    assert analyze(None).reason == Reason.SECRET_NOT_FOUND
    leaf = factory.make_leaf([DOMAIN], now=NOW)
    assert analyze(secret_for(leaf, secret_type="Opaque")).reason == Reason.WRONG_SECRET_TYPE
    broken = secret_for(leaf)
    broken["data"]["tls.crt"] = base64.b64encode(b"not a certificate").decode()
    assert analyze(broken).reason == Reason.MALFORMED
    no_key = secret_for(leaf)
    del no_key["data"]["tls.key"]
    report = analyze(no_key)
    assert report.reason == Reason.MALFORMED and "tls.key" in report.message
    bad_b64 = secret_for(leaf)
    bad_b64["data"]["tls.key"] = "!!!"
    assert analyze(bad_b64).reason == Reason.MALFORMED


def test_issue_self_signed() -> None:
    cert_pem, key_pem = issuance.issue_self_signed(DOMAIN, now=NOW, validity=dt.timedelta(days=90))
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]
    assert certs.dns_names_of(cert) == [DOMAIN, f"*.{DOMAIN}"]
    assert cert.not_valid_after_utc == NOW + dt.timedelta(days=90)
    assert cert.not_valid_before_utc == NOW - dt.timedelta(minutes=5)
    assert not certs.is_ca(cert)
    assert certs.is_self_signed(cert)
    secret = {
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": base64.b64encode(cert_pem).decode(), "tls.key": base64.b64encode(key_pem).decode()},
    }
    report = analyze(secret)
    assert report.reason == Reason.VALID, report.message
    assert key_pem.decode() not in report.message


def test_self_signed_names_and_validity() -> None:
    assert certs.self_signed_dns_names("kamiwaza") == ["kamiwaza"]
    assert certs.self_signed_dns_names("Example.com.") == ["example.com", "*.example.com"]
    assert certs.self_signed_validity(dt.timedelta(hours=720)) == dt.timedelta(days=90)
    assert certs.self_signed_validity(dt.timedelta(days=60)) == dt.timedelta(days=180)
    # A very long domain still issues (the common name is capped at 64 characters).
    long_domain = ".".join(["a" * 60, "b" * 60, "example.com"])
    cert_pem, _ = issuance.issue_self_signed(long_domain, now=NOW)
    assert certs.dns_names_of(x509.load_pem_x509_certificate(cert_pem))[0] == long_domain


def test_trust_config_map_render() -> None:
    skeleton = manifests.render_trust_config_map(platform("demo", "kamiwaza", domain=DOMAIN), None)
    assert skeleton["metadata"] == {
        "name": "kamiwaza-edge-trust",
        "namespace": "kamiwaza",
        "annotations": {"tenancy.dev/render-note": "Skeleton: the operator publishes the real bundle at runtime."},
    }
    assert "PLACEHOLDER" in skeleton["data"]["ca-certificates.crt"]
    assert "PRIVATE KEY" not in skeleton["data"]["ca-certificates.crt"]


def test_a_key_pasted_into_the_certificate_fields_never_reaches_the_trust_bundle() -> None:
    root = factory.make_ca(now=NOW)
    leaf = factory.make_leaf([DOMAIN], now=NOW, issuer=root)
    secret = secret_for(leaf)
    sloppy_ca = factory.key_pem(root.key) + factory.cert_pem(root.cert)
    secret["data"]["ca.crt"] = base64.b64encode(sloppy_ca).decode()
    sloppy_chain = factory.cert_pem(leaf.cert) + factory.key_pem(leaf.key)
    secret["data"]["tls.crt"] = base64.b64encode(sloppy_chain).decode()
    report = analyze(secret)
    assert report.reason == Reason.VALID, report.message
    assert x509.load_pem_x509_certificates(report.trust_pem.encode()) == [root.cert]
    assert "PRIVATE KEY" not in report.trust_pem
