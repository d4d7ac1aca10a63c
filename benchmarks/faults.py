"""Fault suite against the real local control plane: two operator processes under deploy/ RBAC
behind the Lease, and faults injected while several platforms get their first reconcile.

Faults (each in a round of its own, on freshly created platforms):
  - ``kill``: SIGKILL of the Lease holder at a random moment of the first reconcile (the killed
    replica is started again at once, as the kubelet would: two replicas throughout);
  - ``apiserver``: kube-apiserver stopped for ``--outage`` seconds during the first reconcile;
  - ``etcd``: etcd killed (SIGKILL) and restarted during the first reconcile.

After each fault every platform must converge: Ready (observedGeneration current), exactly one
Corefile block each and no other block, its namespace claimed and no other, the GPU node labels
as in a fault-free round, the shared pod guard in place and each platform's parameter at Deny
(Staged promoted),
one kubeconfig Secret and one edge certificate Secret, no storage write test objects but the
recorded attempt's. Then the platforms are deleted and nothing of theirs may remain (no Corefile
block, claim, node label, per-platform policy or storage test object; the shared pod guard
stays). A bystander namespace, ConfigMap and node label are compared byte for byte after every
round. Reported: faults injected, seconds from
the fault (for outages: from the component's return) to convergence, and leaks found.

    .venv/bin/python -m benchmarks.faults [--kills 20] [--outage 20] [--etcd 1] [--platforms 3] [--json]
    .venv/bin/python -m benchmarks.faults --markdown   # the table for docs/reliability.md

tests/e2e/test_faults.py runs a short version (3 kills, a 5 s outage, one etcd restart).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tenant_platform import devmode
from tenant_platform.api import constants
from tenant_platform.concerns.podguard.manifests import API_VERSION, BINDING_KIND, POLICY_KIND, SHARED_NAMES
from tenant_platform.concerns.storage.manifests import ATTEMPT_LABEL, COMPONENT
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.main import LEASE_NAME
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import (
    OPERATOR_NAMESPACE,
    RunningOperator,
    operator_kubeconfig,
    start_operator,
)

SAMPLE = Path(__file__).resolve().parents[1] / "deploy" / "samples" / "tenantplatform.yaml"
ELECTION = {
    "TENANT_PLATFORM_LEASE_DURATION": "4",
    "TENANT_PLATFORM_RENEW_DEADLINE": "3",
    "TENANT_PLATFORM_RETRY_PERIOD": "0.5",
}
LEASE = ("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE)
GPU_LABEL = ("gpu", "on")
BYSTANDER = "fault-bystander"
BYSTANDER_LABEL = "example.com/fault-bystander"
CONVERGE_TIMEOUT = 240.0
CLEANUP_TIMEOUT = 120.0
KILL_WINDOW = 6.0
"""A kill lands uniformly within this many seconds after the platforms are created."""


def platform(name: str, *, verify: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    body["metadata"] = {"name": name}
    spec = body["spec"]
    spec.update(namespace=name, additionalNamespaces=[], domain=f"{name}.example.com", deletionPolicy="Retain")
    spec["installer"]["serviceAccountName"] = "installer"
    spec["gateway"]["name"] = f"{name}-gateway"
    spec["edgeCertificate"]["secretName"] = f"{name}-edge-tls"
    spec["storage"] = {"storageClassName": "", "verify": verify}
    return body


def _get(kube: Kube, *args: Any) -> Any:
    try:
        return kube.get(*args)
    except errors.KubeError:
        return None


# ---- two replicas, restarted when they exit --------------------------------------------------


class Replicas:
    """Two operator processes; a supervisor thread starts a replica again when it exits (a leader
    that could not renew steps down and exits 1, as in a Deployment). Credentials are minted once,
    so a replica can start while the API server is down."""

    def __init__(self, cp: ControlPlane, admin: Kube, work: Path, drift_interval: float = 10) -> None:
        self.cp, self.admin, self.work = cp, admin, work
        self.drift_interval = drift_interval
        self.credentials = operator_kubeconfig(cp, admin, work / "operator.kubeconfig")
        self.slots: dict[str, RunningOperator] = {}
        self.starts = 0
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        for name in ("op-a", "op-b"):
            self._start(name)
        self.thread = threading.Thread(target=self._supervise, daemon=True)
        self.thread.start()

    def _start(self, name: str) -> None:
        self.starts += 1
        work = self.work / f"{name}-{self.starts}"
        work.mkdir(parents=True)
        self.slots[name] = start_operator(
            self.cp,
            self.admin,
            work,
            drift_interval=self.drift_interval,
            extra_env={**ELECTION, "TENANT_PLATFORM_IDENTITY": name},
            credentials=self.credentials,
        )

    def _supervise(self) -> None:
        while not self.stop_flag.wait(0.3):
            with self.lock:
                for name, op in list(self.slots.items()):
                    if op.process.poll() is not None:
                        self._start(name)

    def holder(self) -> str:
        lease = _get(self.admin, *LEASE) or {}
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def kill_leader(self) -> str:
        """SIGKILL the Lease holder (restarted by the supervisor); returns its name ("" if none)."""
        name = self.holder()
        with self.lock:
            op = self.slots.get(name)
            if op is None:
                return ""
            op.process.send_signal(signal.SIGKILL)
            op.process.wait(10)
            self._start(name)
        return name

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{op.log()[-3000:]}" for n, op in self.slots.items())

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join()
        for op in self.slots.values():
            op.stop()


# ---- invariants ----------------------------------------------------------------------------


def corefile(kube: Kube) -> str:
    cm = _get(kube, "v1", "ConfigMap", "coredns", "kube-system") or {}
    return str((cm.get("data") or {}).get("Corefile") or "")


def gpu_labelled(kube: Kube) -> set[str]:
    key, value = GPU_LABEL
    return {n["metadata"]["name"] for n in kube.list("v1", "Node", label_selector=f"{key}={value}")}


def _labelled(kube: Kube, api: str, kind: str, name: str, namespace: str | None = None, **extra: str) -> list[Any]:
    selector = ",".join([f"{constants.LABEL_PLATFORM}={name}", *(f"{k}={v}" for k, v in extra.items())])
    return [
        o
        for o in kube.list(api, kind, namespace, label_selector=selector)
        if not o["metadata"].get("deletionTimestamp")
    ]


def storage_objects(kube: Kube, name: str) -> list[Any]:
    comp = {constants.LABEL_COMPONENT: COMPONENT}
    return [
        # In the platform's namespace (here named as the platform), where the write test runs.
        *_labelled(kube, "v1", "PersistentVolumeClaim", name, name, **comp),
        *_labelled(kube, "v1", "Pod", name, name, **comp),
    ]


def is_ready(body: dict[str, Any] | None) -> bool:
    if not body:
        return False
    status = body.get("status") or {}
    return status.get("observedGeneration") == body["metadata"]["generation"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def problems(kube: Kube, names: list[str], gpu_nodes: set[str] | None, storage_probe: str | None) -> list[str]:
    """What is not yet as intended for the live platforms ``names`` (empty: converged)."""
    out: list[str] = []
    text = corefile(kube)
    blocks = text.count("# BEGIN tenant-platform ")
    expected = len(names) + (storage_probe is not None)
    if blocks != expected:
        out.append(f"{blocks} Corefile blocks for {expected} platforms")
    for name in names:
        body = _get(kube, constants.API_VERSION, constants.KIND, name)
        if not is_ready(body):
            out.append(f"{name} not Ready")
        if text.count(f"# BEGIN tenant-platform {name}\n") != 1:
            out.append(f"{name}: Corefile blocks {text.count(f'# BEGIN tenant-platform {name}')}")
        claims = {n["metadata"]["name"] for n in _labelled(kube, "v1", "Namespace", name)}
        if claims != {name}:
            out.append(f"{name}: namespace claims {sorted(claims)}")
        guard = ((body or {}).get("status") or {}).get("podGuard") or {}
        if (guard.get("enforcement"), guard.get("namespaces")) != ("Deny", [name]):
            out.append(f"{name}: pod guard parameter {guard.get('enforcement')} over {guard.get('namespaces')}")
        for kind in (POLICY_KIND, BINDING_KIND):
            for shared in SHARED_NAMES:
                if _get(kube, API_VERSION, kind, shared) is None:
                    out.append(f"shared pod guard {kind} {shared} missing")
        kubeconfigs = _labelled(kube, "v1", "Secret", name, name, **{constants.LABEL_COMPONENT: "installer"})
        if len(kubeconfigs) != 1:
            out.append(f"{name}: {len(kubeconfigs)} kubeconfig Secrets")
        certs = _labelled(kube, "v1", "Secret", name, "istio-system", **{constants.LABEL_COMPONENT: "edgecert"})
        if len(certs) != 1:
            out.append(f"{name}: {len(certs)} edge certificate Secrets")
        out.extend(_storage_problems(kube, name, body))
    if storage_probe is not None:
        out.extend(
            _storage_problems(kube, storage_probe, _get(kube, constants.API_VERSION, constants.KIND, storage_probe))
        )
    if gpu_nodes is not None and (labelled := gpu_labelled(kube)) != gpu_nodes:
        out.append(f"gpu=on on {sorted(labelled)}, want {sorted(gpu_nodes)}")
    return out


def _storage_problems(kube: Kube, name: str, body: dict[str, Any] | None) -> list[str]:
    """Storage write test objects other than the recorded running attempt's."""
    memory = (((body or {}).get("status") or {}).get("recorded") or {}).get("storageVerification") or {}
    running = memory.get("attempt") if memory.get("result") == "Running" else None
    stray = sorted(
        o["metadata"]["name"]
        for o in storage_objects(kube, name)
        if (o["metadata"].get("labels") or {}).get(ATTEMPT_LABEL) != str(running)
    )
    return [f"{name}: storage test objects not recorded: {stray}"] if stray else []


