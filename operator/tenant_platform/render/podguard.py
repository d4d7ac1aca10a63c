"""PURE rendering of the pod guard: two ValidatingAdmissionPolicies and their bindings.

- ``tenant-platform-<platform>-pod-guard``: Pod Security *baseline* on pods (create and every spec
  change, including ``pods/ephemeralcontainers``) with the one istio-init exception;
- ``tenant-platform-<platform>-exec-guard``: no exec or attach into a container named istio-init.

Both match the platform's namespaces by name (``kubernetes.io/metadata.name``, set by the API
server, so a tenant cannot relabel its way out), fail closed, and are bound to every requester.
The rules are stated in docs/pod-guard.md; the CEL lives in the templates
``templates/podguard-*.yaml.j2``. Constants used by the CEL are rendered into it as list literals
(no params object), so each policy is self-contained and reviewable as rendered.

Also rendered here: the pods staged enforcement submits as server-side dry runs (a copy of each
existing pod, ``resubmission``, and the ``canaries`` proving the policy live).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from tenant_platform.api.models import TenantPlatform
from tenant_platform.render import templating

Obj = dict[str, Any]

API_VERSION: Final = "admissionregistration.k8s.io/v1"
POLICY_KIND: Final = "ValidatingAdmissionPolicy"
BINDING_KIND: Final = "ValidatingAdmissionPolicyBinding"

# Pod Security Standards, baseline: capabilities any container may add (exact, case-sensitive).
BASELINE_CAPABILITIES: Final = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
# What istio-init may add on top, in the exact shape istiod injects.
ISTIO_INIT_CAPABILITIES: Final = ("NET_ADMIN", "NET_RAW")
ISTIO_INIT_NAME: Final = "istio-init"
ISTIO_INIT_FIRST_ARG: Final = "istio-iptables"
# Pod Security Standards, baseline: the safe sysctls (as of Kubernetes 1.29+).
SAFE_SYSCTLS: Final = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
# SELinux types a pod or container may request ("" = unset).
SELINUX_TYPES: Final = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
# Environment names that steer which code istio-init loads (besides every LD_* name).
LOADER_ENV_NAMES: Final = ("PATH", "GCONV_PATH", "XTABLES_LIBDIR", "IPTABLES_LIB_DIR", "IP6TABLES_LIB_DIR")
TOKEN_MOUNT_PATH: Final = "/var/run/secrets/kubernetes.io/serviceaccount"

Enforcement = Literal["Deny", "Warn"]
ACTIONS: Final[dict[str, list[str]]] = {"Deny": ["Deny", "Audit"], "Warn": ["Warn", "Audit"]}

_MAX_NAME: Final = 253
_PREFIX: Final = "tenant-platform-"

# A repository name as the image reference grammar has it (no tag, no digest), lowercase path
# components; the first component may be a registry host with a port.
_HOST_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"^(?:{_HOST}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")


@dataclass(frozen=True)
class GuardNames:
    pod_guard: str
    exec_guard: str


def guard_names(platform_name: str) -> GuardNames:
    """Policy (and binding) names; shortened with a stable hash when the platform name is long."""
    base = platform_name
    longest_suffix = len("-exec-guard")
    if len(_PREFIX) + len(base) + longest_suffix > _MAX_NAME:
        digest = hashlib.sha256(platform_name.encode()).hexdigest()[:8]
        keep = _MAX_NAME - len(_PREFIX) - longest_suffix - len(digest) - 1
        base = f"{platform_name[:keep].rstrip('-.')}-{digest}"
    return GuardNames(pod_guard=f"{_PREFIX}{base}-pod-guard", exec_guard=f"{_PREFIX}{base}-exec-guard")


def invalid_proxy_repositories(repositories: list[str]) -> list[str]:
    """Configured proxy repositories that cannot be used safely as prefixes.

    A repository must be a full name with at least one ``/`` and no tag or digest. Without a
    ``/``, ``R:`` would also match ``R:<port>/anything`` (a registry host with a port), letting a
    look-alike image in. Such entries are left out of the policy and reported.
    """
    return [r for r in repositories if "/" not in r or not _REPOSITORY.match(r)]


def valid_proxy_repositories(repositories: list[str]) -> list[str]:
    bad = set(invalid_proxy_repositories(repositories))
    seen: list[str] = []
    for repo in repositories:
        if repo not in bad and repo not in seen:
            seen.append(repo)
    return seen


def proxy_image_prefixes(repositories: list[str]) -> list[str]:
    """Each valid repository R gives ``R:`` (a tag follows) and ``R@`` (a digest follows)."""
    prefixes: list[str] = []
    for repo in valid_proxy_repositories(repositories):
        prefixes += [f"{repo}:", f"{repo}@"]
    return prefixes


def render_pod_guard_policy(platform: TenantPlatform, namespaces: Sequence[str] | None = None) -> Obj:
    """The pod guard ValidatingAdmissionPolicy, covering ``namespaces`` (default: the spec's)."""
    repositories = valid_proxy_repositories(platform.spec.pod_guard.proxy_image_repositories)
    return templating.render_object(
        "podguard-pod-policy.yaml.j2",
        name=guard_names(platform.name).pod_guard,
        namespaces=list(platform.spec.all_namespaces if namespaces is None else namespaces),
        baseline_capabilities=list(BASELINE_CAPABILITIES),
        istio_init_capabilities=list(ISTIO_INIT_CAPABILITIES),
        safe_sysctls=list(SAFE_SYSCTLS),
        selinux_types=list(SELINUX_TYPES),
        proxy_repositories=repositories,
        proxy_prefixes=proxy_image_prefixes(repositories),
        loader_env_names=list(LOADER_ENV_NAMES),
        token_mount_path=TOKEN_MOUNT_PATH,
    )


def render_exec_guard_policy(platform: TenantPlatform, namespaces: Sequence[str] | None = None) -> Obj:
    """The exec guard ValidatingAdmissionPolicy, covering ``namespaces`` (default: the spec's)."""
    return templating.render_object(
        "podguard-exec-policy.yaml.j2",
        name=guard_names(platform.name).exec_guard,
        namespaces=list(platform.spec.all_namespaces if namespaces is None else namespaces),
    )


def render_binding(policy_name: str, enforcement: Enforcement) -> Obj:
    """A binding of ``policy_name`` (same name) with the actions of ``enforcement``."""
    return templating.render_object(
        "podguard-binding.yaml.j2", name=policy_name, policy_name=policy_name, actions=ACTIONS[enforcement]
    )


TAKEOVER_CHECK_SUFFIX: Final = "-takeover-check"


def takeover_check_name(policy_name: str) -> str:
    """The temporary Warn-only binding of ``policy_name`` that proves it is in effect during a
    takeover (status/podguard_takeover.py); at most 253 characters."""
    name = f"{policy_name}{TAKEOVER_CHECK_SUFFIX}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(policy_name.encode()).hexdigest()[:16]
    return f"{_PREFIX}{digest}{TAKEOVER_CHECK_SUFFIX}"


def render_takeover_check(policy_name: str) -> Obj:
    """That binding: the policy's own binding shape with the actions [Warn] only. A Warn action's
    message comes back as a warning even when another policy denies the request."""
    binding = render_binding(policy_name, "Warn")
    binding["metadata"]["name"] = takeover_check_name(policy_name)
    binding["spec"]["validationActions"] = ["Warn"]
    return binding


def initial_enforcement(platform: TenantPlatform) -> Enforcement:
    """What the bindings start with: Deny for Deny; Warn for Warn and for Staged (until checked)."""
    return "Deny" if platform.spec.pod_guard.enforcement == "Deny" else "Warn"


def render(
    platform: TenantPlatform, *, enforcement: Enforcement | None = None, namespaces: Sequence[str] | None = None
) -> list[Obj]:
    """Both policies, then both bindings (stable order; policies before the bindings naming them).

    ``enforcement`` sets the bindings' actions; by default the mode's initial one. ``namespaces``:
    the namespaces the policies cover (default: the spec's; the step passes those the platform
    owns, so a platform never guards another's namespace).
    """
    actions = enforcement or initial_enforcement(platform)
    names = guard_names(platform.name)
    return [
        render_pod_guard_policy(platform, namespaces),
        render_exec_guard_policy(platform, namespaces),
        render_binding(names.pod_guard, actions),
        render_binding(names.exec_guard, actions),
    ]


# ---- dry-run pods for staged enforcement (reconcile/podguard.py submits them) -----------------------

CHECK_SUFFIX: Final = "-guard-check"
CANARY_PREFIX: Final = "tenant-platform-guard-canary-"


def check_name(pod_name: str) -> str:
    """A name for the dry-run copy, distinct from the original, at most 63 characters."""
    stem = pod_name[: 63 - len(CHECK_SUFFIX)].rstrip("-.")
    if f"{stem}{CHECK_SUFFIX}" == pod_name:  # a long name that already ends with the suffix
        stem = stem[:-1].rstrip("-.")
    return f"{stem}{CHECK_SUFFIX}"


def resubmission(pod: Obj) -> Obj:
    """The pod's spec as a new object for a dry-run create: server-set and node fields stripped."""
    meta = pod.get("metadata", {})
    new_meta: Obj = {"name": check_name(meta["name"]), "namespace": meta["namespace"]}
    for field_ in ("labels", "annotations"):
        if meta.get(field_):
            new_meta[field_] = copy.deepcopy(meta[field_])
    spec = copy.deepcopy(pod.get("spec") or {})
    # Set on bound pods, forbidden on create, or recomputed by admission from the class names.
    for field_ in ("nodeName", "ephemeralContainers", "priority"):
        spec.pop(field_, None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": new_meta, "spec": spec}


def canaries(namespace: str) -> list[Obj]:
    """Pods the guard warns about, to prove the policy is in effect in a namespace.

    The first (hostPID) is the obvious one. A namespace that enforces Pod Security rejects it
    before the guard runs, so the second is restricted-compliant and trips only the guard's
    AppArmor annotation rule (an empty value is neither runtime/default nor localhost/*).
    """
    image = "tenant-platform.invalid/canary:0"
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": CANARY_PREFIX, "namespace": namespace},
            "spec": {
                "hostPID": True,
                "automountServiceAccountToken": False,
                "containers": [{"name": "canary", "image": image}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": CANARY_PREFIX,
                "namespace": namespace,
                "annotations": {"container.apparmor.security.beta.kubernetes.io/canary": ""},
            },
            "spec": {
                "automountServiceAccountToken": False,
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "canary",
                        "image": image,
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    }
                ],
            },
        },
    ]


