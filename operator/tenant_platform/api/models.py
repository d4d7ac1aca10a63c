"""Pydantic models of the TenantPlatform spec (v1alpha1).

The CRD in crds/ is the source of truth for validation and defaults at apply time; these models
mirror it field for field so the operator parses a body once, at the edge, and nothing downstream
digs into raw dicts. tests/unit/test_crd_model_parity.py fails when the two disagree about fields,
types or defaults.

Version skew: a newer CRD may carry fields this operator does not know (the API server prunes
unknown fields, so only a newer schema can bring them). They are kept aside, never rejected
(``extra="allow"``), and ``TenantPlatform.unknown_fields`` names them (bounded) so the pass can
say so; a wrong type or value of a known field is still an invalid spec. Deletion parses with
``TenantPlatform.from_body_lenient``: a known field that does not validate falls back to its
default (named), so cleanup never skips because the spec does not parse.
"""

from __future__ import annotations

import copy
import re
from datetime import timedelta
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from tenant_platform.api import admission, constants

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Empty, or https:// with a host name, IPv4 or [IPv6] address, an optional port and path: no user
# info, query or fragment (a kubeconfig's cluster.server).
KUBECONFIG_SERVER = r"^(https://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?)?$"
DURATION = r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"
OPTIONAL_DNS1123_LABEL = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"
OPTIONAL_DNS1123_SUBDOMAIN = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$"
SECRET_KEY = r"^[-._a-zA-Z0-9]+$"
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(value: str) -> timedelta:
    """Parse a Go-style duration such as ``24h``, ``1h30m`` or ``90s``.

    Raises ValueError for anything the CRD pattern would reject.
    """
    if not re.fullmatch(DURATION, value):
        raise ValueError(f"not a duration (use e.g. 24h, 30m, 90s): {value!r}")
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
    return timedelta(seconds=seconds)


# Unknown field paths named at most (a newer CRD adds a few; a hostile one may add thousands).
MAX_UNKNOWN_FIELDS = 10
# Fields dropped at most by the lenient parse before it gives up.
_MAX_DROPPED = 50


def _admitting(info: ValidationInfo) -> bool:
    """Admission mode (api/admission.py): a file no API server has seen, checked as it would."""
    return bool(info.context and info.context.get(admission.CONTEXT_KEY))


def _refuse(problems: list[str]) -> None:
    if problems:
        raise ValueError("; ".join(problems))


class _Model(BaseModel):
    # Unknown fields (a newer CRD) are kept aside, not rejected: see unknown_fields.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _admission_constraints(cls, value: Any, info: ValidationInfo) -> Any:
        """The CRD's schema constraints pydantic's Fields do not carry (admission mode only)."""
        if _admitting(info) and info.field_name is not None:
            field = cls.model_fields[info.field_name]
            constraints = admission.CONSTRAINTS.get((cls.__name__, field.alias or info.field_name))
            if constraints:
                _refuse(admission.check(value, constraints))
        return value

    @model_validator(mode="after")
    def _admission_unknown_fields(self, info: ValidationInfo) -> _Model:
        """The API server refuses unknown fields under kubectl's default (Strict) field validation."""
        if _admitting(info) and self.model_extra:
            raise ValueError(", ".join(f'unknown field "{k}"' for k in sorted(self.model_extra)))
        return self


def _unknown(model: BaseModel, path: str, out: list[str]) -> None:
    for key in sorted(model.model_extra or {}):
        out.append(f"{path}.{key}")
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        where = f"{path}.{field.alias or name}"
        if isinstance(value, BaseModel):
            _unknown(value, where, out)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    _unknown(item, f"{where}[{index}]", out)


def _drop(doc: Any, loc: tuple[int | str, ...]) -> int:
    """Remove what ``loc`` points at (for a missing field: its parent); the depth removed, or 0."""
    for depth in range(len(loc), 0, -1):
        parent: Any = doc
        try:
            for key in loc[: depth - 1]:
                parent = parent[key]
            if isinstance(parent, dict) and loc[depth - 1] in parent:
                del parent[loc[depth - 1]]
                return depth
            if isinstance(parent, list) and isinstance(loc[depth - 1], int) and 0 <= int(loc[depth - 1]) < len(parent):
                del parent[int(loc[depth - 1])]
                return depth
        except (KeyError, IndexError, TypeError):
            continue
    return 0


