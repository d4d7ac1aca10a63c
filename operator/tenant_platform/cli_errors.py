"""What `tenant-platform` says when something goes wrong: one line on stderr and an exit code.

Exit codes (docs/cli.md), the same for every subcommand:

    0  OK
    1  a failed check: `check` found a FAIL row, `fit` found no node that can take the pod,
       `dev --once` did not become Ready in time, `run` lost its leader Lease
    2  bad input or usage: a file that is missing, not YAML, holds no TenantPlatform or an invalid
       one (the API server would refuse it), an unknown --context, a TenantPlatform NAME that does
       not exist or has recorded nothing yet
    3  cannot reach or authenticate to the cluster: no kubeconfig, an unreadable one, the API
       server unreachable, credentials refused (401), or permission denied (403)
    4  internal error: a bug; TENANT_PLATFORM_DEBUG=1 prints the traceback

``guard(command, func)`` turns the exceptions the commands raise into those lines and codes; no
traceback is printed unless TENANT_PLATFORM_DEBUG is set.
"""

from __future__ import annotations

import enum
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pydantic
import yaml

from tenant_platform.api import admission, constants
from tenant_platform.config import SettingsError
from tenant_platform.kube import errors


class Exit(enum.IntEnum):
    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    CLUSTER = 3
    INTERNAL = 4
    INTERRUPTED = 130


class CliError(Exception):
    """A user-facing error: ``message`` names the problem and the fix; ``code`` is the exit code."""

    def __init__(self, message: str, code: Exit = Exit.BAD_INPUT, details: Iterable[str] = ()):
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = list(details)


def debug() -> bool:
    return os.environ.get("TENANT_PLATFORM_DEBUG", "") not in ("", "0", "false")


def say(command: str, message: str) -> None:
    print(f"tenant-platform {command}: {message}", file=sys.stderr, flush=True)


def guard(command: str, func: Callable[[], int]) -> int:
    """Run one subcommand; map what it raises to one line on stderr and an exit code."""
    try:
        return int(func())
    except CliError as exc:
        say(command, exc.message)
        for line in exc.details:
            print(f"  {line}", file=sys.stderr)
        return int(exc.code)
    except SettingsError as exc:  # a wrong setting is bad input: name it, exit 2
        say(command, f"configuration error: {exc} (docs/install.md lists every setting)")
        return int(Exit.BAD_INPUT)
    except errors.KubeError as exc:
        message, code = describe_kube_error(exc)
        say(command, message)
        return int(code)
    except KeyboardInterrupt:
        return int(Exit.INTERRUPTED)
    except BrokenPipeError:  # `render | head`: the reader left; not our failure
        sys.stderr.close()
        return int(Exit.OK)
    except Exception as exc:  # the last line of defence: no traceback for the user
        if debug():
            traceback.print_exc()
        say(
            command,
            f"internal error: {type(exc).__name__}: {exc}. This is a bug: please report it with the command "
            "you ran (TENANT_PLATFORM_DEBUG=1 prints the traceback).",
        )
        return int(Exit.INTERNAL)


# ---- the cluster ----------------------------------------------------------------------------

_CAUSES = (
    ("refused", "connection refused"),
    ("Name or service not known", "the host name does not resolve"),
    ("nodename nor servname", "the host name does not resolve"),
    ("Temporary failure in name resolution", "the host name does not resolve"),
    ("CERTIFICATE_VERIFY_FAILED", "its TLS certificate is not trusted by the kubeconfig's CA"),
    ("timed out", "the connection timed out"),
    ("Network is unreachable", "the network is unreachable"),
    ("No route to host", "no route to host"),
)


def describe_kube_error(exc: errors.KubeError, server: str = "") -> tuple[str, Exit]:
    """One line and an exit code for a failed API call."""
    where = f" at {server}" if server else ""
    if isinstance(exc, errors.Transient) and exc.status == 0:
        cause = next((why for needle, why in _CAUSES if needle in exc.message), "")
        cause = cause or _short(exc.message)
        return (
            f"cannot reach the Kubernetes API server{where}: {cause}. Check that the cluster is running and that "
            "--kubeconfig/--context (or $KUBECONFIG) point at it.",
            Exit.CLUSTER,
        )
    if exc.status == 401:
        return (
            f"the API server{where} refused the kubeconfig's credentials (401 Unauthorized): log in again or "
            "refresh the token, or pick another --context.",
            Exit.CLUSTER,
        )
    if isinstance(exc, errors.Forbidden):
        return (
            f"permission denied (403): {_short(exc.message)}. Use an identity allowed to do this (--context), or "
            "grant it the permission (docs/security.md lists what each command reads).",
            Exit.CLUSTER,
        )
    if isinstance(exc, errors.Invalid):
        return f"the API server refused the object: {_short(exc.message)}. Fix the field it names.", Exit.BAD_INPUT
    if isinstance(exc, errors.Transient):
        return (
            f"the API server{where} is not answering properly ({exc.status} {exc.reason}: {_short(exc.message)}); "
            "try again when it is healthy.",
            Exit.CLUSTER,
        )
    return f"API request failed: {exc.status} {exc.reason}: {_short(exc.message)}", Exit.INTERNAL


