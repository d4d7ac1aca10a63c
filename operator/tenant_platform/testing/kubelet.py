"""A played provisioner and kubelet for the storage write test, on a control plane that has neither.

The checklist assumes a StorageClass whose volumes keep data when pods are replaced, and the
operator proves it by default (concerns/storage: a PVC, a pod writing a marker, a second pod
reading it back). The local control plane runs no scheduler, kubelet or provisioner, so the seeded
class ``local-path`` (testing/seed.py) would never pass. ``StorageKubelet`` plays those parts for
that test only, and only for classes whose provisioner it is told to serve (the seeded class's,
``rancher.io/local-path``):

- a test PVC of a served class is Bound (its status written as the binder would);
- a writer pod on it "writes" its ``MARKER`` onto the volume (kept here, per PVC uid) and Succeeds;
- a reader pod Succeeds when the volume holds its ``MARKER``, else Fails with exit code 3 and the
  reader's own message, as the busybox script does (concerns/storage/manifests.py).

Pods of any other class, and every other pod, are left alone: tests/integration/test_storage.py
uses a class of an absent provisioner to see the pending and time-out paths, and plays the
kubelet by hand there. It polls (one pod listing by label per round) in a daemon thread; it is
started by the test session's ``seeded`` fixture, by the fleet's tenant clusters and by
`tenant-platform dev`, and stopped with them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Final

from tenant_platform.api import constants
from tenant_platform.concerns.storage import manifests
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube

SEEDED_PROVISIONER: Final = "rancher.io/local-path"
SELECTOR: Final = f"{constants.LABEL_COMPONENT}={manifests.COMPONENT}"

Obj = dict[str, Any]


def _env(pod: Obj, name: str) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for var in container.get("env") or []:
            if var.get("name") == name:
                return str(var.get("value", ""))
    return None


def _claim(pod: Obj) -> str | None:
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = volume.get("persistentVolumeClaim")
        if claim:
            return str(claim.get("claimName"))
    return None


def _terminated(name: str, code: int, message: str) -> Obj:
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": name,
                "ready": False,
                "restartCount": 0,
                "image": manifests.IMAGE,
                "imageID": "",
                "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
                | ({"message": message} if code else {}),
            }
        ],
    }


class StorageKubelet:
    """Plays the provisioner and kubelet for the storage write test (see the module docstring)."""

    def __init__(self, kube: Kube, *, provisioners: Iterable[str] = (SEEDED_PROVISIONER,), interval: float = 0.2):
        self.kube = kube
        self.provisioners = frozenset(provisioners)
        self.interval = interval
        self.volumes: dict[str, str] = {}
        """What each served PVC (by uid) holds: the marker its writer wrote."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_kubeconfig(cls, path: str, **kwargs: Any) -> StorageKubelet:
        return cls(Kube.from_kubeconfig(path), **kwargs)

    def start(self) -> StorageKubelet:
        self._thread = threading.Thread(target=self._run, name="storage-kubelet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> StorageKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except errors.KubeError:
                continue  # the control plane is stopping, or a transient refusal: next round

    def _served(self, pvc: Obj) -> bool:
        name = (pvc.get("spec") or {}).get("storageClassName")
        if not name:
            return False
        storage_class = self.kube.get("storage.k8s.io/v1", "StorageClass", str(name))
        return storage_class is not None and storage_class.get("provisioner") in self.provisioners

    def step(self) -> int:
        """One round: every pending test pod on a served class runs to its end. The number run."""
        done = 0
        for pod in self.kube.list("v1", "Pod", label_selector=SELECTOR):
            meta = pod["metadata"]
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if meta.get("deletionTimestamp") or phase != "Pending":
                continue
            claim = _claim(pod)
            pvc = self.kube.get("v1", "PersistentVolumeClaim", claim, meta["namespace"]) if claim else None
            if pvc is None or not self._served(pvc):
                continue
            self._bind(pvc)
            self._run_pod(pod, pvc)
            done += 1
        return done

    def _bind(self, pvc: Obj) -> None:
        if (pvc.get("status") or {}).get("phase") == "Bound":
            return
        meta = pvc["metadata"]
        status = {"status": {"phase": "Bound", "accessModes": pvc["spec"].get("accessModes", [])}}
        self.kube.merge_patch(
            "v1", "PersistentVolumeClaim", meta["name"], status, namespace=meta["namespace"], subresource="status"
        )

    def _run_pod(self, pod: Obj, pvc: Obj) -> None:
        meta = pod["metadata"]
        role = (meta.get("labels") or {}).get(manifests.ROLE_LABEL)
        marker = _env(pod, "MARKER") or ""
        uid = str(pvc["metadata"].get("uid"))
        if role == "write":
            self.volumes[uid] = marker
            status = _terminated(role, 0, "")
        elif self.volumes.get(uid) == marker:
            status = _terminated(str(role), 0, "")
        else:
            status = _terminated(str(role), 3, "marker missing or changed on the volume")
        self.kube.merge_patch(
            "v1", "Pod", meta["name"], {"status": status}, namespace=meta["namespace"], subresource="status"
        )