class Injection(_Model):
    mode: Literal["Label", "Revision"] = Field(
        "Label", description="Label: istio-injection=enabled; Revision: istio.io/rev=<revision>."
    )
    revision: str = Field(
        "", pattern=OPTIONAL_DNS1123_LABEL, max_length=63, description="Istio revision for mode Revision."
    )


class Mesh(_Model):
    namespace: str = Field(
        "istio-system", pattern=DNS1123_LABEL, max_length=63, description="Namespace where istiod runs."
    )
    injection: Injection = Field(default_factory=Injection, description="Sidecar injection labelling.")
    sidecar_style: Literal["Auto", "Native", "Classic"] = Field(
        "Auto", description="How istio-proxy is injected; Auto detects it."
    )


class PodSecurity(_Model):
    warn: Literal["privileged", "baseline", "restricted"] = Field(
        "restricted", description="pod-security.kubernetes.io/warn level."
    )
    audit: Literal["privileged", "baseline", "restricted"] = Field(
        "restricted", description="pod-security.kubernetes.io/audit level."
    )


class Subject(_Model):
    kind: Literal["User", "Group", "ServiceAccount"] = Field(description="RBAC subject kind.")
    name: str = Field(description="Subject name.")
    namespace: str = Field(
        "", pattern=OPTIONAL_DNS1123_LABEL, max_length=63, description="Namespace, for kind ServiceAccount only."
    )

    @model_validator(mode="after")
    def _admission_rules(self, info: ValidationInfo) -> Subject:
        if _admitting(info):
            _refuse(admission.subject_rules(self.kind, self.name, self.namespace))
        return self


class KubeconfigSecret(_Model):
    enabled: bool = Field(False, description="Mint a kubeconfig Secret for the installer identity.")
    name: str = Field(
        "",
        pattern=OPTIONAL_DNS1123_SUBDOMAIN,
        max_length=253,
        description="Secret name; empty means <serviceAccountName>-kubeconfig.",
    )
    token_ttl: str = Field(
        "24h", alias="tokenTTL", pattern=DURATION, description="Token lifetime; re-minted before expiry."
    )
    server: str = Field(
        "",
        pattern=KUBECONFIG_SERVER,
        max_length=2048,
        description="API server URL the kubeconfig names (https://host[:port][/path]); empty means "
        "kube-public/cluster-info's, else the operator's own API address.",
    )


class Installer(_Model):
    service_account_name: str = Field(
        "platform-installer", pattern=DNS1123_SUBDOMAIN, description="Installer ServiceAccount."
    )
    subjects: list[Subject] = Field(default_factory=list, description="Extra subjects bound to the roles.")
    kubeconfig_secret: KubeconfigSecret = Field(
        default_factory=KubeconfigSecret, description="Optional minted kubeconfig."
    )


# The checklist's three: Istio's release registry, Docker Hub, and Kamiwaza's own mirror (without
# it, the guard denies every pod Kamiwaza's Istio injects).
DEFAULT_PROXY_REPOSITORIES = [
    "registry.istio.io/release/proxyv2",
    "docker.io/istio/proxyv2",
    "ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2",
]


class PodGuard(_Model):
    enforcement: Literal["Deny", "Warn", "Staged"] = Field(
        "Staged", description="Deny, Warn, or Staged (warn, check existing pods, then deny)."
    )
    proxy_image_repositories: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PROXY_REPOSITORIES),
        description="Repositories istio-init may come from; each gives '<repo>:' and '<repo>@' prefixes.",
    )


class Gateway(_Model):
    management: Literal["Managed", "External"] = Field(
        "Managed", description="Managed: the operator writes the Gateway; External: verify only."
    )
    name: str = Field("kamiwaza-gateway", pattern=DNS1123_SUBDOMAIN, description="Gateway name.")
    namespace: str = Field("istio-system", pattern=DNS1123_LABEL, description="Gateway namespace.")
    selector: dict[str, str] = Field(
        default_factory=lambda: {"istio": "ingressgateway"}, description="Gateway workload selector."
    )
    service_account_name: str = Field(
        "istio-ingressgateway", pattern=DNS1123_SUBDOMAIN, max_length=253, description="Gateway workload's SA."
    )
    service_host: str = Field(
        "istio-ingressgateway.istio-system.svc.cluster.local",
        pattern=DNS1123_SUBDOMAIN,
        description="In-cluster hostname of the gateway Service.",
    )


