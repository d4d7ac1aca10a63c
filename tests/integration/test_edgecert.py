"""EdgeCertificateReady against the real API server: Secrets generated in the test, SelfSigned issuance
and renewal with an injected clock, and the trust ConfigMap (which never holds a key).

Each test has its own gateway namespace and tenant namespace, so the Secret and the trust
ConfigMap are private to it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509
from networking_support import context, delete_namespace, run, writes
from tests.support import create_namespace, platform_body, sole_condition

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.concerns.edgecert import certs, step
from tenant_platform.kube.client import Kube
from tenant_platform.testing import certs as factory

NOW = datetime.now(UTC).replace(microsecond=0)
SECRET = "edge-tls"


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


@pytest.fixture
def spaces(kube: Kube, unique_name: str) -> Iterator[tuple[str, str]]:
    """(tenant namespace, gateway namespace), created for the test and deleted after it."""
    tenant, gw = unique_name, f"{unique_name}-gw"
    for ns in (tenant, gw):
        create_namespace(kube, ns)
    yield tenant, gw
    for ns in (tenant, gw):
        delete_namespace(kube, ns)


def platform_for(name: str, spaces: tuple[str, str], **edge: Any) -> dict[str, Any]:
    tenant, gw = spaces
    return platform_body(
        name,
        tenant,
        gateway={"namespace": gw, "name": name},
        edgeCertificate={"secretName": SECRET, **edge},
    )


def trust_map(kube: Kube, platform: dict[str, Any]) -> dict[str, Any] | None:
    ns = platform["spec"]["namespace"]
    return kube.get("v1", "ConfigMap", f"{ns}-edge-trust", ns)


def assert_no_key(obj: dict[str, Any]) -> None:
    for value in (obj.get("data") or {}).values():
        assert "PRIVATE KEY" not in value


def leaf_for(domain: str) -> factory.Issued:
    return factory.make_leaf([domain], now=NOW)


CASES = ["expired", "wrong SAN", "wildcard", "key mismatch", "self-signed", "CA-issued"]


def make_case(case: str, domain: str, name: str, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Secret, expectations) for one named case."""
    parent = domain.split(".", 1)[1]
    if case == "expired":
        leaf = factory.make_leaf(
            [domain], now=NOW, not_before=NOW - timedelta(days=90), not_after=NOW - timedelta(hours=1)
        )
        return factory.tls_secret(name, namespace, chain=[leaf.cert], key=leaf.key), {
            "reason": Reason.EXPIRED,
            "selfSigned": True,
        }
    if case == "wrong SAN":
        leaf = factory.make_leaf([f"other.{parent}"], now=NOW)
        return factory.tls_secret(name, namespace, chain=[leaf.cert], key=leaf.key), {
            "reason": Reason.DOMAIN_NOT_COVERED,
            "dnsNames": [f"other.{parent}"],
        }
    if case == "wildcard":
        leaf = factory.make_leaf([f"*.{parent}"], now=NOW)
        return factory.tls_secret(name, namespace, chain=[leaf.cert], key=leaf.key), {
            "reason": Reason.VALID,
            "dnsNames": [f"*.{parent}"],
        }
    if case == "key mismatch":
        leaf = leaf_for(domain)
        return factory.tls_secret(name, namespace, chain=[leaf.cert], key=factory.new_key()), {
            "reason": Reason.KEY_MISMATCH
        }
    if case == "self-signed":
        leaf = leaf_for(domain)
        return factory.tls_secret(name, namespace, chain=[leaf.cert], key=leaf.key), {
            "reason": Reason.VALID,
            "selfSigned": True,
            "trust": [leaf.cert],
        }
    assert case == "CA-issued"
    root = factory.make_ca("edge test root", now=NOW)
    leaf = factory.make_leaf([domain], now=NOW, issuer=root)
    return factory.tls_secret(name, namespace, chain=[leaf.cert], key=leaf.key, ca=[root.cert]), {
        "reason": Reason.VALID,
        "selfSigned": False,
        "issuer": "CN=edge test root",
        "trust": [root.cert],
    }


