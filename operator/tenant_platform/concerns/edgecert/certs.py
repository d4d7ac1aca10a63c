"""PURE edge-certificate analysis, with ``cryptography``.

``analyze_secret(secret, domain=..., now=..., renew_before=...)`` takes the Secret as the API
returned it (or None) and returns a ``CertReport``: a reason (``reasons.EdgeCertificate``), a
message a person can act on, the facts to record, and the public certificates to publish for
clients when the certificate is not publicly trusted. Checks, in the order a reason is chosen
(two chains of named checks, core/checks.py: ``READABLE_CHECKS``, whose first finding is the
report, then ``CERT_CHECKS``, whose findings are all listed):

    SecretNotFound, WrongSecretType, Malformed, KeyMismatch, ChainInvalid, DomainNotCovered,
    NotYetValid, Expired, ExpiringSoon, Valid

Domain coverage follows the TLS rules for DNS names in subjectAltName (RFC 6125 section 6.4):
case-insensitive, the common name is ignored, a wildcard is a whole leftmost label ``*`` that
matches exactly one label, never a partial label (``w*.example.com``), never the bare parent, and
never directly under a single-label name (``*.com``).

Trust (what goes into the trust ConfigMap): a self-signed certificate publishes itself; otherwise
the Secret's ``ca.crt`` when present; otherwise the top of the ``tls.crt`` chain when it is a
self-issued CA certificate (a private root sent along). A chain without its root is assumed to
lead to a publicly trusted root, and nothing is published. Only certificates ever come out of this
module's trust bundle: each is re-serialised from its parsed form, so no other PEM block (a key)
can ride along.

The self-signed policy (names, lifetime) is here too; making the certificate (a fresh key and
serial) is not deterministic and lives in tenant_platform/issuance.py. The clock is passed in.
Private keys never appear in a report, message or log. The step's decision from this analysis is
concerns/edgecert/verdict.py.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.api.tls import CA_KEY, CERT_KEY, KEY_KEY, TLS_TYPE
from tenant_platform.core.checks import Chain, Check

# Reasons after which a SelfSigned issuer (re)issues the certificate.
REISSUE_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.SECRET_NOT_FOUND,
        Reason.MALFORMED,
        Reason.KEY_MISMATCH,
        Reason.CHAIN_INVALID,
        Reason.DOMAIN_NOT_COVERED,
        Reason.NOT_YET_VALID,
        Reason.EXPIRED,
        Reason.EXPIRING_SOON,
    }
)

SELF_SIGNED_VALIDITY = dt.timedelta(days=90)


def normalize(name: str) -> str:
    return name.strip().rstrip(".").lower()


def _valid_wildcard(pattern: str) -> bool:
    labels = pattern.split(".")
    if labels[0] != "*":
        return False
    rest = labels[1:]
    # At least two labels under the wildcard (no "*.com"), and no other "*" anywhere.
    return len(rest) >= 2 and all(label and "*" not in label for label in rest)


def name_matches(pattern: str, domain: str) -> bool:
    """Whether one subjectAltName DNS entry covers ``domain`` under TLS rules."""
    pattern, domain = normalize(pattern), normalize(domain)
    if not pattern or not domain:
        return False
    if "*" not in pattern:
        return pattern == domain
    if not _valid_wildcard(pattern):
        return False
    head, _, parent = domain.partition(".")
    return bool(head) and "*" not in head and parent == pattern.split(".", 1)[1]


def covers(dns_names: list[str], domain: str) -> bool:
    return any(name_matches(name, domain) for name in dns_names)


@dataclass(frozen=True)
class CertFacts:
    """What we record about the leaf certificate (status.recorded.edgeCertificate)."""

    subject: str
    issuer: str
    dns_names: list[str]
    not_before: dt.datetime
    not_after: dt.datetime
    self_signed: bool
    chain_length: int

    def recorded(self, *, publicly_trusted: bool | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "selfSigned": self.self_signed,
            "notBefore": _fmt(self.not_before),
            "notAfter": _fmt(self.not_after),
            "dnsNames": list(self.dns_names),
            "subject": self.subject,
            "issuer": self.issuer,
        }
        if publicly_trusted is not None:
            out["publiclyTrusted"] = publicly_trusted
        return out


@dataclass
class CertReport:
    reason: Reason
    message: str
    facts: CertFacts | None = None
    trust_pem: str = ""
    """Public certificates to publish (empty: publicly trusted, or nothing valid to publish)."""
    trust_source: str = ""
    """Where ``trust_pem`` came from, for messages: "self-signed certificate", "ca.crt", ..."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reason == Reason.VALID

    @property
    def publicly_trusted(self) -> bool:
        return self.facts is not None and not self.trust_pem

    def seconds_to_expiry(self, now: dt.datetime) -> float | None:
        return None if self.facts is None else (self.facts.not_after - now).total_seconds()


