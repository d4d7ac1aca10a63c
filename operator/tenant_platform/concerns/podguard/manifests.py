"""PURE rendering of the pod guard: ValidatingAdmissionPolicies and their bindings, shared by
every platform (docs/security.md, "One shared pod guard").

- ``tenant-platform-pod-guard-deny`` / ``-warn``: Pod Security *baseline* on pods (create and
  every spec change, including ``pods/ephemeralcontainers``) with the one istio-init exception;
- ``tenant-platform-exec-guard-deny`` / ``-warn``: no exec or attach into a container named
  istio-init.

The shared policies take no parameter (``render``): each enforcement's policies select the
namespaces whose ``GUARD_LABEL`` says that enforcement, and istio-init's allowed repositories are
read from the namespace's ``GUARD_ANNOTATION`` (``namespaceObject``). Each platform's step marks
the namespaces it owns (``guard_mark``); only cluster-scoped rights can
write a namespace's labels and annotations. So the API server evaluates each policy once per pod
request, whatever the number of TenantPlatforms (docs/performance.md). Each policy has one binding
of the same name whose actions are the variant's (``[Deny, Audit]`` or ``[Warn, Audit]``).

Versions before this one gave the same names ``paramKind`` TenantPlatform, every TenantPlatform
as a parameter (``render_parameter_guard``): the step recognises that shape (``is_parameter_guard``)
and switches the names in place only once every platform's namespaces carry their mark.

The names are fixed, so the operator's ClusterRole names them in ``resourceNames`` and nothing
else (deploy/base/rbac.yaml): its identity cannot change the fences of deploy/.

For ``spec.target`` (docs/fleet.md) the TenantPlatform does not live in the cluster the guard
protects, so the same policies are rendered per platform (``platform_name``) with the parameter's
values as CEL literals (``literal``) and the namespaces matched by name.

The rules are stated in docs/pod-guard.md; the CEL lives in the templates
``templates/podguard-*.yaml.j2``. Also rendered here: the pods staged enforcement submits as
server-side dry runs (a copy of each existing pod, ``resubmission``, and the ``canaries`` proving
the policy live).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tenant_platform.api import constants
from tenant_platform.core import templating
from tenant_platform.core.identities import ENFORCEMENTS as ENFORCEMENTS
from tenant_platform.core.identities import EXEC_GUARD as EXEC_GUARD
from tenant_platform.core.identities import POD_GUARD as POD_GUARD
from tenant_platform.core.identities import SHARED_NAMES as SHARED_NAMES
from tenant_platform.core.identities import Enforcement as Enforcement
from tenant_platform.core.identities import GuardNames as GuardNames
from tenant_platform.core.identities import all_names as all_names
from tenant_platform.core.identities import guard_names as guard_names

TEMPLATES = templating.templates_beside(__file__)

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

ACTIONS: Final[dict[str, list[str]]] = {"Deny": ["Deny", "Audit"], "Warn": ["Warn", "Audit"]}

PARAM_REF: Final[Obj] = {"selector": {}, "parameterNotFoundAction": "Allow"}

# A repository name as the image reference grammar has it (no tag, no digest), lowercase path
# components; the first component may be a registry host with a port.
_HOST_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"^(?:{_HOST}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")


def invalid_proxy_repositories(repositories: list[str]) -> list[str]:
    """Configured proxy repositories that cannot be used safely as prefixes.

    A repository must be a full name with at least one ``/`` and no tag or digest. Without a
    ``/``, ``R:`` would also match ``R:<port>/anything`` (a registry host with a port), letting a
    look-alike image in. Such entries are left out of the parameter and reported.
    """
    return [r for r in repositories if "/" not in r or not _REPOSITORY.match(r)]


def valid_proxy_repositories(repositories: list[str]) -> list[str]:
    bad = set(invalid_proxy_repositories(repositories))
    seen: list[str] = []
    for repo in repositories:
        if repo not in bad and repo not in seen:
            seen.append(repo)
    return seen


@dataclass(frozen=True)
class GuardParam:
    """What a platform's guard reads from its parameter (``status.podGuard``): which namespaces it
    guards, at which enforcement, and which proxy repositories istio-init may come from."""

    namespaces: tuple[str, ...]
    enforcement: Enforcement
    proxy_image_repositories: tuple[str, ...]


# The parameter's fields as the shared policies read them (CEL; optional: a platform without
# status.podGuard guards nothing).
_SHARED_EXPRESSIONS: Final = {
    "namespaces": "params.?status.?podGuard.?namespaces.orValue([])",
    "enforcement": 'params.?status.?podGuard.?enforcement.orValue("")',
    "repositories": "params.?status.?podGuard.?proxyImageRepositories.orValue([])",
}


def _expressions(literal: GuardParam | None) -> dict[str, str]:
    if literal is None:
        return dict(_SHARED_EXPRESSIONS)
    return {
        "namespaces": json.dumps(list(literal.namespaces)),
        "enforcement": json.dumps(literal.enforcement),
        "repositories": json.dumps(list(literal.proxy_image_repositories)),
    }


def _namespace_selector(literal: GuardParam | None) -> Obj:
    """Shared: the namespaces a platform claimed (the claim label, which only the operator and
    cluster admins write; the parameter then decides which platform). Literal: by name."""
    if literal is None:
        return {"matchExpressions": [{"key": constants.LABEL_PLATFORM, "operator": "Exists"}]}
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(literal.namespaces)}
        ]
    }


def render_pod_guard_policy(
    enforcement: Enforcement, literal: GuardParam | None = None, platform_name: str = ""
) -> Obj:
    """The pod guard ValidatingAdmissionPolicy of one enforcement."""
    return _pod_policy(
        guard_names(enforcement, platform_name).pod_guard,
        enforcement,
        shared=literal is None,
        param=_expressions(literal),
        namespace_selector=_namespace_selector(literal),
    )


def _pod_policy(
    name: str,
    enforcement: Enforcement,
    *,
    shared: bool,
    param: dict[str, str],
    namespace_selector: Obj,
    retained: bool = False,
) -> Obj:
    return templating.render_object(
        TEMPLATES,
        "podguard-pod-policy.yaml.j2",
        name=name,
        shared=shared,
        variant=enforcement,
        param=param,
        namespace_selector=namespace_selector,
        retained=retained,
        retained_canary=RETAINED_CANARY_ANNOTATION,
        retained_canary_message=RETAINED_CANARY_MESSAGE,
        baseline_capabilities=list(BASELINE_CAPABILITIES),
        istio_init_capabilities=list(ISTIO_INIT_CAPABILITIES),
        safe_sysctls=list(SAFE_SYSCTLS),
        selinux_types=list(SELINUX_TYPES),
        loader_env_names=list(LOADER_ENV_NAMES),
        token_mount_path=TOKEN_MOUNT_PATH,
    )


def render_exec_guard_policy(
    enforcement: Enforcement, literal: GuardParam | None = None, platform_name: str = ""
) -> Obj:
    """The exec guard ValidatingAdmissionPolicy of one enforcement."""
    return templating.render_object(
        TEMPLATES,
        "podguard-exec-policy.yaml.j2",
        name=guard_names(enforcement, platform_name).exec_guard,
        shared=literal is None,
        variant=enforcement,
        param=_expressions(literal),
        namespace_selector=_namespace_selector(literal),
    )


def render_binding(policy_name: str, enforcement: Enforcement, *, shared: bool = True) -> Obj:
    """The binding of ``policy_name`` (same name) with the actions of ``enforcement``; shared
    bindings select every TenantPlatform as a parameter."""
    binding = templating.render_object(
        TEMPLATES, "podguard-binding.yaml.j2", name=policy_name, policy_name=policy_name, actions=ACTIONS[enforcement]
    )
    if shared:
        binding["spec"]["paramRef"] = copy.deepcopy(PARAM_REF)
    return binding


# ---- the retained guard: the guard of namespaces a deleted platform left (docs/pod-guard.md) -------

RETAINED_LABEL: Final = "tenancy.dev/pod-guard-retained"
"""On a namespace a deleted platform left behind (deletionPolicy Retain, or an adopted namespace
under Delete): the enforcement its guard had there (``Deny`` or ``Warn``). The retained guard's
bindings select it; only someone who may update namespaces (cluster-scoped rights, never the
namespace's ``admin``) can set or remove it. An admin removes it to release the namespace."""
RETAINED_ANNOTATION: Final = "tenancy.dev/pod-guard-proxy-image-repositories"
"""Beside the label: the proxy image repositories istio-init may come from there, comma-separated
(the platform's validated ``proxyImageRepositories`` when it was deleted)."""
RETAINED_CANARY_ANNOTATION: Final = "tenancy.dev/pod-guard-retained-canary"
"""A pod carrying it is denied (or warned about) by the retained pod guard alone: the operator's
proof, by a server-side dry run, that the retained guard is in effect in a namespace."""
RETAINED_CANARY_MESSAGE: Final = "The retained pod guard is in effect (canary)."
RETAINED_MANAGER: Final = "tenant-platform-operator/pod-guard-retained"
"""The field manager of the namespace's mark (not the namespaces step's: its release keeps it)."""
RETAINED: Final = "retained"


def retained_names(enforcement: Enforcement) -> GuardNames:
    """The retained guard's policy (and binding) names of one enforcement."""
    suffix = f"-{RETAINED}-{enforcement.lower()}"
    return GuardNames(pod_guard=f"{POD_GUARD}{suffix}", exec_guard=f"{EXEC_GUARD}{suffix}")


RETAINED_NAMES: Final = (
    *(retained_names(e).exec_guard for e in ENFORCEMENTS),
    *(retained_names(e).pod_guard for e in ENFORCEMENTS),
)
"""The retained guard's four policy names, also its bindings' (deploy/base/rbac.yaml names them)."""


def _mark_selector(enforcement: Enforcement, label: str) -> Obj:
    """The namespaces whose ``label`` says ``enforcement``."""
    return {"matchExpressions": [{"key": label, "operator": "In", "values": [enforcement]}]}


# ---- the labelled guard: the shared guard, without a parameter (docs/pod-guard.md) --------------

GUARD_LABEL: Final = "tenancy.dev/pod-guard"
"""On a namespace a platform owns: the enforcement its guard has there (``Deny`` or ``Warn``). The
shared policies of each enforcement select it. Only someone who may update namespaces
(cluster-scoped rights, never the namespace's ``admin``) can set or remove it."""
GUARD_ANNOTATION: Final = "tenancy.dev/pod-guard-repositories"
"""Beside the label: the proxy image repositories istio-init may come from there, comma-separated
(the platform's validated ``proxyImageRepositories``)."""


def _labelled_expressions(enforcement: Enforcement, annotation: str) -> dict[str, str]:
    """The policy's namespace selector picks the namespaces marked with its enforcement (match
    conditions do not see ``namespaceObject``; variables do)."""
    return {
        "namespaces": "[request.namespace]",
        "enforcement": json.dumps(enforcement),
        "repositories": (
            f'namespaceObject.metadata.?annotations.orValue({{}})[?"{annotation}"].orValue("")'
            '.split(",").filter(r, r != "")'
        ),
    }


def render_labelled() -> list[Obj]:
    """The shared guard's four policies and bindings (the shared names) without a parameter: each
    enforcement's policies match the namespaces whose ``GUARD_LABEL`` says that enforcement, the
    proxy repositories read from the namespace's ``GUARD_ANNOTATION``. Policies first (pod guards,
    then exec guards), then bindings: switching from the parameter guard in place, a new policy
    under an old binding (its paramRef ignored without paramKind) already judges by the mark."""
    return _render_marked(guard_names, GUARD_LABEL, GUARD_ANNOTATION, canary=False)


def _render_marked(
    names: Callable[[Enforcement], GuardNames], label: str, annotation: str, *, canary: bool
) -> list[Obj]:
    """A guard without a parameter judging by a namespace's mark (the shared guard and the retained
    guard): each enforcement's policies (``names``) match the namespaces whose ``label`` says that
    enforcement, istio-init's repositories read from their ``annotation``; with ``canary`` the pod
    guards also refuse the retained canary. Then the bindings, same names, policies first. Without
    ``canary``: pod guards, then exec guards; with it: exec guards first (the API server loads each
    kind in order, so a pod guard binding in effect, what the canary proves, means the exec guard's
    are too)."""
    pods = [
        _pod_policy(
            names(enforcement).pod_guard,
            enforcement,
            shared=False,
            param=_labelled_expressions(enforcement, annotation),
            namespace_selector=_mark_selector(enforcement, label),
            retained=canary,
        )
        for enforcement in ENFORCEMENTS
    ]
    execs = [
        templating.render_object(
            TEMPLATES,
            "podguard-exec-policy.yaml.j2",
            name=names(enforcement).exec_guard,
            shared=False,
            variant=enforcement,
            param=_labelled_expressions(enforcement, annotation),
            namespace_selector=_mark_selector(enforcement, label),
        )
        for enforcement in ENFORCEMENTS
    ]
    policies = [*execs, *pods] if canary else [*pods, *execs]
    bindings = [
        render_binding(name, _variant_of(name), shared=False) for name in (p["metadata"]["name"] for p in policies)
    ]
    return policies + bindings


Mark = tuple[str, str]
"""A namespace's guard mark: (``GUARD_LABEL`` value, ``GUARD_ANNOTATION`` value), "" when absent."""


def mark_of(namespace: Obj | None) -> Mark | None:
    """The guard mark a live namespace carries (None: no such namespace)."""
    if namespace is None:
        return None
    meta = namespace.get("metadata") or {}
    return (
        str((meta.get("labels") or {}).get(GUARD_LABEL, "")),
        str((meta.get("annotations") or {}).get(GUARD_ANNOTATION, "")),
    )


def mark_for(enforcement: Enforcement, repositories: tuple[str, ...] | list[str]) -> Mark:
    return (enforcement, ",".join(repositories))


def guard_mark(namespace: str, mark: Mark | None) -> Obj:
    """The namespace's mark as a merge patch's intent (a patch never creates a namespace that was
    deleted meanwhile); None: the mark removed."""
    label, annotation = mark if mark is not None else (None, None)
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {GUARD_LABEL: label}, "annotations": {GUARD_ANNOTATION: annotation}},
    }


