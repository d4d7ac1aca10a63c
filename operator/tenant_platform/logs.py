"""Logging setup for every entry point: plain or JSON lines, and secret redaction at the source.

``configure_logging(fmt)`` hands the format to kopf (``kopf.configure``), whose root handler then
formats kopf's records and ours alike: ``json`` gives one JSON object per line (``timestamp``,
``severity``, ``level``, ``logger``, ``message`` and, for kopf's per-object records, ``object``;
see ``JsonFormatter``); ``plain`` gives kopf's timestamped text format.

Redaction does not depend on any handler: ``install_redaction()`` wraps
``logging.Logger.makeRecord``, so every record is scrubbed when it is created, before filters,
handlers, pytest's caplog or kopf's Kubernetes-event poster see it. Scrubbed: PEM private key blocks (also
base64-encoded PEM, as in a Secret's ``data``), JSON Web Tokens (service account tokens),
``Bearer`` credentials, and the values of ``token``/``password``/``secret key`` style fields in
YAML, JSON, Python reprs and ``key=value`` text. The formatted message, its arguments, extra
string attributes, exception text and stack text are all covered.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import kopf

FORMATS: Final = ("plain", "json")
REDACTED: Final = "[REDACTED]"

_KOPF_FORMATS: Final = {"plain": kopf.LogFormat.FULL, "json": kopf.LogFormat.JSON}

# Order matters: whole blocks first, so a key inside a PEM block is not half-redacted by the
# field rule.
_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # PEM private keys of any kind (RSA, EC, PKCS#8, ENCRYPTED, OPENSSH); also a block cut off
    # before its END line (truncated messages).
    (
        re.compile(
            r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        "[REDACTED PRIVATE KEY]",
    ),
    # Base64 of "-----BEGIN" (Secret data, kubeconfig *-data fields): any base64 PEM blob.
    (re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]*(?:\\n[A-Za-z0-9+/=]+)*"), "[REDACTED BASE64 PEM]"),
    # JSON Web Tokens: header and payload are base64url JSON objects, so they start with "eyJ".
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), "[REDACTED JWT]"),
    # HTTP bearer credentials.
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]+=*"), rf"\g<1>{REDACTED}"),
    # key: value / "key": "value" / 'key': 'value' / key=value where the key ends in token,
    # password, secret(-access)-key or client-secret (token, id-token, bearerToken, aws_secret_access_key...).
    (
        re.compile(
            r"""(?ix)
            (\b[\w.-]*?(?:token|password|passwd|secret[_-]?access[_-]?key|secret[_-]?key|client[_-]?secret)
             ["']?\s*[:=]\s*["']?)
            (?!\[REDACTED)
            ([^\s"',}\]]+)
            """
        ),
        rf"\g<1>{REDACTED}",
    ),
)

# LogRecord attributes set by logging itself: never secrets, not worth scanning.
_STANDARD_ATTRS: Final = frozenset(
    logging.LogRecord("", logging.INFO, "", 0, "", None, None).__dict__.keys() | {"message", "asctime"}
)

_lock = threading.Lock()
_installed: list[Callable[..., logging.LogRecord]] = []


def redact(text: str) -> str:
    """Return ``text`` with every secret pattern replaced by a ``[REDACTED ...]`` marker."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redact_value(v) for v in value)
    return value


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """Scrub one record in place (message, args, extras, exception and stack text) and return it."""
    if isinstance(record.msg, dict):
        # python-json-logger merges a dict message into the JSON object: scrub its values.
        record.msg = _redact_value(record.msg)
    else:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: logging reports it later; keep the parts
            message = f"{record.msg!s} {record.args!r}"
        record.msg = redact(message)
        record.args = None
    for key, value in list(record.__dict__.items()):
        if key not in _STANDARD_ATTRS and isinstance(value, str | dict | list | tuple):
            record.__dict__[key] = _redact_value(value)
    if record.exc_info and record.exc_info[0] is not None:
        # Formatters prefer exc_text when exc_info is gone, so the traceback is printed once,
        # already scrubbed (exception messages often carry API response bodies).
        record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        record.exc_info = None
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


def install_redaction() -> None:
    """Scrub every record any logger makes from now on. Idempotent.

    NB: the LogRecord factory alone is not enough: ``Logger.makeRecord`` copies ``extra`` into
    the record after the factory returns. So ``Logger.makeRecord`` itself is wrapped; every
    ``Logger`` (and ``LoggerAdapter``) call goes through it.
    """
    with _lock:
        current = logging.Logger.makeRecord
        if getattr(current, "_tenant_platform_redacting", False):
            return

        def make_record(self: logging.Logger, *args: Any, **kwargs: Any) -> logging.LogRecord:
            return redact_record(current(self, *args, **kwargs))

        make_record._tenant_platform_redacting = True  # type: ignore[attr-defined]
        _installed.append(current)
        logging.Logger.makeRecord = make_record  # type: ignore[method-assign]


def uninstall_redaction() -> None:
    """Undo ``install_redaction`` (tests)."""
    with _lock:
        if _installed:
            logging.Logger.makeRecord = _installed.pop()  # type: ignore[method-assign]


class JsonFormatter(logging.Formatter):
    """One JSON object per record, the same shape for kopf's records and ours.

    Keys: ``timestamp`` (RFC 3339, UTC), ``severity`` (debug/info/warn/error/fatal, as kopf's JSON
    format), ``level``, ``logger``, ``message``, ``object`` (the Kubernetes object a kopf
    per-object record is about), ``exc_info``/``stack_info`` when present, and any ``extra``.
    """

    _KOPF_INTERNAL: Final = frozenset({"k8s_ref", "k8s_skip", "settings"})

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "severity": _severity(record.levelno),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        ref = getattr(record, "k8s_ref", None)
        if ref:
            out["object"] = {k: v for k, v in ref.items() if v is not None}
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and key not in self._KOPF_INTERNAL and key not in out:
                out[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            out["exc_info"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            out["exc_info"] = record.exc_text
        if record.stack_info:
            out["stack_info"] = record.stack_info
        return json.dumps(out, default=str, ensure_ascii=False)


def _severity(levelno: int) -> str:
    if levelno <= logging.DEBUG:
        return "debug"
    if levelno <= logging.INFO:
        return "info"
    if levelno <= logging.WARNING:
        return "warn"
    if levelno <= logging.ERROR:
        return "error"
    return "fatal"


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(fmt: str = "plain", *, level: str = "info", verbose: bool = False, debug: bool = False) -> None:
    """Log to stderr in ``fmt`` (``plain`` or ``json``) through kopf's handler; install redaction.

    ``kopf.configure`` sets the root handler and levels as ``kopf run`` would (with its JSON log
    format for ``json``); for ``json`` its handler then gets ``JsonFormatter``, which adds the
    logger name and level kopf's format leaves out. Raises ValueError for any other format,
    naming TENANT_PLATFORM_LOG_FORMAT, so a typo in the Deployment fails at start instead of
    silently logging plain text.
    """
    if fmt not in _KOPF_FORMATS:
        raise ValueError(f"TENANT_PLATFORM_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {fmt!r}")
    install_redaction()
    root = logging.getLogger()
    before = {id(handler) for handler in root.handlers}
    kopf.configure(debug=debug, verbose=verbose, log_format=_KOPF_FORMATS[fmt], log_refkey="object")
    if fmt == "json":
        for handler in root.handlers:
            if id(handler) not in before:
                handler.setFormatter(JsonFormatter())
    # The level asked for (``TENANT_PLATFORM_LOG_LEVEL``, ``--log-level``): kopf's own flags only
    # choose between INFO and DEBUG, so the root level is set after it.
    if level != "info" or not (verbose or debug):
        root.setLevel(_LEVELS[level])
    # The kubernetes client logs request and response bodies (Secrets included) at DEBUG.
    # Records are scrubbed anyway; keep its DEBUG output off unless asked for.
    logging.getLogger("kubernetes").setLevel(logging.DEBUG if debug else max(logging.INFO, _LEVELS[level]))
