"""concerns/edgecert/certs.py's chains, check by check: each named check has its own table, and
each chain's order (the order of reasons) has one test."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from cryptography import x509

from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.concerns.edgecert import certs
from tenant_platform.testing import certs as factory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DOMAIN = "kamiwaza.example.com"
RENEW = dt.timedelta(hours=720)
DAY = dt.timedelta(days=1)


def secret_for(leaf: factory.Issued, *chain: x509.Certificate, **kwargs: Any) -> dict[str, Any]:
    return factory.tls_secret("edge", "istio-system", chain=[leaf.cert, *chain], key=leaf.key, **kwargs)


def subject(secret: dict[str, Any] | None) -> certs.SecretUnderCheck:
    return certs.SecretUnderCheck(secret, domain=DOMAIN, now=NOW, renew_before=RENEW, label="Secret istio-system/edge")


def good() -> dict[str, Any]:
    return secret_for(factory.make_leaf([DOMAIN], now=NOW))


def with_data(key: str, value: str | None) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        secret = good()
        if value is None:
            del secret["data"][key]
        else:
            secret["data"][key] = value
        return secret

    return make


def garbage(text: bytes) -> str:
    return base64.b64encode(text).decode()


def other_key() -> dict[str, Any]:
    leaf = factory.make_leaf([DOMAIN], now=NOW)
    return factory.tls_secret("edge", "istio-system", chain=[leaf.cert], key=factory.new_key())


def unordered() -> dict[str, Any]:
    root, other = factory.make_ca(now=NOW), factory.make_ca("unrelated CA", now=NOW)
    return secret_for(factory.make_leaf([DOMAIN], now=NOW, issuer=root), other.cert)


def ordered() -> dict[str, Any]:
    root = factory.make_ca(now=NOW)
    return secret_for(factory.make_leaf([DOMAIN], now=NOW, issuer=root), root.cert)


def leaf(names: list[str] | None = None, **times: dt.datetime) -> Callable[[], dict[str, Any]]:
    return lambda: secret_for(factory.make_leaf(names or [DOMAIN], now=NOW, **times))


# check -> rows of (id, the Secret (made lazily), the reason it finds or None)
READABLE: dict[str, list[tuple[str, Callable[[], dict[str, Any] | None], Reason | None]]] = {
    "Secret exists": [("absent", lambda: None, Reason.SECRET_NOT_FOUND), ("present", good, None)],
    "Secret type is kubernetes.io/tls": [
        ("tls", good, None),
        (
            "Opaque",
            lambda: secret_for(factory.make_leaf([DOMAIN], now=NOW), secret_type="Opaque"),
            Reason.WRONG_SECRET_TYPE,
        ),
        ("no type", lambda: {k: v for k, v in good().items() if k != "type"}, Reason.WRONG_SECRET_TYPE),
    ],
    "tls.crt and tls.key present": [
        ("both", good, None),
        ("no tls.key", with_data("tls.key", None), Reason.MALFORMED),
        ("no tls.crt", with_data("tls.crt", None), Reason.MALFORMED),
        ("empty tls.crt", with_data("tls.crt", ""), Reason.MALFORMED),
    ],
    "tls.crt readable": [
        ("a certificate", good, None),
        ("not a certificate", with_data("tls.crt", garbage(b"not a certificate")), Reason.MALFORMED),
        ("not base64", with_data("tls.crt", "!!!"), Reason.MALFORMED),
    ],
    "tls.key readable": [
        ("the key", good, None),
        ("another key: readable", other_key, None),
        ("not a key", with_data("tls.key", garbage(b"not a key")), Reason.MALFORMED),
        ("not base64", with_data("tls.key", "!!!"), Reason.MALFORMED),
    ],
}

CERT: dict[str, list[tuple[str, Callable[[], dict[str, Any] | None], Reason | None]]] = {
    "key matches the certificate": [("its key", good, None), ("another key", other_key, Reason.KEY_MISMATCH)],
    "chain in order": [
        ("a leaf alone", good, None),
        ("leaf then its issuer", ordered, None),
        ("leaf then an unrelated CA", unordered, Reason.CHAIN_INVALID),
    ],
    "DNS names cover the domain": [
        ("exact", good, None),
        ("wildcard", leaf(["*.example.com"]), None),
        ("other name", leaf(["other.example.com"]), Reason.DOMAIN_NOT_COVERED),
    ],
    "valid already": [
        ("valid", good, None),
        ("starts tomorrow", leaf(not_before=NOW + DAY), Reason.NOT_YET_VALID),
    ],
    "not expired": [
        ("valid", good, None),
        ("expired yesterday", leaf(not_before=NOW - 100 * DAY, not_after=NOW - DAY), Reason.EXPIRED),
        ("expires now", leaf(not_before=NOW - 100 * DAY, not_after=NOW), Reason.EXPIRED),
        ("not yet valid: the other check's", leaf(not_before=NOW + DAY), None),
    ],
    "not within renewBefore": [
        ("90 days left", good, None),
        ("10 days left", leaf(not_after=NOW + 10 * DAY), Reason.EXPIRING_SOON),
        ("exactly renewBefore left", leaf(not_after=NOW + RENEW), Reason.EXPIRING_SOON),
        ("expired: the other check's", leaf(not_before=NOW - 100 * DAY, not_after=NOW - DAY), None),
        ("not yet valid: the other check's", leaf(not_before=NOW + DAY, not_after=NOW + 10 * DAY), None),
    ],
}


def rows(table: dict[str, list[tuple[str, Callable[[], Any], Reason | None]]]) -> list[Any]:
    return [
        pytest.param(name, make, reason, id=f"{name}: {row_id}")
        for name, rs in table.items()
        for row_id, make, reason in rs
    ]


def test_every_check_has_a_table() -> None:
    assert set(READABLE) == set(certs.READABLE_CHECKS.names)
    assert set(CERT) == set(certs.CERT_CHECKS.names)


@pytest.mark.parametrize(("name", "make", "reason"), rows(READABLE))
def test_readable_check(name: str, make: Callable[[], dict[str, Any] | None], reason: Reason | None) -> None:
    chain = certs.READABLE_CHECKS
    index = chain.names.index(name)
    s = subject(make())
    # A check runs only once the checks before it passed (the chain stops at the first finding).
    assert all(c.run(s) is None for c in chain.checks[:index]), "a row must pass the earlier checks"
    report = chain.checks[index].run(s)
    assert (report.reason if report else None) == reason
    if report is not None:
        assert report.message.startswith("Secret istio-system/edge")
        assert "PRIVATE KEY" not in report.message


@pytest.mark.parametrize(("name", "make", "reason"), rows(CERT))
def test_cert_check(name: str, make: Callable[[], dict[str, Any] | None], reason: Reason | None) -> None:
    s = subject(make())
    assert certs.READABLE_CHECKS.first(s) is None, "a row must be a readable certificate"
    (check,) = [c for c in certs.CERT_CHECKS if c.name == name]
    problem = check.run(s)
    assert (problem[0] if problem else None) == reason, problem


def test_chain_order() -> None:
    assert certs.READABLE_CHECKS.names == (
        "Secret exists",
        "Secret type is kubernetes.io/tls",
        "tls.crt and tls.key present",
        "tls.crt readable",
        "tls.key readable",
    )
    assert certs.CERT_CHECKS.names == (
        "key matches the certificate",
        "chain in order",
        "DNS names cover the domain",
        "valid already",
        "not expired",
        "not within renewBefore",
    )
    # Every problem of a readable certificate is named, in chain order.
    everything = factory.tls_secret(
        "edge",
        "istio-system",
        chain=[factory.make_leaf(["other.example.com"], now=NOW, not_after=NOW - DAY).cert],
        key=factory.new_key(),
    )
    found = certs.CERT_CHECKS.every(subject(everything))
    assert [f.value[0] for f in found] == [Reason.KEY_MISMATCH, Reason.DOMAIN_NOT_COVERED, Reason.EXPIRED]
    report = certs.analyze_secret(everything, domain=DOMAIN, now=NOW, renew_before=RENEW)
    assert report.reason == Reason.KEY_MISMATCH
    assert report.problems == [text for _, text in (f.value for f in found)]