@pytest.mark.parametrize("case", CASES)
def test_certificate_cases(kube: Kube, unique_name: str, spaces: tuple[str, str], case: str) -> None:
    platform = platform_for(unique_name, spaces)
    domain = platform["spec"]["domain"]
    secret, expected = make_case(case, domain, SECRET, spaces[1])
    kube.create(secret)

    result = run(step.STEP, kube, platform, now=NOW)
    status, reason, message = sole_condition(result)
    assert reason == expected["reason"], message
    assert status == ("True" if reason == Reason.VALID else "False")
    recorded = result.recorded["edgeCertificate"]
    assert recorded["dnsNames"] == expected.get("dnsNames", [domain])
    for key in ("selfSigned", "issuer"):
        if key in expected:
            assert recorded[key] == expected[key]
    assert "PRIVATE KEY" not in message
    # External issuer: the operator never touches the Secret.
    assert kube.get("v1", "Secret", SECRET, spaces[1])["data"] == secret["data"]
    published = trust_map(kube, platform)
    if "trust" in expected and reason == Reason.VALID:
        assert published is not None
        assert_no_key(published)
        bundle = published["data"]["ca-certificates.crt"].encode()
        assert x509.load_pem_x509_certificates(bundle) == expected["trust"]
        assert recorded["trustConfigMap"] == published["metadata"]["name"]


def test_missing_and_wrong_type(kube: Kube, unique_name: str, spaces: tuple[str, str]) -> None:
    platform = platform_for(unique_name, spaces)
    assert sole_condition(run(step.STEP, kube, platform, now=NOW))[1] == Reason.SECRET_NOT_FOUND
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": spaces[1]},
            "type": "Opaque",
            "data": {"tls.crt": base64.b64encode(b"x").decode()},
        }
    )
    status, reason, message = sole_condition(run(step.STEP, kube, platform, now=NOW))
    assert (status, reason) == ("False", Reason.WRONG_SECRET_TYPE)
    assert "kubernetes.io/tls" in message


