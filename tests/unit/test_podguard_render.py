"""The pod guard's rendering and its pure helpers (the CEL itself is judged by the API server in
tests/integration/test_podguard_*.py; the condition by tests/unit/test_podguard_evaluate.py)."""

from __future__ import annotations

import json
import re
from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.concerns.podguard import manifests, step, verdict
from tenant_platform.kube.client import parse_warnings

demo = partial(
    platform,
    "demo",
    namespace="kamiwaza",
    uid="u-1",
    additionalNamespaces=["kamiwaza-extensions"],
    domain="kamiwaza.example.com",
)


def variables(policy: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


SHARED = ["tenant-platform-pod-guard-deny", "tenant-platform-pod-guard-warn"]
SHARED += ["tenant-platform-exec-guard-deny", "tenant-platform-exec-guard-warn"]
LITERAL = manifests.GuardParam(("kamiwaza", "kamiwaza-extensions"), "Deny", ("mirror.example.com:5000/istio/proxyv2",))


def test_render_returns_four_policies_then_four_bindings_in_stable_order() -> None:
    objs = manifests.render()
    kinds = ["ValidatingAdmissionPolicy"] * 4 + ["ValidatingAdmissionPolicyBinding"] * 4
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == list(zip(kinds, SHARED * 2, strict=True))
    assert list(manifests.SHARED_NAMES) == SHARED
    assert all(o["apiVersion"] == "admissionregistration.k8s.io/v1" for o in objs)
    assert manifests.render() == objs


def test_shared_policies_fail_closed_and_match_the_namespaces_marked_with_their_enforcement() -> None:
    """The labelled guard: no parameter; each enforcement's policies select the namespaces whose
    label says it; istio-init's repositories from the namespace's annotation."""
    policies = manifests.render()[:4]
    for policy in policies:
        spec = policy["spec"]
        variant = "Deny" if policy["metadata"]["name"].endswith("-deny") else "Warn"
        assert spec["failurePolicy"] == "Fail"
        assert "paramKind" not in spec
        assert spec["matchConstraints"]["namespaceSelector"] == {
            "matchExpressions": [{"key": "tenancy.dev/pod-guard", "operator": "In", "values": [variant]}]
        }
        assert spec["matchConditions"][0]["expression"] == (
            f'request.namespace in [request.namespace] && "{variant}" == "{variant}"'
        )
        assert "params" not in json.dumps(spec)
    assert policies == manifests.render_labelled()[:4]
    for binding in manifests.render()[4:]:
        assert "paramRef" not in binding["spec"]


def test_the_parameter_guard_of_earlier_versions_takes_the_platform_as_parameter() -> None:
    policies = manifests.render_parameter_guard()[:4]
    assert all(manifests.is_parameter_guard(p) for p in policies)
    assert not any(manifests.is_parameter_guard(p) for p in manifests.render()[:4])
    for policy in policies:
        spec = policy["spec"]
        assert spec["failurePolicy"] == "Fail"
        assert spec["paramKind"] == {"apiVersion": "tenancy.dev/v1alpha1", "kind": "TenantPlatform"}
        assert spec["matchConstraints"]["namespaceSelector"] == {
            "matchExpressions": [{"key": "tenancy.dev/tenant-platform", "operator": "Exists"}]
        }
        guarded = spec["matchConditions"][0]
        variant = "Deny" if policy["metadata"]["name"].endswith("-deny") else "Warn"
        assert guarded == {
            "name": "guarded",
            "expression": "request.namespace in params.?status.?podGuard.?namespaces.orValue([]) && "
            f'params.?status.?podGuard.?enforcement.orValue("") == "{variant}"',
        }
    pod_policy, exec_policy = policies[0], policies[2]
    assert pod_policy["spec"]["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["pods", "pods/ephemeralcontainers"],
        }
    ]
    assert exec_policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CONNECT"], "resources": ["pods/exec", "pods/attach"]}
    ]
    assert "oldObject.spec" in pod_policy["spec"]["matchConditions"][1]["expression"]


