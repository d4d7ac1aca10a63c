"""Install from the release artifacts, reach a Ready platform, uninstall as docs/uninstall.md says,
and find nothing of ours left but what that page says is kept.

On a control plane of its own (with the controller manager: namespace deletion and garbage
collection), seeded like the session's, in two rounds:

1. the packaged chart of dist/ installed as docs/install.md says (`helm install`; the Deployment runs
   exactly the image of the release's OCI archive, by the reference the archive carries), upgraded
   as docs/upgrade.md says, then the documented uninstall with `helm uninstall`: only the CRD is
   left (kept, as documented), and step 3 deletes it;
2. the single install manifest of dist/ (`kubectl apply --server-side -f`), the same, with the
   uninstall for a manifest or kustomize install: only the CRD, then nothing, is left.

There is no kubelet, so the Deployment's pods never run: the operator runs as a local process
under the ServiceAccount the artifact installed (a TokenRequest token; tenant_platform.testing.
operator), i.e. under the shipped RBAC and admission fences, as the e2e tests run it. It stops when
the uninstall would delete its Deployment. That the image the Deployment names runs the operator
is tests/image/'s part: it runs the same build the archive holds (its image ID is the archive's
config digest) as the Deployment would, in-cluster, to a Ready platform.

"Ours" is every object, of every kind the API server lists, whose labels, annotations, name,
namespace or content (managedFields aside) names the operator, its API group or the platform, and
that was not there before the install (the seed).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import release_image

from tenant_platform import __version__
from tenant_platform.api import constants
from tenant_platform.kube.client import Kube
from tenant_platform.testing import seed, tools
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.kubelet import StorageKubelet
from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA, RunningOperator, start_operator
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.timeout(1500)

ROOT = Path(__file__).resolve().parents[2]
V = __version__
IMAGE = f"ghcr.io/tenancy-dev/tenant-platform-operator:{V}"
UNINSTALL = ROOT / "docs" / "uninstall.md"
INSTALL = ROOT / "docs" / "install.md"
UPGRADE = ROOT / "docs" / "upgrade.md"
RELEASE_URL = f"https://github.com/tenancy-dev/tenant-platform-operator/releases/download/v{V}"
CHART_REF = "oci://ghcr.io/tenancy-dev/charts/tenant-platform"
PLATFORM = "uninst"
MARKERS = re.compile(r"tenancy\.dev|tenant-platform|tenantplatform|\buninst\b|uninst-")
# Not ours to clean: events expire on their own (the API server's TTL, one hour), and a
# TokenReview/SubjectAccessReview is never stored.
SKIP_RESOURCES = {"events", "events.events.k8s.io"}

Obj = dict[str, Any]
Key = tuple[str, str, str]


def docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d]


def documented(doc: Path, section: str) -> list[str]:
    """The commands of the first `sh` block of one section ('## ' or '### ' heading) of a doc page,
    one per logical line."""
    text = doc.read_text()
    match = re.search(rf"^#{{2,3}} {re.escape(section)}\n(.*?)(?=^#{{2,3}} |\Z)", text, re.M | re.S)
    assert match, f"{doc.name} has no section '{section}'"
    block = re.search(r"```sh\n(.*?)```", match.group(1), re.S)
    assert block, f"no sh block in {doc.name}, '{section}'"
    commands = []
    for raw in block.group(1).replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        if line and not line.startswith("#"):
            commands.append(" ".join(line.split()))
    return commands


def ours(cp: ControlPlane) -> dict[Key, Obj]:
    """Every listable object that names us (see the module docstring)."""
    names = cp.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    found: dict[Key, Obj] = {}
    for resource in names:
        if resource in SKIP_RESOURCES:
            continue
        proc = cp.kubectl("get", resource, "--all-namespaces", "-o", "json", check=False)
        if proc.returncode != 0:
            continue  # a kind whose CRD went away meanwhile
        for item in json.loads(proc.stdout).get("items", []):
            meta = item.get("metadata", {})
            meta.pop("managedFields", None)
            for field in ("resourceVersion", "uid", "creationTimestamp", "generation"):
                meta.pop(field, None)
            item.pop("status", None)
            if MARKERS.search(json.dumps(item)):
                found[(resource, meta.get("namespace", ""), meta["name"])] = item
    return found


def sample() -> Obj:
    body: Obj = yaml.safe_load((ROOT / "deploy" / "samples" / "tenantplatform.yaml").read_text())
    body["metadata"] = {"name": PLATFORM}
    body["spec"].update(namespace=PLATFORM, additionalNamespaces=[f"{PLATFORM}-ext"], domain=f"{PLATFORM}.example.com")
    body["spec"]["deletionPolicy"] = "Delete"
    body["spec"]["installer"]["serviceAccountName"] = "installer"
    body["spec"]["gateway"]["name"] = f"{PLATFORM}-gateway"
    body["spec"]["edgeCertificate"]["secretName"] = f"{PLATFORM}-edge-tls"
    return body


def ready(kube: Kube) -> bool:
    body = kube.get(constants.API_VERSION, constants.KIND, PLATFORM) or {}
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def run_operator(cp: ControlPlane, admin: Kube, work: Path) -> RunningOperator:
    """The operator under the ServiceAccount the artifact installed (not deploy/base applied anew)."""
    token, _ = admin.request_token(OPERATOR_NAMESPACE, OPERATOR_SA, expiration_seconds=3600)
    kubeconfig = cp.kubeconfig_for_token(token, work / "operator.kubeconfig")
    doc: Obj = yaml.safe_load(kubeconfig.read_text())
    for ctx in doc.get("contexts", []):
        ctx["context"]["namespace"] = OPERATOR_NAMESPACE
    kubeconfig.write_text(yaml.safe_dump(doc))
    return start_operator(cp, admin, work, drift_interval=4, credentials=(kubeconfig, token))


def shell(cp: ControlPlane, command: str) -> None:
    """One documented command, with this control plane's kubectl or helm."""
    args = command.split()
    if args[0] == "kubectl":
        proc = cp.kubectl(*args[1:], check=False, timeout=900)
    elif args[0] == "helm":
        proc = subprocess.run(
            [str(tools.tool_path("helm")), *args[1:], f"--kubeconfig={cp.kubeconfig_path}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    else:
        raise AssertionError(f"docs/uninstall.md: unexpected command {command}")
    assert proc.returncode == 0, f"{command}:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[ControlPlane, Kube, dict[Key, Obj]]]:
    with ControlPlane() as cp:
        seed.seed_cluster(cp.kubeconfig_path)
        admin = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        # The seeded StorageClass's provisioner and kubelet, played as in the session's cluster:
        # the sample proves its storage (the write test is on by default).
        with StorageKubelet.for_kubeconfig(str(cp.kubeconfig_path)):
            yield cp, admin, ours(cp)


def install_and_reach_ready(
    cp: ControlPlane, admin: Kube, work: Path, install: list[str], upgrade: list[str], *, image: str
) -> None:
    """The install commands (a rollout status would wait for pods that never come: no kubelet), the
    operator under the installed RBAC, a TenantPlatform Ready, the upgrade commands (the platform
    stays Ready), then docs/uninstall.md step 1."""
    for command in install:
        if "rollout status" not in command:
            shell(cp, command)
    cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{constants.CRD_NAME}")
    deployments = json.loads(cp.kubectl("get", "deployments", "-n", OPERATOR_NAMESPACE, "-o", "json").stdout)
    (deployment,) = deployments["items"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
    operator = run_operator(cp, admin, work)
    try:
        admin.apply(sample())

        def explain() -> str:
            body = admin.get(constants.API_VERSION, constants.KIND, PLATFORM) or {}
            return yaml.safe_dump(body.get("status")) + operator.log()[-3000:]

        wait_for(lambda: ready(admin), f"{PLATFORM} Ready", 180, interval=0.5, context=explain)
        for command in upgrade:
            shell(cp, command)
        deployments = json.loads(cp.kubectl("get", "deployments", "-n", OPERATOR_NAMESPACE, "-o", "json").stdout)
        assert [d["spec"]["template"]["spec"]["containers"][0]["image"] for d in deployments["items"]] == [image]
        assert ready(admin)
        for command in documented(UNINSTALL, "1. Delete the TenantPlatforms"):
            shell(cp, command)
        assert admin.get(constants.API_VERSION, constants.KIND, PLATFORM) is None
    finally:
        operator.stop()  # what the next step, deleting the Deployment, does to its pods


def left(cp: ControlPlane, before: dict[Key, Obj]) -> dict[Key, Obj]:
    return {k: o for k, o in ours(cp).items() if before.get(k) != o}


def assert_left(cp: ControlPlane, before: dict[Key, Obj], expected: set[Key]) -> None:
    """Namespace deletion and garbage collection take a moment: wait for exactly ``expected``."""
    wait_for(
        lambda: set(left(cp, before)) == expected,
        f"nothing of ours left but {sorted(expected)}",
        120,
        interval=1,
        context=lambda: "left:\n" + "\n".join(map(str, sorted(left(cp, before)))),
    )


# The kept CRD, and the APIService the API server serves it under (gone with the CRD).
CRD_KEPT = {
    ("customresourcedefinitions.apiextensions.k8s.io", "", constants.CRD_NAME),
    ("apiservices.apiregistration.k8s.io", "", f"{constants.VERSION}.{constants.GROUP}"),
}


def test_helm_install_from_the_package_then_helm_uninstall(
    cluster: tuple[ControlPlane, Kube, dict[Key, Obj]], dist: Path, tmp_path: Path
) -> None:
    cp, admin, before = cluster
    install = documented(INSTALL, "With Helm, from the chart")
    chart = dist / f"tenant-platform-{V}.tgz"
    assert any(CHART_REF in c for c in install)
    install = [c.replace(CHART_REF, str(chart)) for c in install]
    upgrade = documented(UPGRADE, "Helm")
    assert upgrade == [
        "helm upgrade tenant-platform <chart> --namespace tenant-platform-system --reset-then-reuse-values "
        "--version <new chart version>"
    ]
    upgrade = [c.replace("<chart>", str(chart)).replace("<new chart version>", V) for c in upgrade]
    image = release_image(dist).reference
    assert image == IMAGE
    install_and_reach_ready(cp, admin, tmp_path, install, upgrade, image=image)
    for command in documented(UNINSTALL, "Helm"):
        shell(cp, command)
    assert_left(cp, before, CRD_KEPT)  # kept, as docs/uninstall.md says
    for command in documented(UNINSTALL, "3. The CRD (optional, last)"):
        shell(cp, command)
    assert_left(cp, before, set())


def test_manifest_install_then_the_documented_uninstall(
    cluster: tuple[ControlPlane, Kube, dict[Key, Obj]], dist: Path, tmp_path: Path
) -> None:
    cp, admin, before = cluster
    install = documented(INSTALL, "With kubectl, from the install manifest")
    url = f"{RELEASE_URL}/tenant-platform-operator.yaml"
    assert any(url in c for c in install)
    install = [c.replace(url, str(dist / "tenant-platform-operator.yaml")) for c in install]
    upgrade = documented(UPGRADE, "The install manifest")
    assert any(url in c for c in upgrade)
    upgrade = [c.replace(url, str(dist / "tenant-platform-operator.yaml")) for c in upgrade]
    image = release_image(dist).reference
    assert image == IMAGE
    install_and_reach_ready(cp, admin, tmp_path, install, upgrade, image=image)
    for command in documented(UNINSTALL, "The install manifest or kustomize"):
        shell(cp, command)
    assert_left(cp, before, CRD_KEPT)
    for command in documented(UNINSTALL, "3. The CRD (optional, last)"):
        shell(cp, command)
    assert_left(cp, before, set())