def render_retained() -> list[Obj]:
    """The retained guard, shared by every platform like the shared guard: the same rules without a
    parameter; each enforcement's policies match the namespaces whose ``RETAINED_LABEL`` says
    that enforcement (repositories from ``RETAINED_ANNOTATION``), the pod guards refusing the
    retained canary. Exec guards first, then pod guards, policies before bindings."""
    return _render_marked(retained_names, RETAINED_LABEL, RETAINED_ANNOTATION, canary=True)


def retained_mark(namespace: str, enforcement: Enforcement, repositories: list[str]) -> Obj:
    """The namespace's mark (server-side apply intent under ``RETAINED_MANAGER``)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {RETAINED_LABEL: enforcement},
            "annotations": {RETAINED_ANNOTATION: ",".join(repositories)},
        },
    }


def retained_canary(namespace: str) -> Obj:
    """A restricted-compliant pod that only the retained pod guard refuses (its canary annotation)."""
    pod = canaries(namespace)[1]
    pod["metadata"]["annotations"] = {RETAINED_CANARY_ANNOTATION: "true"}
    return pod


def render_parameter_guard() -> list[Obj]:
    """The shared names as versions before the labelled guard rendered them: ``paramKind``
    TenantPlatform, every TenantPlatform a parameter (its ``status.podGuard``). Kept to recognise
    and measure it, and to test the switch from it (never applied by the step)."""
    policies: list[Obj] = []
    for enforcement in ENFORCEMENTS:
        policies.append(render_pod_guard_policy(enforcement))
    for enforcement in ENFORCEMENTS:
        policies.append(render_exec_guard_policy(enforcement))
    bindings = [render_binding(name, _variant_of(name)) for name in (p["metadata"]["name"] for p in policies)]
    return policies + bindings


def is_parameter_guard(policy: Obj | None) -> bool:
    """A live shared policy of the parameter guard's shape (``paramKind`` set)."""
    return bool(policy and (policy.get("spec") or {}).get("paramKind"))


def _variant_of(name: str) -> Enforcement:
    return "Deny" if name.endswith("-deny") else "Warn"


def render(literal: GuardParam | None = None, platform_name: str = "") -> list[Obj]:
    """The four policies, then the four bindings (stable order; policies before the bindings
    naming them). Shared (the default): the labelled guard, the same for every platform
    (``render_labelled``). With ``literal`` and ``platform_name``: one platform's guard for a
    target cluster, its parameter inlined."""
    if literal is None:
        return render_labelled()
    policies: list[Obj] = []
    for enforcement in ENFORCEMENTS:
        policies.append(render_pod_guard_policy(enforcement, literal, platform_name))
    for enforcement in ENFORCEMENTS:
        policies.append(render_exec_guard_policy(enforcement, literal, platform_name))
    bindings = [
        render_binding(name, _variant_of(name), shared=False) for name in (p["metadata"]["name"] for p in policies)
    ]
    return policies + bindings


# ---- dry-run pods for staged enforcement (concerns/podguard/step.py submits them) -----------------------

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