def test_shared_bindings_bind_everyone_with_their_actions() -> None:
    for binding in manifests.render()[4:]:
        name = binding["metadata"]["name"]
        actions = ["Deny", "Audit"] if name.endswith("-deny") else ["Warn", "Audit"]
        assert binding["spec"] == {"policyName": name, "validationActions": actions}
    for binding in manifests.render_parameter_guard()[4:]:
        name = binding["metadata"]["name"]
        actions = ["Deny", "Audit"] if name.endswith("-deny") else ["Warn", "Audit"]
        assert binding["spec"] == {
            "policyName": name,
            "validationActions": actions,
            "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
        }


def test_a_target_clusters_guard_inlines_the_parameter() -> None:
    objs = manifests.render(LITERAL, "demo")
    assert [o["metadata"]["name"] for o in objs[:4]] == [n.replace("platform-", "platform-demo-") for n in SHARED]
    for policy in objs[:4]:
        spec = policy["spec"]
        assert "paramKind" not in spec
        assert spec["matchConstraints"]["namespaceSelector"] == {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["kamiwaza", "kamiwaza-extensions"]}
            ]
        }
        variant = "Deny" if policy["metadata"]["name"].endswith("-deny") else "Warn"
        assert spec["matchConditions"][0]["expression"] == (
            f'request.namespace in ["kamiwaza", "kamiwaza-extensions"] && "Deny" == "{variant}"'
        )
    assert json.loads(variables(objs[0])["proxyImageRepositories"]) == ["mirror.example.com:5000/istio/proxyv2"]
    for binding in objs[4:]:
        assert "paramRef" not in binding["spec"]


def test_every_validation_is_forbidden_with_a_message_naming_what_is_wrong() -> None:
    for policy in manifests.render()[:4]:
        for validation in policy["spec"]["validations"]:
            assert validation["reason"] == "Forbidden"
            assert validation["message"].endswith(".")
            assert validation["messageExpression"]


def test_variables_only_reference_earlier_variables() -> None:
    policy = manifests.render()[0]
    defined: list[str] = []
    for var in policy["spec"]["variables"]:
        for ref in re.findall(r"variables\.([A-Za-z0-9_]+)", var["expression"]):
            assert ref in defined, f"{var['name']} uses {ref} before it is defined"
        defined.append(var["name"])
    for validation in policy["spec"]["validations"]:
        text = validation["expression"] + validation["messageExpression"]
        assert set(re.findall(r"variables\.([A-Za-z0-9_]+)", text)) <= set(defined)


def test_constants_are_rendered_as_cel_list_literals_and_the_repositories_read_from_the_namespace() -> None:
    found = variables(manifests.render()[0])
    assert json.loads(found["baselineCapabilities"]) == list(manifests.BASELINE_CAPABILITIES)
    assert json.loads(found["safeSysctls"]) == list(manifests.SAFE_SYSCTLS)
    assert json.loads(found["istioInitCapabilities"]) == ["NET_ADMIN", "NET_RAW"]
    assert found["proxyImageRepositories"] == (
        'namespaceObject.metadata.?annotations.orValue({})[?"tenancy.dev/pod-guard-repositories"]'
        '.orValue("").split(",").filter(r, r != "")'
    )
    earlier = variables(manifests.render_parameter_guard()[0])
    assert earlier["proxyImageRepositories"] == "params.?status.?podGuard.?proxyImageRepositories.orValue([])"
    assert json.loads(found["tokenMountPath"]) == "/var/run/secrets/kubernetes.io/serviceaccount"
    problems = found["istioInitProblems"]
    assert 'startsWith(r + ":") || c.?image.orValue("").startsWith(r + "@")' in problems