def _fmt(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _decode(secret: dict[str, Any], key: str) -> bytes | None:
    """A Secret value from ``data`` (base64) or ``stringData``; None when absent."""
    data = secret.get("data") or {}
    if key in data and data[key] is not None:
        try:
            return base64.b64decode(str(data[key]), validate=True)
        except (binascii.Error, ValueError):
            return b"\x00invalid-base64"
    string_data = secret.get("stringData") or {}
    if key in string_data:
        return str(string_data[key]).encode()
    return None


def load_chain(pem: bytes) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle, in order. Raises ValueError when there is none."""
    return x509.load_pem_x509_certificates(pem)


def dns_names_of(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in san.get_values_for_type(x509.DNSName)]


def is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """Whether ``issuer``'s key signed ``cert`` (and the names chain)."""
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def is_self_signed(cert: x509.Certificate) -> bool:
    """Issuer equals subject and the certificate's own key verifies its signature."""
    return cert.issuer == cert.subject and issued_by(cert, cert)


def facts_of(chain: list[x509.Certificate]) -> CertFacts:
    leaf = chain[0]
    return CertFacts(
        subject=leaf.subject.rfc4514_string(),
        issuer=leaf.issuer.rfc4514_string(),
        dns_names=dns_names_of(leaf),
        not_before=leaf.not_valid_before_utc,
        not_after=leaf.not_valid_after_utc,
        self_signed=is_self_signed(leaf),
        chain_length=len(chain),
    )


def key_matches(cert: x509.Certificate, key_pem: bytes) -> bool | None:
    """True/False when the key is readable; None when it cannot be parsed."""
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return None
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return bool(key.public_key().public_bytes(*spki) == cert.public_key().public_bytes(*spki))


def pem_bundle(certs: list[x509.Certificate]) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def trust_for(chain: list[x509.Certificate], ca_pem: bytes | None) -> tuple[str, str, str]:
    """(PEM to publish, its source, a note) for clients that must trust this certificate.

    Empty PEM means "assumed publicly trusted". The note explains the decision.
    """
    leaf = chain[0]
    if is_self_signed(leaf):
        return pem_bundle([leaf]), "the self-signed certificate", ""
    if ca_pem:
        try:
            cas = load_chain(ca_pem)
        except ValueError:
            cas = []
        if cas:
            return pem_bundle(cas), f"the Secret's {CA_KEY}", ""
    top = chain[-1]
    if len(chain) > 1 and is_ca(top) and top.issuer == top.subject:
        return pem_bundle([top]), f"the root CA at the end of {CERT_KEY}", ""
    return (
        "",
        "",
        (
            f"{CERT_KEY} does not carry its root and the Secret has no {CA_KEY}, so the issuer is assumed to be "
            "publicly trusted and no trust bundle is published"
        ),
    )


# -- the analysis: two chains of named checks ---------------------------------------------------------

Problem = tuple[Reason, str]


@dataclass
class SecretUnderCheck:
    """The subject of ``READABLE_CHECKS`` and ``CERT_CHECKS``: a Secret (None: absent), parsed on
    demand. A check needing what an earlier readability check found missing is never reached
    (``READABLE_CHECKS`` stops at its first finding)."""

    secret: dict[str, Any] | None
    domain: str
    now: dt.datetime
    renew_before: dt.timedelta
    label: str
    """How messages name the Secret ("Secret istio-system/kamiwaza-edge-tls", or "The Secret")."""

    @functools.cached_property
    def cert_pem(self) -> bytes | None:
        return None if self.secret is None else _decode(self.secret, CERT_KEY)

    @functools.cached_property
    def key_pem(self) -> bytes | None:
        return None if self.secret is None else _decode(self.secret, KEY_KEY)

    @functools.cached_property
    def chain(self) -> list[x509.Certificate] | None:
        """The certificates in ``tls.crt``; None when it holds no readable PEM certificate."""
        try:
            return load_chain(self.cert_pem or b"")
        except ValueError:
            return None

    @property
    def certificates(self) -> list[x509.Certificate]:
        """``chain``, once ``READABLE_CHECKS`` passed (it is readable then)."""
        assert self.chain is not None
        return self.chain

    @functools.cached_property
    def facts(self) -> CertFacts:
        return facts_of(self.certificates)

    @functools.cached_property
    def key_match(self) -> bool | None:
        """Whether ``tls.key`` is the leaf's key; None when it is not a readable private key."""
        return key_matches(self.certificates[0], self.key_pem or b"")


def secret_missing(s: SecretUnderCheck) -> CertReport | None:
    if s.secret is not None:
        return None
    return CertReport(Reason.SECRET_NOT_FOUND, f"{s.label} does not exist.")


def wrong_type(s: SecretUnderCheck) -> CertReport | None:
    secret_type = (s.secret or {}).get("type") or "Opaque"
    if secret_type == TLS_TYPE:
        return None
    return CertReport(
        Reason.WRONG_SECRET_TYPE,
        f"{s.label} has type {secret_type}; the gateway needs type {TLS_TYPE} with keys {CERT_KEY} and {KEY_KEY}.",
    )


def keys_missing(s: SecretUnderCheck) -> CertReport | None:
    missing = [k for k, v in ((CERT_KEY, s.cert_pem), (KEY_KEY, s.key_pem)) if not v]
    if not missing:
        return None
    return CertReport(Reason.MALFORMED, f"{s.label} has no {' or '.join(missing)}.")


def certificate_unreadable(s: SecretUnderCheck) -> CertReport | None:
    if s.chain is not None:
        return None
    return CertReport(Reason.MALFORMED, f"{s.label}: {CERT_KEY} holds no readable PEM certificate.")


def key_unreadable(s: SecretUnderCheck) -> CertReport | None:
    if s.key_match is not None:
        return None
    return CertReport(Reason.MALFORMED, f"{s.label}: {KEY_KEY} holds no readable unencrypted PEM private key.", s.facts)


READABLE_CHECKS = Chain[SecretUnderCheck, CertReport](
    Check("Secret exists", secret_missing),
    Check("Secret type is kubernetes.io/tls", wrong_type),
    Check("tls.crt and tls.key present", keys_missing),
    Check("tls.crt readable", certificate_unreadable),
    Check("tls.key readable", key_unreadable),
)
"""The first finding is the report: nothing more can be said about the certificate."""


def key_mismatch(s: SecretUnderCheck) -> Problem | None:
    if s.key_match:
        return None
    return (Reason.KEY_MISMATCH, f"{KEY_KEY} is not the private key of the certificate in {CERT_KEY}")


def chain_out_of_order(s: SecretUnderCheck) -> Problem | None:
    chain = s.certificates
    for index in range(len(chain) - 1):
        if not issued_by(chain[index], chain[index + 1]):
            return (
                Reason.CHAIN_INVALID,
                f"certificate {index + 2} in {CERT_KEY} ({chain[index + 1].subject.rfc4514_string()}) did not "
                f"issue certificate {index + 1} ({chain[index].subject.rfc4514_string()}); "
                "order the chain leaf first, then each issuer",
            )
    return None


def domain_not_covered(s: SecretUnderCheck) -> Problem | None:
    if covers(s.facts.dns_names, s.domain):
        return None
    names = ", ".join(s.facts.dns_names) or "none"
    return (
        Reason.DOMAIN_NOT_COVERED,
        f"the certificate's DNS names ({names}) do not cover {s.domain} (a wildcard covers exactly one "
        "label; the subject common name is not used by TLS clients)",
    )


def not_yet_valid(s: SecretUnderCheck) -> Problem | None:
    if s.now >= s.facts.not_before:
        return None
    return (Reason.NOT_YET_VALID, f"the certificate is not valid before {_fmt(s.facts.not_before)}")


def expired(s: SecretUnderCheck) -> Problem | None:
    if s.now < s.facts.not_before or s.now < s.facts.not_after:
        return None
    return (Reason.EXPIRED, f"the certificate expired at {_fmt(s.facts.not_after)}")


def expiring_soon(s: SecretUnderCheck) -> Problem | None:
    facts = s.facts
    if s.now < facts.not_before or s.now >= facts.not_after or facts.not_after - s.now > s.renew_before:
        return None
    return (
        Reason.EXPIRING_SOON,
        f"the certificate expires at {_fmt(facts.not_after)}, within renewBefore ({_hours(s.renew_before)}); renew it",
    )


CERT_CHECKS = Chain[SecretUnderCheck, Problem](
    Check("key matches the certificate", key_mismatch),
    Check("chain in order", chain_out_of_order),
    Check("DNS names cover the domain", domain_not_covered),
    Check("valid already", not_yet_valid),
    Check("not expired", expired),
    Check("not within renewBefore", expiring_soon),
)
"""Every finding is a problem of a readable certificate, in this order; the first names the reason.
(At most one of the last three finds: a certificate is not yet valid, expired, or due for renewal.)"""


def analyze_secret(
    secret: dict[str, Any] | None,
    *,
    domain: str,
    now: dt.datetime,
    renew_before: dt.timedelta,
    where: str = "",
) -> CertReport:
    """Check a ``kubernetes.io/tls`` Secret for ``domain`` at time ``now``.

    ``where`` names the Secret in messages (e.g. ``istio-system/kamiwaza-edge-tls``).
    """
    label = f"Secret {where}" if where else "The Secret"
    subject = SecretUnderCheck(secret, domain=domain, now=now, renew_before=renew_before, label=label)
    unreadable = READABLE_CHECKS.first(subject)
    if unreadable is not None:
        return unreadable.value
    assert secret is not None
    facts = subject.facts
    trust_pem, trust_source, trust_note = trust_for(subject.certificates, _decode(secret, CA_KEY))
    report = CertReport(Reason.VALID, "", facts, trust_pem, trust_source)
    problems = [found.value for found in CERT_CHECKS.every(subject)]
    report.problems = [text for _, text in problems]
    trust = (
        f" Clients trust it through {trust_source}."
        if trust_source
        else (f" Note: {trust_note}." if trust_note else "")
    )
    if problems:
        report.reason = problems[0][0]
        report.message = f"{label}: " + "; ".join(report.problems) + "." + trust
        return report
    kind = "self-signed" if facts.self_signed else f"issued by {facts.issuer}"
    report.message = (
        f"{label} covers {domain} ({kind}), its key matches, and it is valid until {_fmt(facts.not_after)}." + trust
    )
    return report


def _hours(delta: dt.timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:g}h"


def self_signed_validity(renew_before: dt.timedelta) -> dt.timedelta:
    """Lifetime of a certificate we issue: 90 days, or three times renewBefore when that is longer
    (otherwise a fresh certificate would already be inside its renewal window)."""
    return max(SELF_SIGNED_VALIDITY, renew_before * 3)


def self_signed_dns_names(domain: str) -> list[str]:
    """The domain, plus ``*.domain`` when that is a legal wildcard (two or more labels)."""
    domain = normalize(domain)
    names = [domain]
    if domain.count(".") >= 1:
        names.append(f"*.{domain}")
    return names
