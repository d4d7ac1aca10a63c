"""The storage write test (``spec.storage.verify``): a small PVC, a pod writing a marker, and a
second pod reading it back after the first is gone, as the checklist's manual storage check does.

Names end in the test's attempt id (the Unix time it started), so a new test never waits on the
previous test's volume while it is still being deleted. Every object also carries the attempt id
as a label, and the PVC carries what the test has done so far in annotations (the class, when it
started, that the marker was written, the result once it ended): the state that must survive a
failed status write or a killed process lives in the objects themselves (concerns/storage/live.py
reads it back). They are created in the platform's namespace, and the pods pass whatever it
enforces: Pod Security "restricted" (the strictest level), the pod guard (Pod Security baseline:
no hostPath, host namespaces or privilege), no ServiceAccount token, only the test's PVC as a
volume. They opt out of Istio sidecar injection (a classic sidecar would keep the pod from ever
completing), and never restart.
"""

from __future__ import annotations

from typing import Any

COMPONENT = "storage-verify"
ROLE_LABEL = "tenancy.dev/storage-verify-role"
ATTEMPT_LABEL = "tenancy.dev/storage-verify-attempt"
CLASS_ANNOTATION = "tenancy.dev/storage-verify-class"
STARTED_ANNOTATION = "tenancy.dev/storage-verify-started-at"
WRITTEN_ANNOTATION = "tenancy.dev/storage-verify-written"
"""Set on the PVC once the writer succeeded, before it is deleted (the reader comes next)."""
RESULT_ANNOTATION = "tenancy.dev/storage-verify-result"
FINISHED_ANNOTATION = "tenancy.dev/storage-verify-finished-at"
MESSAGE_ANNOTATION = "tenancy.dev/storage-verify-message"
IMAGE = "docker.io/library/busybox:1.37"
VOLUME_SIZE = "16Mi"
MOUNT = "/data"

_WRITE = 'set -e; printf %s "$MARKER" > /data/marker; sync; echo "marker written"'
_READ = (
    'if [ "$(cat /data/marker 2>/dev/null)" = "$MARKER" ]; then echo "marker read back intact"; '
    'else echo "marker missing or changed on the volume" >&2; exit 3; fi'
)


def pvc_name(platform_name: str, attempt: int) -> str:
    return f"{platform_name}-storage-verify-{attempt}"


def pod_name(platform_name: str, attempt: int, role: str) -> str:
    return f"{platform_name}-storage-{role}-{attempt}"


def marker(platform_uid: str, attempt: int) -> str:
    return f"tenant-platform storage check {platform_uid or 'local'} {attempt}"


def render_pvc(
    *, platform_name: str, namespace: str, attempt: int, storage_class: str | None, started_at: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": VOLUME_SIZE}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    annotations = {CLASS_ANNOTATION: storage_class or ""}
    if started_at:
        annotations[STARTED_ANNOTATION] = started_at
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": pvc_name(platform_name, attempt),
            "namespace": namespace,
            "labels": {ATTEMPT_LABEL: str(attempt)},
            "annotations": annotations,
        },
        "spec": spec,
    }


def result_annotations(result: str, finished_at: str, message: str) -> dict[str, str]:
    """What the PVC carries once the test ended (read back when the status write was lost)."""
    return {RESULT_ANNOTATION: result, FINISHED_ANNOTATION: finished_at, MESSAGE_ANNOTATION: message[:4000]}


def render_pod(*, platform_name: str, platform_uid: str, namespace: str, attempt: int, role: str) -> dict[str, Any]:
    """The writer (``role="write"``) or the reader (``role="read"``) pod."""
    if role not in ("write", "read"):
        raise ValueError(f"role must be write or read, not {role!r}")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(platform_name, attempt, role),
            "namespace": namespace,
            "labels": {ROLE_LABEL: role, ATTEMPT_LABEL: str(attempt), "sidecar.istio.io/inject": "false"},
            "annotations": {"sidecar.istio.io/inject": "false"},
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 5,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "runAsGroup": 65534,
                "fsGroup": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": role,
                    "image": IMAGE,
                    "command": ["sh", "-c", _WRITE if role == "write" else _READ],
                    "env": [{"name": "MARKER", "value": marker(platform_uid, attempt)}],
                    "volumeMounts": [{"name": "data", "mountPath": MOUNT}],
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "16Mi"},
                        "limits": {"memory": "32Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc_name(platform_name, attempt)}}],
        },
    }