def leftovers(kube: Kube, names: list[str], gpu_before: set[str]) -> list[str]:
    """What the deleted platforms ``names`` left behind."""
    out: list[str] = []
    text = corefile(kube)
    for name in names:
        if _get(kube, constants.API_VERSION, constants.KIND, name) is not None:
            out.append(f"{name} still exists")
        if f"tenant-platform {name}\n" in text:
            out.append(f"{name}: Corefile block left")
        for api, kind, ns in (
            ("v1", "Namespace", None),
            (API_VERSION, POLICY_KIND, None),
            (API_VERSION, BINDING_KIND, None),
        ):
            if left := _labelled(kube, api, kind, name, ns):
                out.append(f"{name}: {kind} {[o['metadata']['name'] for o in left]} left")
        if left := storage_objects(kube, name):
            out.append(f"{name}: storage test objects {[o['metadata']['name'] for o in left]} left")
    if (labelled := gpu_labelled(kube)) != gpu_before:
        out.append(f"gpu=on on {sorted(labelled)} after deletion, want {sorted(gpu_before)}")
    return out


# ---- someone else's data --------------------------------------------------------------------


def plant_bystander(kube: Kube) -> Callable[[], list[str]]:
    """A namespace with a ConfigMap and a label on a node, none of them ours; returns a check
    comparing them byte for byte (resourceVersion included) with how they were planted."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BYSTANDER, "labels": {"team": "b"}}})
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "keep", "namespace": BYSTANDER},
            "data": {"Corefile": "not yours", "blob": "x" * 4096},
        },
        field_manager="bystander",
    )
    node = sorted(n["metadata"]["name"] for n in kube.list("v1", "Node"))[0]
    kube.merge_patch("v1", "Node", node, {"metadata": {"labels": {BYSTANDER_LABEL: "keep"}}})

    def state() -> str:
        ns = kube.get("v1", "Namespace", BYSTANDER) or {}
        cm = kube.get("v1", "ConfigMap", "keep", BYSTANDER) or {}
        labels = ((kube.get("v1", "Node", node) or {}).get("metadata") or {}).get("labels") or {}
        return json.dumps([ns.get("metadata"), cm, {BYSTANDER_LABEL: labels.get(BYSTANDER_LABEL)}], sort_keys=True)

    before = state()
    return lambda: [] if state() == before else ["the bystander namespace, ConfigMap or node label changed"]


# ---- the suite ------------------------------------------------------------------------------


@dataclass
class FaultResult:
    fault: str
    detail: str
    converge_seconds: float
    cleanup_seconds: float
    leaks: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _wait(check: Callable[[], list[str]], timeout: float) -> tuple[float, list[str]]:
    began = time.monotonic()
    last: list[str] = ["not checked"]
    while time.monotonic() - began < timeout:
        try:
            last = check()
        except errors.KubeError as exc:  # the API server coming back
            last = [f"API: {exc}"]
        if not last:
            return time.monotonic() - began, []
        time.sleep(0.5)
    return time.monotonic() - began, last


class Suite:
    def __init__(self, cp: ControlPlane, admin: Kube, work: Path, *, platforms: int, seed_: int) -> None:
        self.cp, self.admin, self.work = cp, admin, work
        self.count = platforms
        self.rng = random.Random(seed_)
        self.round = 0
        self.gpu_before = gpu_labelled(admin)
        self.bystander = plant_bystander(admin)
        self.replicas = Replicas(cp, admin, work)
        self.gpu_intended: set[str] | None = None
        self.kubelet_stop = threading.Event()
        self.kubelet = threading.Thread(target=self._play_kubelet, daemon=True)
        self.kubelet.start()

    def _play_kubelet(self) -> None:
        """No kubelet here: storage test pods are reported Succeeded once created."""
        selector = f"{constants.LABEL_COMPONENT}={COMPONENT}"
        while not self.kubelet_stop.wait(1.0):
            with contextlib.suppress(errors.KubeError):
                for pod in self.admin.list("v1", "Pod", label_selector=selector):
                    if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                        self.admin.merge_patch(
                            "v1",
                            "Pod",
                            pod["metadata"]["name"],
                            {"status": {"phase": "Succeeded"}},
                            namespace=pod["metadata"]["namespace"],
                            subresource="status",
                        )

    def names(self) -> list[str]:
        return [f"f{self.round}-{i}" for i in range(self.count)]

    def run(self, fault: str, inject: Callable[[], tuple[str, float]]) -> FaultResult:
        """Create the round's platforms, inject the fault (``inject`` returns its description and
        the monotonic time convergence is measured from), converge, delete, check for leaks."""
        self.round += 1
        names = self.names()
        probe = f"{names[0]}-storage"
        for name in names:
            self.admin.apply(platform(name))
        self.admin.apply(platform(probe, verify=True))
        detail, since = inject()
        _, failures = _wait(lambda: problems(self.admin, names, self.gpu_intended, probe), CONVERGE_TIMEOUT)
        converged = time.monotonic() - since
        if self.gpu_intended is None and not failures:
            self.gpu_intended = gpu_labelled(self.admin)
        failures += self.bystander()
        for name in [*names, probe]:
            with contextlib.suppress(errors.NotFound):
                self.admin.delete(constants.API_VERSION, constants.KIND, name)
        cleanup, leaks = _wait(lambda: leftovers(self.admin, [*names, probe], self.gpu_before), CLEANUP_TIMEOUT)
        leaks += self.bystander()
        return FaultResult(fault, detail, round(converged, 1), round(cleanup, 1), leaks, failures)

    # -- the faults --

    def clean(self) -> FaultResult:
        return self.run("none", lambda: ("no fault (reference round)", time.monotonic()))

    def kill(self) -> FaultResult:
        def inject() -> tuple[str, float]:
            delay = self.rng.uniform(0.0, KILL_WINDOW)
            time.sleep(delay)
            killed = self.replicas.kill_leader()
            return (
                f"SIGKILL {killed or 'nobody (no holder yet)'} {delay:.1f}s into the first reconcile",
                time.monotonic(),
            )

        return self.run("kill", inject)

    def apiserver(self, outage: float) -> FaultResult:
        def inject() -> tuple[str, float]:
            delay = self.rng.uniform(0.5, 3.0)
            time.sleep(delay)
            self.cp.stop_component("kube-apiserver")
            time.sleep(outage)
            self.cp.start_component("kube-apiserver")
            return f"kube-apiserver stopped {outage:.0f}s, {delay:.1f}s into the first reconcile", time.monotonic()

        return self.run("apiserver", inject)

    def etcd(self) -> FaultResult:
        def inject() -> tuple[str, float]:
            delay = self.rng.uniform(0.5, 3.0)
            time.sleep(delay)
            took = self.cp.restart_component("etcd", kill=True)
            return (
                f"etcd SIGKILLed and restarted ({took:.1f}s), {delay:.1f}s into the first reconcile",
                time.monotonic(),
            )

        return self.run("etcd", inject)

    def close(self) -> None:
        self.kubelet_stop.set()
        self.kubelet.join()
        self.replicas.stop()


@contextlib.contextmanager
def suite(*, platforms: int = 3, seed_: int = 1) -> Iterator[Suite]:
    """A fresh control plane (faults stop its components), seeded, with the CRD and two replicas."""
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as work:
        admin = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(admin)
        seed.seed_cluster(str(cp.kubeconfig_path))
        s = Suite(cp, admin, Path(work), platforms=platforms, seed_=seed_)
        try:
            yield s
        finally:
            s.close()


def run_suite(*, kills: int, outage: float, etcd_restarts: int, platforms: int, seed_: int = 1) -> list[FaultResult]:
    results: list[FaultResult] = []
    with suite(platforms=platforms, seed_=seed_) as s:
        results.append(s.clean())
        for _ in range(kills):
            results.append(s.kill())
        if outage > 0:
            results.append(s.apiserver(outage))
        for _ in range(etcd_restarts):
            results.append(s.etcd())
    return results


def markdown(results: list[FaultResult], *, platforms: int) -> str:
    faults = [r for r in results if r.fault != "none"]
    lines = [
        f"{len(faults)} faults injected, each while {platforms} platforms (and one with the storage write test) "
        "had their first reconcile; two replicas throughout.",
        "",
        "| # | fault | converged after (s) | cleanup after deletion (s) | leaks | failures |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(results):
        lines.append(
            f"| {i} | {r.detail} | {r.converge_seconds} | {r.cleanup_seconds} | {len(r.leaks)} | "
            f"{'; '.join(r.failures) or 0} |"
        )
    kills = [r.converge_seconds for r in faults if r.fault == "kill"]
    if kills:
        lines += [
            "",
            f"Kills: {len(kills)}; seconds to converge after the kill: median {statistics.median(kills):.1f}, "
            f"max {max(kills):.1f}. Leaks found: {sum(len(r.leaks) for r in results)}. "
            f"Rounds not converged: {sum(1 for r in results if r.failures)}.",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--outage", type=float, default=20.0)
    parser.add_argument("--etcd", type=int, default=1)
    parser.add_argument("--platforms", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    results = run_suite(
        kills=args.kills, outage=args.outage, etcd_restarts=args.etcd, platforms=args.platforms, seed_=args.seed
    )
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        print(markdown(results, platforms=args.platforms))


if __name__ == "__main__":
    main()
