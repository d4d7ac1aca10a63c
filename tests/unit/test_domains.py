"""api/domains.py: the domains no platform may claim. The same table is applied to the real API
server by tests/integration/test_crd_validation.py, so the CRD's CEL and this function agree."""

from __future__ import annotations

import pytest

from tenant_platform.api import domains

# (domain, kind or None when allowed)
TABLE: list[tuple[str, str | None]] = [
    ("kamiwaza.example.com", None),
    ("ai.acme.example", None),
    ("platform.corp.internal", None),  # .internal is for private use: only the metadata names are refused
    ("svc.example.com", None),
    ("kubernetes.example.com", None),
    ("a169.254.example.com", None),
    ("kubernetes", "cluster-internal"),
    ("metadata", "cluster-internal"),
    ("localhost", "cluster-internal"),
    ("cluster.local", "cluster-internal"),
    ("kubernetes.default.svc.cluster.local", "cluster-internal"),
    ("kamiwaza.kamiwaza.svc.cluster.local", "cluster-internal"),
    ("kubernetes.default", "cluster-internal"),
    ("kubernetes.default.svc", "cluster-internal"),
    ("web.tenant.svc", "cluster-internal"),
    ("10.96.0.1.in-addr.arpa", "cluster-internal"),
    ("app.localhost", "cluster-internal"),
    ("metadata.google.internal", "cloud-metadata"),
    ("metadata.goog", "cloud-metadata"),
    ("metadata.google.com", "cloud-metadata"),
    ("metadata.azure.com", "cloud-metadata"),
    ("instance-data.ec2.internal", "cloud-metadata"),
    ("instance-data.us-west-2.compute.internal", "cloud-metadata"),
    ("ip-10-0-0-1.ec2.internal", "cloud-metadata"),
    ("instance-data.example.com", "cloud-metadata"),
    ("169.254.169.254.nip.io", "cloud-metadata"),
    ("169-254-169-254.sslip.io", "cloud-metadata"),
    ("169.254.169.254", "cloud-metadata"),
    ("10.0.0.1", "ip-address"),
]


@pytest.mark.parametrize(("domain", "kind"), TABLE, ids=[d for d, _ in TABLE])
def test_reserved(domain: str, kind: str | None) -> None:
    found = domains.reserved(domain)
    assert (found[0] if found else None) == kind, found
    if found:
        assert domain in found[1]


def test_under_zone() -> None:
    assert domains.under_zone("a.corp.k8s", ["corp.k8s", "in-addr.arpa"]) == "corp.k8s"
    assert domains.under_zone("corp.k8s", ["corp.k8s."]) == "corp.k8s"
    assert domains.under_zone("acorp.k8s", ["corp.k8s"]) == ""
    assert domains.under_zone("kamiwaza.example.com", [".", ""]) == ""