# ---- the injector canary: a pod injected the way the live injector would inject ---------------------

INJECTOR_CONFIGMAP: Final = "istio-sidecar-injector"
INJECTED_CANARY_PREFIX: Final = "tenant-platform-injected-canary-"
_DEFAULT_PROXY_IMAGE: Final = "proxyv2"
_KNOWN_VARIANTS: Final = ("distroless", "debug")


def injector_configmap_name(revision: str) -> str:
    """istiod's injection ConfigMap: ``istio-sidecar-injector``, or ``-<revision>`` for a revision."""
    return f"{INJECTOR_CONFIGMAP}-{revision}" if revision else INJECTOR_CONFIGMAP


@dataclass(frozen=True)
class Injector:
    """What the injector's ``values`` decide about istio-init (Istio's injection template)."""

    hub: str
    tag: str
    init_image: str
    """istio-init's image as the template computes it."""
    proxy_image: str
    cni: bool
    """pilot.cni.enabled: istio-validation instead of istio-init, no added capabilities."""
    privileged: bool
    """global.proxy.privileged: the template copies it into allowPrivilegeEscalation and privileged."""


def _image(global_: Obj, configured: str) -> str:
    """Istio's ``ProxyImage``/``ProxyInitImage``: a name with '/' as is, else hub/name:tag[-variant]."""
    if "/" in configured:
        return configured
    tag = str(global_.get("tag") if global_.get("tag") is not None else "")
    variant = str(global_.get("variant") or "")
    for known in _KNOWN_VARIANTS:
        if tag.endswith(f"-{known}"):
            tag = tag[: -len(known) - 1]
            break
    if variant and variant != "default":
        tag = f"{tag}-{variant}"
    return f"{global_.get('hub', '')}/{configured or _DEFAULT_PROXY_IMAGE}:{tag}"


