"""Logging: JSON lines through kopf's formatter, and no secret material in any log record.

The secrets are real: freshly generated private keys (PEM, PKCS#8 and traditional, and the base64
of a PEM as a Secret's data holds it), a JWT-shaped service account token, bearer headers and a
kubeconfig. Both pytest's caplog (records as handlers get them) and kopf's own stream handler
output (what the container prints) are searched for them.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tenant_platform import logs


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt() -> str:
    header = _b64url(json.dumps({"alg": "RS256", "kid": "k1"}).encode())
    payload = _b64url(
        json.dumps(
            {"iss": "https://kubernetes.default.svc", "sub": "system:serviceaccount:kamiwaza:installer"}
        ).encode()
    )
    return f"{header}.{payload}.{_b64url(b'signature-bytes-' * 8)}"


@pytest.fixture
def secrets() -> dict[str, str]:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pkcs8 = ec_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    traditional = rsa_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
    return {
        "pkcs8": pkcs8,
        "rsa": traditional,
        "b64pem": base64.b64encode(pkcs8.encode()).decode(),
        "jwt": _jwt(),
        "opaque": "s3cr3t-0paque-t0ken-value-1234567890",
    }


def _fragments(secrets: dict[str, str]) -> list[str]:
    """Substrings that must never appear: every key body line, the tokens, the base64 blob."""
    out = []
    for name in ("pkcs8", "rsa"):
        out += [line for line in secrets[name].splitlines() if line and not line.startswith("-----")]
    out += [secrets["b64pem"][:40], secrets["jwt"], secrets["jwt"].split(".")[1], secrets["opaque"]]
    return out


@pytest.fixture
def logging_state() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    make_record = logging.Logger.makeRecord
    kube_level = logging.getLogger("kubernetes").level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("kubernetes").setLevel(kube_level)
        while logging.Logger.makeRecord is not make_record and logs._installed:
            logs.uninstall_redaction()
        assert logging.Logger.makeRecord is make_record


def _log_everything(secrets: dict[str, str]) -> None:
    log = logging.getLogger("tenant_platform.test")
    kubeconfig = (
        "apiVersion: v1\nkind: Config\nusers:\n- name: installer\n  user:\n"
        f"    token: {secrets['opaque']}\n    client-key-data: {secrets['b64pem']}\n"
    )
    log.info("minted kubeconfig:\n%s", kubeconfig)
    log.warning("edge certificate key %s does not match", secrets["pkcs8"])
    log.info("request headers: %r", {"Authorization": f"Bearer {secrets['opaque']}"})
    log.info("token=%s expires in 3600s", secrets["opaque"])
    log.info("secret body %s", {"data": {"tls.key": secrets["b64pem"]}, "token": secrets["jwt"]})
    log.error("rsa key in message: " + secrets["rsa"])  # already formatted, no args
    log.info("with extra", extra={"response_body": f'{{"status": {{"token": "{secrets["jwt"]}"}}}}'})
    # As kopf's per-object loggers do: the object reference travels as k8s_ref.
    ref = {"apiVersion": "tenancy.dev/v1alpha1", "kind": "TenantPlatform", "name": "kamiwaza", "namespace": None}
    logging.LoggerAdapter(log, {"k8s_ref": ref, "k8s_skip": True}).info("adapter %s", secrets["jwt"])
    try:
        raise RuntimeError(f"API said: {secrets['rsa']} and bearer {secrets['opaque']}")
    except RuntimeError:
        log.exception("step crashed")
    log.info("stack", stack_info=True, extra={"note": secrets["pkcs8"]})


def test_caplog_records_hold_no_secrets(
    logging_state: None, secrets: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    logs.configure_logging("json")
    with caplog.at_level(logging.INFO):
        _log_everything(secrets)
    captured = caplog.text + "".join(
        str(getattr(r, "response_body", "")) + str(getattr(r, "note", "")) + (r.exc_text or "") for r in caplog.records
    )
    assert len(caplog.records) == 10
    for fragment in _fragments(secrets):
        assert fragment not in captured
    assert "[REDACTED PRIVATE KEY]" in captured
    assert "[REDACTED BASE64 PEM]" in captured
    assert "[REDACTED JWT]" in captured
    assert "Bearer [REDACTED]" in captured
    assert "token: [REDACTED]" in captured
    # What is not secret survives.
    assert "minted kubeconfig" in captured
    assert "expires in 3600s" in captured
    assert "RuntimeError: API said:" in captured


def test_json_output_is_one_object_per_line_without_secrets(
    logging_state: None, secrets: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure_logging("json")  # kopf's handler binds to the (captured) stderr now
    _log_everything(secrets)
    err = capsys.readouterr().err
    for fragment in _fragments(secrets):
        assert fragment not in err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert len(lines) == 10
    for line in lines:
        assert {"message", "timestamp", "severity", "level", "logger"} <= set(line)
    first = lines[0]
    assert first["logger"] == "tenant_platform.test"
    assert first["severity"] == "info"
    adapter = next(line for line in lines if line["message"].startswith("adapter"))
    assert adapter["object"] == {"apiVersion": "tenancy.dev/v1alpha1", "kind": "TenantPlatform", "name": "kamiwaza"}
    assert "k8s_skip" not in adapter
    crash = next(line for line in lines if line["message"] == "step crashed")
    assert "RuntimeError" in crash["exc_info"]
    assert "[REDACTED PRIVATE KEY]" in crash["exc_info"]


def test_plain_output(logging_state: None, secrets: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure_logging("plain")
    logging.getLogger("tenant_platform.test").warning("key %s", secrets["rsa"])
    err = capsys.readouterr().err
    assert "[WARNING ] key [REDACTED PRIVATE KEY]" in err
    assert secrets["rsa"].splitlines()[1] not in err


def test_unknown_format_is_an_error(logging_state: None) -> None:
    with pytest.raises(ValueError, match="TENANT_PLATFORM_LOG_FORMAT must be one of plain, json"):
        logs.configure_logging("xml")


def test_install_is_idempotent(logging_state: None) -> None:
    logs.install_redaction()
    wrapped = logging.Logger.makeRecord
    logs.install_redaction()
    assert logging.Logger.makeRecord is wrapped


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("tokenTTL: 24h", "tokenTTL: 24h", id="token ttl is not a token"),
        pytest.param("kubeconfigSecret: {enabled: true}", "kubeconfigSecret: {enabled: true}", id="field name"),
        pytest.param(
            "Forbidden to create serviceaccounts/token", "Forbidden to create serviceaccounts/token", id="rbac"
        ),
        pytest.param("password=hunter2 user=bob", "password=[REDACTED] user=bob", id="password"),
        pytest.param('{"bearerToken": "abc.def"}', '{"bearerToken": "[REDACTED]"}', id="json field"),
        pytest.param("'id-token': 'xyz'", "'id-token': '[REDACTED]'", id="python repr"),
        pytest.param("aws_secret_access_key = AKIAxyz", "aws_secret_access_key = [REDACTED]", id="s3"),
        pytest.param("authorization: bearer abc123==", "authorization: bearer [REDACTED]", id="bearer"),
        pytest.param(
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n(truncated",
            "[REDACTED PRIVATE KEY]",
            id="truncated pem",
        ),
        pytest.param(
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            id="certificates are public",
        ),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert logs.redact(text) == expected