@pytest.mark.parametrize(
    "repository",
    [
        "proxyv2",  # no '/': "proxyv2:" would also match "proxyv2:5000/anything"
        "localhost:5000",
        "docker.io/istio/proxyv2:1.28.0",
        "docker.io/istio/proxyv2@sha256:0123",
        "docker.io/Istio/proxyv2",
        'docker.io/istio/proxyv2", "evil',
        "docker.io/istio/proxyv2/",
        " docker.io/istio/proxyv2",
        "",
    ],
)
def test_unsafe_proxy_repositories_are_left_out_and_reported(repository: str) -> None:
    repos = ["docker.io/istio/proxyv2", repository]
    assert manifests.invalid_proxy_repositories(repos) == [repository]
    assert manifests.valid_proxy_repositories(repos) == ["docker.io/istio/proxyv2"]
    value = verdict.param(demo(podGuard={"proxyImageRepositories": repos}), "Deny", ["kamiwaza"])
    assert value.proxy_image_repositories == ("docker.io/istio/proxyv2",)


@pytest.mark.parametrize(
    "repository",
    ["docker.io/istio/proxyv2", "localhost:5000/proxyv2", "mirror.example.com:5000/a/b/proxyv2", "gcr.io/x_y/p-v2"],
)
def test_full_repository_names_are_accepted(repository: str) -> None:
    assert manifests.invalid_proxy_repositories([repository]) == []


def test_no_valid_repository_means_no_repository_at_all() -> None:
    assert (
        verdict.param(demo(podGuard={"proxyImageRepositories": ["proxyv2"]}), "Deny", []).proxy_image_repositories == ()
    )


def test_long_platform_names_give_valid_stable_distinct_names() -> None:
    long = "p" + "a" * 240
    names = manifests.all_names(long)
    assert names == manifests.all_names(long)
    assert all(len(n) <= 253 for n in names)
    assert len(set(names)) == 4
    assert names != manifests.all_names(long[:-1] + "b")
    assert not set(names) & set(manifests.SHARED_NAMES)


def test_step_render_adds_our_labels_and_no_platform() -> None:
    for obj in step.STEP.render(demo()):
        assert obj["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "tenant-platform-operator",
            "tenancy.dev/component": "podguard",
        }


# ---- pure helpers ---------------------------------------------------------------------------------


def test_actions_in_effect() -> None:
    assert verdict.actions_in_effect({"spec": {"validationActions": ["Audit", "Deny"]}}) == "Deny"
    assert verdict.actions_in_effect({"spec": {"validationActions": ["Warn", "Audit"]}}) == "Warn"
    assert verdict.actions_in_effect({"spec": {"validationActions": ["Deny"]}}) is None
    assert verdict.actions_in_effect(None) is None
    objs = manifests.render()
    assert verdict.guard_in_place(objs, "Deny")
    assert verdict.guard_in_place(objs, "Warn")
    assert not verdict.guard_in_place(objs[1:], "Deny")  # a policy missing
    wrong = [*objs[:4], {**objs[4], "spec": {**objs[4]["spec"], "validationActions": ["Audit"]}}, *objs[5:]]
    assert not verdict.guard_in_place(wrong, "Deny")
    assert verdict.guard_in_place(wrong, "Warn")


def test_guard_warnings_keeps_only_this_policys_messages() -> None:
    warnings = [
        "Validation failed for ValidatingAdmissionPolicy 'tenant-platform-demo-pod-guard' with binding "
        "'tenant-platform-demo-pod-guard': privileged containers are not allowed: app",
        'would violate PodSecurity "restricted:latest": privileged',
        "Validation failed for ValidatingAdmissionPolicy 'other' with binding 'other': x",
    ]
    assert verdict.guard_warnings(warnings, "tenant-platform-demo-pod-guard") == [
        "privileged containers are not allowed: app"
    ]


def test_parse_warnings_unescapes_and_splits() -> None:
    assert parse_warnings(['299 - "a \\"quoted\\" text"', '299 - "one", 299 - "two, with comma"']) == [
        'a "quoted" text',
        "one",
        "two, with comma",
    ]
    assert parse_warnings(["not a warning header"]) == ["not a warning header"]


@pytest.mark.parametrize("name", ["web", "a" * 63, "a" * 50 + ".b" * 6, "x" * 51 + "-guard-check", "p-"])
def test_check_name_is_short_distinct_and_valid(name: str) -> None:
    renamed = manifests.check_name(name)
    assert len(renamed) <= 63
    assert renamed != name
    assert renamed.endswith("-guard-check")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", renamed)


