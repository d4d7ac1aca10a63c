"""The kinds the operator touches, by (apiVersion, kind): their plural and whether they are
namespaced. Paths come from here without discovery; anything else falls back to discovery."""

from __future__ import annotations

from tenant_platform.api import constants

# (apiVersion, kind) -> (plural, namespaced)
RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Node"): ("nodes", False),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "Event"): ("events", True),
    ("events.k8s.io/v1", "Event"): ("events", True),
    ("coordination.k8s.io/v1", "Lease"): ("leases", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("apps/v1", "DaemonSet"): ("daemonsets", True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): (
        "validatingadmissionpolicies",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
        "validatingadmissionpolicybindings",
        False,
    ),
    ("storage.k8s.io/v1", "StorageClass"): ("storageclasses", False),
    ("discovery.k8s.io/v1", "EndpointSlice"): ("endpointslices", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("networking.istio.io/v1", "Gateway"): ("gateways", True),
    ("networking.istio.io/v1", "VirtualService"): ("virtualservices", True),
    ("node.k8s.io/v1", "RuntimeClass"): ("runtimeclasses", False),
    (constants.API_VERSION, constants.KIND): (constants.PLURAL, False),
}