class IssuerRef(_Model):
    """The cert-manager issuer of ``issuer: CertManager`` (a Certificate's ``spec.issuerRef``)."""

    name: str = Field(pattern=DNS1123_SUBDOMAIN, max_length=253, description="Issuer or ClusterIssuer name.")
    kind: Literal["Issuer", "ClusterIssuer"] = Field(
        "Issuer", description="Issuer (in the gateway namespace) or ClusterIssuer."
    )
    group: str = Field(
        "cert-manager.io", pattern=DNS1123_SUBDOMAIN, max_length=253, description="The issuer's API group."
    )


class EdgeCertificate(_Model):
    secret_name: str = Field("kamiwaza-edge-tls", pattern=DNS1123_SUBDOMAIN, description="TLS Secret.")
    issuer: Literal["External", "SelfSigned", "CertManager"] = Field(
        "External",
        description="External: verify only; SelfSigned: generate and rotate; CertManager: a cert-manager Certificate.",
    )
    issuer_ref: IssuerRef | None = Field(None, description="Required for issuer CertManager, not allowed otherwise.")
    renew_before: str = Field("720h", pattern=DURATION, description="Renew/alert this long before expiry.")
    trust_config_map_name: str = Field(
        "",
        pattern=OPTIONAL_DNS1123_SUBDOMAIN,
        max_length=253,
        description="Trust ConfigMap in the tenant namespace; empty means <namespace>-edge-trust.",
    )

    @model_validator(mode="after")
    def _admission_rules(self, info: ValidationInfo) -> EdgeCertificate:
        if _admitting(info):
            _refuse(admission.edge_certificate_rules(self.issuer, has_issuer_ref=self.issuer_ref is not None))
        return self


class Dns(_Model):
    management: Literal["CoreDNS", "External", "Disabled"] = Field(
        "CoreDNS", description="CoreDNS: rewrite the domain to the gateway; External: verify only."
    )


class Storage(_Model):
    storage_class_name: str = Field(
        "",
        pattern=OPTIONAL_DNS1123_SUBDOMAIN,
        max_length=253,
        description="StorageClass; empty means the cluster default.",
    )
    verify: bool = Field(
        True,
        description=(
            "Prove the class with a PVC + pod write test in the platform's namespace; false: the class's "
            "existence alone (which proves nothing)."
        ),
    )


class S3CredentialsSecret(_Model):
    name: str = Field(pattern=DNS1123_SUBDOMAIN, max_length=253, description="Secret in the tenant namespace.")
    access_key_id_key: str = Field("AWS_ACCESS_KEY_ID", description="Key holding the access key id.")
    secret_access_key_key: str = Field("AWS_SECRET_ACCESS_KEY", description="Key holding the secret key.")


class S3(_Model):
    endpoint: str = Field(description="S3-compatible endpoint URL.")
    bucket: str = Field(description="Bucket name.")
    region: str = Field("", description="Region, if the service needs one.")
    credentials_secret: S3CredentialsSecret = Field(description="Credentials Secret.")


class ObjectStore(_Model):
    mode: Literal["Builtin", "S3"] = Field("Builtin", description="Builtin or your own S3.")
    s3: S3 | None = Field(None, description="Required for mode S3.")


class InstallValues(_Model):
    config_map_name: str = Field(
        "",
        pattern=OPTIONAL_DNS1123_SUBDOMAIN,
        max_length=253,
        description="Values ConfigMap in the tenant namespace; empty means <platform>-install-values.",
    )