def test_resubmission_strips_server_and_node_fields() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "generateName": "web-",
            "namespace": "kamiwaza",
            "uid": "u",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet"}],
            "managedFields": [{}],
            "labels": {"app": "web"},
            "annotations": {"container.apparmor.security.beta.kubernetes.io/web": "unconfined"},
        },
        "spec": {
            "nodeName": "node-1",
            "priority": 0,
            "ephemeralContainers": [{"name": "debug"}],
            "containers": [{"name": "web", "image": "web:1"}],
        },
        "status": {"phase": "Running"},
    }
    body = manifests.resubmission(pod)
    assert body == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1-guard-check",
            "namespace": "kamiwaza",
            "labels": {"app": "web"},
            "annotations": {"container.apparmor.security.beta.kubernetes.io/web": "unconfined"},
        },
        "spec": {"containers": [{"name": "web", "image": "web:1"}]},
    }
    assert pod["spec"]["nodeName"] == "node-1"  # the original is untouched


def test_staged_check_examples_are_capped() -> None:
    check = verdict.StagedCheck(violators=[(f"ns/p{i}", [f"reason {i}"]) for i in range(7)])
    assert check.examples() == [f"ns/p{i}: reason {i}" for i in range(5)]
    assert not check.clean
    assert verdict.StagedCheck().clean


# ---- the injector canary (Istio's ProxyImage/ProxyInitImage and injection template) ----------------


@pytest.mark.parametrize(
    ("values", "init_image", "proxy_image", "cni"),
    [
        pytest.param(
            {"global": {"hub": "docker.io/istio", "tag": "1.28.0"}},
            "docker.io/istio/proxyv2:1.28.0",
            "docker.io/istio/proxyv2:1.28.0",
            False,
            id="hub and tag",
        ),
        pytest.param(
            {"global": {"hub": "docker.io/istio", "tag": "1.28.0", "variant": "distroless"}},
            "docker.io/istio/proxyv2:1.28.0-distroless",
            "docker.io/istio/proxyv2:1.28.0-distroless",
            False,
            id="variant appended",
        ),
        pytest.param(
            {"global": {"hub": "h.io/i", "tag": "1.28.0-debug", "variant": "distroless"}},
            "h.io/i/proxyv2:1.28.0-distroless",
            "h.io/i/proxyv2:1.28.0-distroless",
            False,
            id="variant replaces a known one in the tag",
        ),
        pytest.param(
            {"global": {"hub": "h.io/i", "tag": "1.28.0", "variant": "default"}},
            "h.io/i/proxyv2:1.28.0",
            "h.io/i/proxyv2:1.28.0",
            False,
            id="default variant adds nothing",
        ),
        pytest.param(
            {
                "global": {
                    "hub": "h.io/i",
                    "tag": "1.28.0",
                    "proxy_init": {"image": "m.io/x/proxyv2:9"},
                    "proxy": {"image": "custom"},
                }
            },
            "m.io/x/proxyv2:9",
            "h.io/i/custom:1.28.0",
            False,
            id="an image with a slash is used as is",
        ),
        pytest.param(
            {"global": {"hub": "h.io/i", "tag": "1.28.0"}, "pilot": {"cni": {"enabled": True}}},
            "h.io/i/proxyv2:1.28.0",
            "h.io/i/proxyv2:1.28.0",
            True,
            id="cni",
        ),
    ],
)
def test_injector_from_values(values: dict[str, Any], init_image: str, proxy_image: str, cni: bool) -> None:
    injector = manifests.injector_from_values(values)
    assert (injector.init_image, injector.proxy_image, injector.cni) == (init_image, proxy_image, cni)