def test_self_signed_issuance_and_renewal_with_injected_clock(
    kube: Kube, unique_name: str, spaces: tuple[str, str], make_platform: Callable[..., dict[str, Any]]
) -> None:
    tenant, gw = spaces
    platform = make_platform(
        unique_name,
        tenant,
        gateway={"namespace": gw, "name": unique_name},
        edgeCertificate={"secretName": SECRET, "issuer": "SelfSigned", "renewBefore": "720h"},
    )
    domain = platform["spec"]["domain"]

    result = run(step.STEP, kube, platform, now=NOW)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", Reason.VALID), message
    assert "issued a self-signed certificate (SecretNotFound)" in message
    secret = kube.get("v1", "Secret", SECRET, gw)
    assert secret is not None and secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
    assert secret["metadata"]["ownerReferences"][0]["uid"] == platform["metadata"]["uid"]
    first = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert certs.dns_names_of(first) == [domain, f"*.{domain}"]
    recorded = result.recorded["edgeCertificate"]
    assert recorded["selfSigned"] is True
    assert recorded["notAfter"] == (NOW + timedelta(days=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    gauge = metrics.METRICS.edge_certificate_expiry.labels(unique_name, SECRET)._value.get()
    assert gauge == pytest.approx((NOW + timedelta(days=90)).timestamp())

    published = trust_map(kube, platform)
    assert published is not None
    assert_no_key(published)
    assert x509.load_pem_x509_certificates(published["data"]["ca-certificates.crt"].encode()) == [first]
    # Part of the tenant namespace's contents: labelled, not owned (deletionPolicy decides its fate).
    assert published["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
    assert "ownerReferences" not in published["metadata"]
    assert not any("PRIVATE KEY" in text for event in result.conditions for text in (event.message,))

    # Same clock: nothing to do, nothing written.
    before = writes(kube)
    assert sole_condition(run(step.STEP, kube, platform, now=NOW + timedelta(days=1)))[0] == "True"
    assert writes(kube) == before

    # Sixty-one days later the certificate is within renewBefore (30 days): re-issued.
    later = NOW + timedelta(days=61)
    result = run(step.STEP, kube, platform, now=later)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", Reason.VALID), message
    assert "issued a self-signed certificate (ExpiringSoon)" in message
    renewed = x509.load_pem_x509_certificate(base64.b64decode(kube.get("v1", "Secret", SECRET, gw)["data"]["tls.crt"]))
    assert renewed.not_valid_after_utc == later + timedelta(days=90)
    assert renewed.serial_number != first.serial_number
    assert x509.load_pem_x509_certificates(trust_map(kube, platform)["data"]["ca-certificates.crt"].encode()) == [
        renewed
    ]


def test_self_signed_never_overwrites_a_secret_that_is_not_ours(
    kube: Kube, unique_name: str, spaces: tuple[str, str]
) -> None:
    platform = platform_for(unique_name, spaces, issuer="SelfSigned")
    domain = platform["spec"]["domain"]
    expired = factory.make_leaf(
        [domain], now=NOW, not_before=NOW - timedelta(days=9), not_after=NOW - timedelta(days=1)
    )
    secret = factory.tls_secret(SECRET, spaces[1], chain=[expired.cert], key=expired.key)
    kube.create(secret)
    status, reason, message = sole_condition(run(step.STEP, kube, platform, now=NOW))
    assert (status, reason) == ("False", Common.CONFLICT)
    assert "expired" in message and "lacks our labels" in message
    assert kube.get("v1", "Secret", SECRET, spaces[1])["data"] == secret["data"]


def test_publicly_trusted_chain_publishes_nothing_and_prunes_the_old_bundle(
    kube: Kube, unique_name: str, spaces: tuple[str, str]
) -> None:
    platform = platform_for(unique_name, spaces)
    domain = platform["spec"]["domain"]
    leaf = leaf_for(domain)
    kube.create(factory.tls_secret(SECRET, spaces[1], chain=[leaf.cert], key=leaf.key))
    assert sole_condition(run(step.STEP, kube, platform, now=NOW))[1] == Reason.VALID
    assert trust_map(kube, platform) is not None

    # Replace it with a certificate from an intermediate whose root is not sent along.
    root = factory.make_ca("public-ish root", now=NOW)
    inter = factory.make_ca("public-ish intermediate", now=NOW, parent=root)
    issued = factory.make_leaf([domain], now=NOW, issuer=inter)
    replacement = factory.tls_secret(SECRET, spaces[1], chain=[issued.cert, inter.cert], key=issued.key)
    live = kube.get("v1", "Secret", SECRET, spaces[1])
    live["data"] = replacement["data"]
    kube.replace(live)
    result = run(step.STEP, kube, platform, now=NOW)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", Reason.VALID)
    assert "assumed to be publicly trusted" in message
    assert result.recorded["edgeCertificate"]["publiclyTrusted"] is True
    assert trust_map(kube, platform) is None


def test_dry_run_never_issues(kube: Kube, unique_name: str, spaces: tuple[str, str]) -> None:
    platform = platform_for(unique_name, spaces, issuer="SelfSigned")
    before = writes(kube)
    status, reason, message = sole_condition(run(step.STEP, kube, platform, now=NOW, dry_run=True))
    assert (status, reason) == ("False", "WouldIssue")
    assert "would issue" in message and Reason.SECRET_NOT_FOUND in message
    assert writes(kube) == before
    assert kube.get("v1", "Secret", SECRET, spaces[1]) is None


def test_issuance_is_conditional_on_the_secret_as_read(
    kube: Kube, unique_name: str, spaces: tuple[str, str], make_platform: Callable[..., dict[str, Any]]
) -> None:
    """A pass that read the Secret before someone else (re-)issued it (a replica that lost the
    Lease mid-pass, a pass repeated after a lost status write) never overwrites the newer
    certificate; a repeated pass finds the Secret it wrote and issues nothing."""
    tenant, gw = spaces
    platform = make_platform(
        unique_name,
        tenant,
        gateway={"namespace": gw, "name": unique_name},
        edgeCertificate={"secretName": SECRET, "issuer": "SelfSigned", "renewBefore": "720h"},
    )

    # Absent when read, created by someone else meanwhile: not overwritten.
    stale = step.gather(context(kube, platform, now=NOW))
    verdict = step.verdict.plan(TenantPlatform.from_body(platform), stale, now=NOW)
    assert verdict.issue is not None and stale.secret is None
    sole_condition(run(step.STEP, kube, platform, now=NOW))
    first = kube.get("v1", "Secret", SECRET, gw)
    assert first is not None
    assert step.STEP._issue(context(kube, platform, now=NOW), stale, verdict.issue) is None
    assert kube.get("v1", "Secret", SECRET, gw) == first

    # Repeated (the status write lost): nothing issued, nothing written.
    before = writes(kube)
    status, _, message = sole_condition(run(step.STEP, kube, platform, now=NOW))
    assert status == "True" and "issued" not in message
    assert writes(kube) == before

    # Due for renewal when read, renewed by someone else meanwhile: not overwritten.
    later = NOW + timedelta(days=61)
    stale = step.gather(context(kube, platform, now=later))
    verdict = step.verdict.plan(TenantPlatform.from_body(platform), stale, now=later)
    assert verdict.issue is not None and verdict.issue.because == Reason.EXPIRING_SOON
    sole_condition(run(step.STEP, kube, platform, now=later))
    renewed = kube.get("v1", "Secret", SECRET, gw)
    assert renewed is not None and renewed["data"] != first["data"]
    assert step.STEP._issue(context(kube, platform, now=later), stale, verdict.issue) is None
    assert kube.get("v1", "Secret", SECRET, gw) == renewed