def injector_from_values(values: Obj) -> Injector:
    """The injector's settings from the ConfigMap's ``values`` (JSON, already parsed)."""
    global_ = values.get("global") or {}
    proxy = global_.get("proxy") or {}
    proxy_init = global_.get("proxy_init") or {}
    cni = bool(((values.get("pilot") or {}).get("cni") or {}).get("enabled")) or bool(
        (values.get("istio_cni") or {}).get("enabled")
    )
    return Injector(
        hub=str(global_.get("hub") or ""),
        tag=str(global_.get("tag") if global_.get("tag") is not None else ""),
        init_image=_image(global_, str(proxy_init.get("image") or "")),
        proxy_image=_image(global_, str(proxy.get("image") or "")),
        cni=cni,
        privileged=bool(proxy.get("privileged")),
    )


def repository_of(image: str) -> str:
    """The repository part of an image reference (tag or digest cut)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def injected_canary(namespace: str, injector: Injector) -> Obj:
    """A pod as the injector's template would leave it (its istio-init or istio-validation, and
    istio-proxy), opted out of injection so a live webhook leaves it as it is. The ServiceAccount
    admission plugin adds the token volume and mounts, as for any injected pod."""
    args = ["istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", ""]
    args += ["-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info"]
    security: Obj = {
        "allowPrivilegeEscalation": injector.privileged,
        "privileged": injector.privileged,
        "capabilities": {"drop": ["ALL"]},
    }
    if injector.cni:
        args += ["--run-validation", "--skip-rule-apply"]
        security |= {"readOnlyRootFilesystem": True, "runAsGroup": 1337, "runAsUser": 1337, "runAsNonRoot": True}
    else:
        security["capabilities"] = {"add": list(ISTIO_INIT_CAPABILITIES), "drop": ["ALL"]}
        security |= {"readOnlyRootFilesystem": False, "runAsGroup": 0, "runAsNonRoot": False, "runAsUser": 0}
    init = {
        "name": "istio-validation" if injector.cni else ISTIO_INIT_NAME,
        "image": injector.init_image,
        "args": args,
        "securityContext": security,
    }
    proxy = {
        "name": "istio-proxy",
        "image": injector.proxy_image,
        "args": ["proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local"],
        "securityContext": {
            "allowPrivilegeEscalation": injector.privileged,
            "privileged": injector.privileged,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsGroup": 1337,
            "runAsNonRoot": True,
            "runAsUser": 1337,
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": INJECTED_CANARY_PREFIX,
            "namespace": namespace,
            "annotations": {"sidecar.istio.io/inject": "false"},
        },
        "spec": {
            "initContainers": [init],
            "containers": [proxy, {"name": "app", "image": "tenant-platform.invalid/canary:0"}],
        },
    }