def test_injected_canary_classic_and_cni() -> None:
    classic = manifests.injected_canary("ns", manifests.injector_from_values({"global": {"hub": "h.io/i", "tag": "1"}}))
    init = classic["spec"]["initContainers"][0]
    assert init["name"] == "istio-init"
    assert init["args"][0] == "istio-iptables"
    assert init["securityContext"]["capabilities"] == {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]}
    assert classic["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    cni = manifests.injected_canary(
        "ns", manifests.injector_from_values({"global": {"hub": "h", "tag": "1"}, "pilot": {"cni": {"enabled": True}}})
    )
    init = cni["spec"]["initContainers"][0]
    assert init["name"] == "istio-validation"
    assert "add" not in init["securityContext"]["capabilities"]
    assert init["args"][-2:] == ["--run-validation", "--skip-rule-apply"]


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("docker.io/istio/proxyv2:1.28.0", "docker.io/istio/proxyv2"),
        ("m.io:5000/istio/proxyv2:1", "m.io:5000/istio/proxyv2"),
        ("m.io:5000/istio/proxyv2", "m.io:5000/istio/proxyv2"),
        ("docker.io/istio/proxyv2@sha256:ab", "docker.io/istio/proxyv2"),
    ],
)
def test_repository_of(image: str, repository: str) -> None:
    assert manifests.repository_of(image) == repository


def test_the_retained_guard_has_fixed_names_no_parameter_and_matches_the_marked_namespaces() -> None:
    """The guard of namespaces a deleted platform left (docs/pod-guard.md "Removal"): exec guards,
    then pod guards, then their bindings; each enforcement's matches the namespaces marked with it."""
    objs = step.retained_objects()
    names = [o["metadata"]["name"] for o in objs]
    assert names == [*manifests.RETAINED_NAMES, *manifests.RETAINED_NAMES]
    assert set(manifests.RETAINED_NAMES).isdisjoint(manifests.SHARED_NAMES)
    assert all(
        n.startswith(("tenant-platform-pod-guard-retained-", "tenant-platform-exec-guard-retained-")) for n in names
    )
    for obj in objs:
        assert obj["metadata"]["labels"] == step.shared_labels()
        enforcement = "Deny" if obj["metadata"]["name"].endswith("-deny") else "Warn"
        if obj["kind"] == manifests.POLICY_KIND:
            assert "paramKind" not in obj["spec"]
            assert obj["spec"]["failurePolicy"] == "Fail"
            assert obj["spec"]["matchConstraints"]["namespaceSelector"] == {
                "matchExpressions": [{"key": manifests.RETAINED_LABEL, "operator": "In", "values": [enforcement]}]
            }
        else:
            assert "paramRef" not in obj["spec"] and "matchResources" not in obj["spec"]
            assert obj["spec"]["validationActions"] == manifests.ACTIONS[enforcement]
    pod_guard = next(o for o in objs if o["metadata"]["name"] == manifests.retained_names("Deny").pod_guard)
    canary = pod_guard["spec"]["validations"][0]
    assert manifests.RETAINED_CANARY_ANNOTATION in canary["expression"]
    assert canary["message"] == manifests.RETAINED_CANARY_MESSAGE
    repositories = next(v for v in pod_guard["spec"]["variables"] if v["name"] == "proxyImageRepositories")
    assert manifests.RETAINED_ANNOTATION in repositories["expression"]
    # The shared guard has no canary rule.
    assert all("canary" not in str(v) for p in manifests.render() for v in p["spec"].get("validations", []))


def test_the_retained_mark() -> None:
    mark = manifests.retained_mark("kamiwaza", "Deny", ["docker.io/istio/proxyv2", "mirror.example.com/istio/proxyv2"])
    assert mark["metadata"] == {
        "name": "kamiwaza",
        "labels": {manifests.RETAINED_LABEL: "Deny"},
        "annotations": {manifests.RETAINED_ANNOTATION: "docker.io/istio/proxyv2,mirror.example.com/istio/proxyv2"},
    }
    canary = manifests.retained_canary("kamiwaza")
    assert canary["metadata"]["annotations"] == {manifests.RETAINED_CANARY_ANNOTATION: "true"}
    assert "hostPID" not in canary["spec"]