def _short(text: str, limit: int = 300) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def kubeconfig_paths(kubeconfig: str | None) -> list[Path]:
    if kubeconfig:
        return [Path(kubeconfig)]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def connect(kubeconfig: str | None, context: str | None) -> Any:
    """A Kube for --kubeconfig/--context that has answered one request (GET /version), or a
    CliError that says what is missing or unreachable."""
    from tenant_platform.kube.client import Kube  # noqa: PLC0415

    paths = kubeconfig_paths(kubeconfig)
    existing = [p for p in paths if p.is_file()]
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    if kubeconfig and not existing:
        raise CliError(f"--kubeconfig {kubeconfig}: no such file. Pass the path of a kubeconfig file.", Exit.CLUSTER)
    if not existing and not in_cluster:
        shown = ", ".join(str(p) for p in paths)
        raise CliError(
            f"no kubeconfig found ({shown}) and not running in a pod: pass --kubeconfig PATH or set KUBECONFIG "
            "(for a local cluster: tenant-platform dev --kubeconfig PATH writes one).",
            Exit.CLUSTER,
        )
    if existing and context:
        known = _contexts(existing)
        if known is not None and context not in known:
            raise CliError(
                f"--context {context}: no such context in {', '.join(map(str, existing))} "
                f"(it has: {', '.join(sorted(known)) or 'none'}).",
                Exit.BAD_INPUT,
            )
    try:
        kube = Kube.from_kubeconfig(str(existing[0]) if kubeconfig and existing else None, context=context)
    except Exception as exc:  # the client's config errors, without importing the client here
        where = ", ".join(map(str, existing)) or "the in-cluster service account"
        raise CliError(
            f"cannot load the cluster credentials from {where}: {_short(str(exc))}. Fix the kubeconfig or pass "
            "another --kubeconfig/--context.",
            Exit.CLUSTER,
        ) from None
    try:  # one cheap request first: an unreachable cluster is one line, not a table of API errors
        kube.server_version()
    except errors.KubeError as exc:
        message, code = describe_kube_error(exc, kube.server)
        raise CliError(message, code) from None
    return kube


def _contexts(paths: Iterable[Path]) -> set[str] | None:
    names: set[str] = set()
    for path in paths:
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            return None
        if not isinstance(doc, dict):
            return None
        names |= {str(c.get("name")) for c in doc.get("contexts") or [] if isinstance(c, dict)}
    return names


# ---- files ----------------------------------------------------------------------------------


def read_documents(path: str | Path) -> list[Any]:
    """Every YAML document in a file ('-': stdin), or a CliError naming the line that is wrong."""
    name = "stdin" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{name}: no such file. Pass the path of a TenantPlatform YAML file (-f FILE).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{name}: cannot read it: {exc}.") from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CliError(f"{name}: not valid YAML{where}: {problem}. Fix the YAML syntax there.") from None


def platforms_in(path: str | Path) -> list[dict[str, Any]]:
    """The TenantPlatform documents of a file, or a CliError saying what the file holds instead."""
    name = "stdin" if str(path) == "-" else str(path)
    docs = read_documents(path)
    found = [d for d in docs if isinstance(d, Mapping) and d.get("kind") == constants.KIND]
    if not found:
        kinds = sorted({str(d.get("kind")) for d in docs if isinstance(d, Mapping) and d.get("kind")})
        holds = f"it holds {', '.join(kinds)}" if kinds else "it holds no Kubernetes object"
        raise CliError(
            f"{name}: no {constants.KIND} in it ({holds}). Pass a file with apiVersion: {constants.API_VERSION} "
            f"and kind: {constants.KIND}."
        )
    for doc in found:
        if doc.get("apiVersion") != constants.API_VERSION:
            raise CliError(
                f"{name}: {constants.KIND} has apiVersion {doc.get('apiVersion')!r}; this version of the operator "
                f"serves {constants.API_VERSION}."
            )
    return [dict(d) for d in found]


def admit(body: Mapping[str, Any], source: str) -> Any:
    """Parse a TenantPlatform from a file as the API server would admit it (api/admission.py).

    Returns the parsed platform; raises CliError (exit 2) with one line per refused field.
    """
    from tenant_platform.api.models import TenantPlatform  # noqa: PLC0415

    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    name = (meta or {}).get("name")
    problems = admission.metadata_name_rules(name)
    label = f"{source}: {constants.KIND} {name or '(unnamed)'}"
    if problems:
        raise CliError(f"{label}: {problems[0]}. Fix metadata.name.", details=problems[1:])
    try:
        return TenantPlatform.from_body({**body, "metadata": {**(meta or {}), "uid": ""}}, admission_mode=True)
    except pydantic.ValidationError as exc:
        lines = field_errors(exc)
        more = f" (and {len(lines) - 1} more, below)" if len(lines) > 1 else ""
        message = f"{label}: {lines[0]}{more}. The API server would refuse it: fix the spec."
        raise CliError(message, details=lines[1:]) from None


def field_errors(exc: pydantic.ValidationError) -> list[str]:
    """One line per pydantic error, each starting with the field path (spec.a.b[0].c)."""
    lines: list[str] = []
    for err in exc.errors():
        path = "spec"
        for part in err.get("loc", ()):
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        message = re.sub(r"^Value error, ", "", str(err.get("msg", "")))
        if err.get("type") == "missing":
            message = "required"
        unknown = re.findall(r'unknown field "([^"]+)"', message)
        if unknown:
            lines += [f"{path}.{key}: unknown field (this CRD version has no such field)" for key in unknown]
            continue
        if message.startswith(path + " ") or (path == "spec" and message.startswith("spec.")):
            lines.append(message)
        else:
            lines.append(f"{path}: {message}")
    return lines