class NodeLabels(_Model):
    enabled: bool = Field(True, description="Label detected GPU nodes.")
    labels: dict[str, str] = Field(default_factory=lambda: {"gpu": "on"}, description="Labels applied to GPU nodes.")

    @field_validator("labels")
    @classmethod
    def _admission_prefixes(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if _admitting(info):
            _refuse(admission.gpu_label_rules(value))
        return value


class Hami(_Model):
    enabled: bool = Field(True, description="Report HAMi capacity and health.")
    config_map_namespace: str = Field(
        "kube-system", pattern=DNS1123_LABEL, max_length=63, description="Namespace of hami-scheduler-device."
    )
    node_lock_timeout: str = Field("5m", pattern=DURATION, description="HAMi node-lock expiry.")


class SelectorRequirement(_Model):
    key: str = Field(max_length=317, description="Label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(description="How the key is matched.")
    values: list[str] = Field(default_factory=list, description="Values for In and NotIn.")

    @model_validator(mode="after")
    def _admission_rules(self, info: ValidationInfo) -> SelectorRequirement:
        if _admitting(info):
            _refuse(admission.selector_requirement_rules(self.operator, self.values))
        return self


class NodeSelector(_Model):
    match_labels: dict[str, str] = Field(default_factory=dict, description="Labels a node must carry.")
    match_expressions: list[SelectorRequirement] = Field(
        default_factory=list, description="Label requirements a node must meet."
    )

    @model_validator(mode="after")
    def _admission_rules(self, info: ValidationInfo) -> NodeSelector:
        if _admitting(info):
            _refuse(admission.node_selector_rules(self.match_labels, self.match_expressions))
        return self


class GpuShare(_Model):
    """The tenant's GPU share (docs/gpu.md): a ResourceQuota with the whole share in each of the
    platform's namespaces, on HAMi's resources (``requests.<resource>``)."""

    cards: int = Field(ge=1, le=10000, description="Cards (HAMi's count resource, nvidia.com/gpu).")
    memory_mib: int | None = Field(
        None, alias="memoryMiB", ge=1, le=1073741824, description="Card memory in MiB (nvidia.com/gpumem)."
    )
    cores_percent: int | None = Field(
        None, ge=1, le=1000000, description="Card compute in percent of a card (nvidia.com/gpucores)."
    )

    @model_validator(mode="after")
    def _admission_rules(self, info: ValidationInfo) -> GpuShare:
        if _admitting(info):
            _refuse(admission.gpu_share_rules(self.cards, self.cores_percent))
        return self


class Gpu(_Model):
    node_labels: NodeLabels = Field(default_factory=NodeLabels, description="GPU node labels.")
    hami: Hami = Field(default_factory=Hami, description="HAMi capacity reporting.")
    node_selector: NodeSelector | None = Field(
        None, description="Nodes that are GPU nodes whatever they advertise (a label selector)."
    )
    share: GpuShare | None = Field(None, description="The tenant's GPU share; absent: no quota.")


class TargetSecret(_Model):
    """Any Secret in the management cluster holding a kubeconfig (spec.target.kubeconfigSecret)."""

    namespace: str = Field(pattern=DNS1123_LABEL, max_length=63, description="Namespace of the Secret.")
    name: str = Field(pattern=DNS1123_SUBDOMAIN, max_length=253, description="Secret name.")
    key: str = Field(
        constants.CLUSTER_API_KUBECONFIG_KEY,
        pattern=SECRET_KEY,
        max_length=253,
        description="Data key holding the kubeconfig.",
    )


class TargetClusterAPI(_Model):
    """A Cluster API Cluster: its Secret ``<cluster>-kubeconfig``, key ``value``."""

    namespace: str = Field(pattern=DNS1123_LABEL, max_length=63, description="Namespace of the Cluster.")
    cluster: str = Field(pattern=DNS1123_LABEL, max_length=63, description="Cluster name.")


class TargetKamaji(_Model):
    """A Kamaji TenantControlPlane: its Secret ``<tenantControlPlane>-admin-kubeconfig``."""

    namespace: str = Field(pattern=DNS1123_LABEL, max_length=63, description="Namespace of the TenantControlPlane.")
    tenant_control_plane: str = Field(pattern=DNS1123_LABEL, max_length=63, description="TenantControlPlane name.")
    key: str = Field(
        constants.KAMAJI_KUBECONFIG_KEY,
        pattern=SECRET_KEY,
        max_length=253,
        description="Data key: admin.conf, or super-admin.conf.",
    )


class SecretRef(BaseModel):
    """Where a target's kubeconfig is: (namespace, name, key) of a Secret in the management cluster."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    name: str
    key: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} key {self.key}"


class Target(_Model):
    """The cluster the platform prepares when it is not the cluster the operator runs in."""

    kubeconfig_secret: TargetSecret | None = Field(None, description="Any Secret and key.")
    cluster_api: TargetClusterAPI | None = Field(None, alias="clusterAPI", description="A Cluster API Cluster.")
    kamaji: TargetKamaji | None = Field(None, description="A Kamaji TenantControlPlane.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Target:
        given = [x for x in (self.kubeconfig_secret, self.cluster_api, self.kamaji) if x is not None]
        if len(given) != 1:
            raise ValueError(admission.MSG_TARGET_ONE_OF)
        return self

    def secret_ref(self) -> SecretRef:
        """The Secret (and key) holding the target's kubeconfig, by the convention named."""
        if self.cluster_api is not None:
            c = self.cluster_api
            return SecretRef(
                namespace=c.namespace,
                name=f"{c.cluster}{constants.CLUSTER_API_KUBECONFIG_SUFFIX}",
                key=constants.CLUSTER_API_KUBECONFIG_KEY,
            )
        if self.kamaji is not None:
            k = self.kamaji
            return SecretRef(
                namespace=k.namespace, name=f"{k.tenant_control_plane}{constants.KAMAJI_KUBECONFIG_SUFFIX}", key=k.key
            )
        assert self.kubeconfig_secret is not None
        s = self.kubeconfig_secret
        return SecretRef(namespace=s.namespace, name=s.name, key=s.key)


class TenantPlatformSpec(_Model):
    namespace: str = Field(pattern=DNS1123_LABEL, max_length=63, description="Tenant namespace.")
    additional_namespaces: list[str] = Field(
        default_factory=list, description="More namespaces with the same labels and guard."
    )
    domain: str = Field(pattern=DNS1123_SUBDOMAIN, max_length=253, description="Platform domain.")
    deletion_policy: Literal["Retain", "Delete"] = Field(
        "Retain", description="Retain leaves namespaces and data on deletion."
    )
    progress_deadline_seconds: int = Field(
        600, ge=1, le=604800, description="Not ready this long: Stalled (GitOps tools report Failed/Degraded)."
    )
    mesh: Mesh = Field(default_factory=Mesh, description="Istio mesh.")
    pod_security: PodSecurity = Field(default_factory=PodSecurity, description="PSA warn/audit labels.")
    installer: Installer = Field(default_factory=Installer, description="Installer identity.")
    pod_guard: PodGuard = Field(default_factory=PodGuard, description="Admission guard.")
    gateway: Gateway = Field(default_factory=Gateway, description="Istio Gateway.")
    edge_certificate: EdgeCertificate = Field(default_factory=EdgeCertificate, description="Edge cert.")
    dns: Dns = Field(default_factory=Dns, description="In-cluster DNS for the domain.")
    storage: Storage = Field(default_factory=Storage, description="Block storage.")
    object_store: ObjectStore = Field(default_factory=ObjectStore, description="Object storage.")
    image_pull_secrets: list[str] = Field(default_factory=list, description="Pull Secret names.")
    install_values: InstallValues = Field(default_factory=InstallValues, description="Hand-off ConfigMap.")
    gpu: Gpu = Field(default_factory=Gpu, description="GPU nodes and HAMi.")
    target: Target | None = Field(None, description="Another cluster to prepare (docs/fleet.md); absent: this one.")

    @field_validator("additional_namespaces")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("additionalNamespaces must be distinct")
        return value

    @field_validator("namespace")
    @classmethod
    def _admission_namespace(cls, value: str, info: ValidationInfo) -> str:
        if _admitting(info):
            _refuse(admission.namespace_rules(value))
        return value

    @field_validator("additional_namespaces")
    @classmethod
    def _admission_additional(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if _admitting(info):
            _refuse(admission.additional_namespace_rules(value))
        return value

    @field_validator("domain")
    @classmethod
    def _admission_domain(cls, value: str, info: ValidationInfo) -> str:
        if _admitting(info):
            _refuse(admission.domain_rules(value))
        return value

    @model_validator(mode="after")
    def _admission_rules(self, info: ValidationInfo) -> TenantPlatformSpec:
        """The CRD's CEL rules across spec fields (admission mode only)."""
        if _admitting(info):
            _refuse(
                admission.spec_rules(
                    namespace=self.namespace,
                    additional=self.additional_namespaces,
                    mesh_namespace=self.mesh.namespace,
                    object_store_mode=self.object_store.mode,
                    has_s3=self.object_store.s3 is not None,
                    injection_mode=self.mesh.injection.mode,
                    revision=self.mesh.injection.revision,
                )
            )
        return self

    @model_validator(mode="after")
    def _safe_subjects(self) -> TenantPlatformSpec:
        """The CRD's CEL rules on installer subjects, again (an object stored before them)."""
        for subject in self.installer.subjects:
            if subject.name.startswith("system:"):
                raise ValueError(f"installer subject {subject.name}: system: users and groups are never bound")
        return self

    @property
    def all_namespaces(self) -> list[str]:
        """The primary namespace first, then the additional ones."""
        return [self.namespace, *self.additional_namespaces]


class TenantPlatform(BaseModel):
    """A parsed TenantPlatform object: metadata we use plus the typed spec."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    uid: str
    generation: int
    resource_version: str
    annotations: dict[str, str]
    deleting: bool
    spec: TenantPlatformSpec
    status: dict[str, Any]

    @classmethod
    def from_body(cls, body: dict[str, Any], *, admission_mode: bool = False) -> TenantPlatform:
        """Parse a raw object. Raises pydantic.ValidationError for an invalid spec.

        ``admission_mode``: a file no API server has seen, refused where the API server would
        refuse it (api/admission.py); a stored object is parsed without it.
        """
        meta = body.get("metadata") or {}
        spec = TenantPlatformSpec.model_validate(
            body.get("spec") or {},
            strict=True if admission_mode else None,
            context={admission.CONTEXT_KEY: True} if admission_mode else None,
        )
        return cls(
            name=meta["name"],
            uid=meta.get("uid", ""),
            generation=int(meta.get("generation", 0) or 0),
            resource_version=meta.get("resourceVersion", ""),
            annotations=dict(meta.get("annotations") or {}),
            deleting=bool(meta.get("deletionTimestamp")),
            spec=spec,
            status=dict(body.get("status") or {}),
        )

    @classmethod
    def from_body_lenient(cls, body: dict[str, Any]) -> tuple[TenantPlatform, list[str]] | None:
        """Parse for cleanup: known fields that do not validate fall back to their defaults.

        Returns the platform and the dropped fields' paths, or None when even that fails (the
        namespace or domain itself is missing or invalid). Defaults are the cautious values
        (e.g. deletionPolicy Retain), and cleanup removes only what carries this platform's claim.
        """
        spec = copy.deepcopy(body.get("spec") or {})
        dropped: list[str] = []
        for _ in range(_MAX_DROPPED):
            try:
                return cls.from_body({**body, "spec": spec}), dropped
            except pydantic.ValidationError as exc:
                errors = exc.errors()
            progress = False
            for err in errors:
                loc = tuple(err.get("loc", ()))
                depth = _drop(spec, loc) if loc else 0
                if depth:
                    dropped.append("spec." + ".".join(str(p) for p in loc[:depth]))
                    progress = True
                    break  # locations of the other errors may have moved: validate again
            if not progress:
                return None
        return None

    def unknown_fields(self) -> list[str]:
        """Spec fields this operator does not know (a newer CRD), at most MAX_UNKNOWN_FIELDS."""
        found: list[str] = []
        _unknown(self.spec, "spec", found)
        shown = [path if len(path) <= 120 else path[:117] + "..." for path in found[:MAX_UNKNOWN_FIELDS]]
        if len(found) > MAX_UNKNOWN_FIELDS:
            shown.append(f"and {len(found) - MAX_UNKNOWN_FIELDS} more")
        return shown

    @property
    def paused(self) -> bool:
        return self.annotations.get(constants.ANNOTATION_PAUSED, "").lower() == "true"

    @property
    def install_values_name(self) -> str:
        return self.spec.install_values.config_map_name or f"{self.name}-install-values"

    @property
    def trust_config_map_name(self) -> str:
        return self.spec.edge_certificate.trust_config_map_name or f"{self.spec.namespace}-edge-trust"

    @property
    def kubeconfig_secret_name(self) -> str:
        ks = self.spec.installer.kubeconfig_secret
        return ks.name or f"{self.spec.installer.service_account_name}-kubeconfig"
