"""concerns/podguard/verdict.py: PodGuardReady decided from facts alone, one row per reason; the staged
enforcement decisions (target, check, promotion) and the ``status.podGuard`` section."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api import reasons
from tenant_platform.concerns.podguard import manifests, step, takeover
from tenant_platform.concerns.podguard import verdict as pg
from tenant_platform.concerns.podguard.check import InjectedCheck, StagedCheck
from tenant_platform.concerns.podguard.step import Facts
from tenant_platform.concerns.podguard.verdict import Applied, PodGuardFacts
from tenant_platform.config import Settings
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import StepContext
from tenant_platform.framework.contract import Given
from tenant_platform.kube import errors
from tenant_platform.reconcile import pipeline

DENY, WARN = manifests.guard_names("Deny"), manifests.guard_names("Warn")
POD, EXEC = DENY.pod_guard, DENY.exec_guard
VAP, VAPB = manifests.POLICY_KIND, manifests.BINDING_KIND
NAMESPACES = ("kamiwaza", "kamiwaza-extensions")
REPOSITORIES = (
    "registry.istio.io/release/proxyv2",
    "docker.io/istio/proxyv2",
    "ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2",
)
PARAM_FIELDS = {"namespaces": list(NAMESPACES), "proxyImageRepositories": list(REPOSITORIES)}


demo = partial(
    platform,
    "demo",
    namespace="kamiwaza",
    uid="u-1",
    additionalNamespaces=["kamiwaza-extensions"],
    domain="kamiwaza.example.com",
)


def policy(name: str, *, generation: int = 1, observed: int | None = 1, warnings: tuple[str, ...] = ()) -> pg.Obj:
    status: dict[str, Any] = {}
    if observed is not None:
        status["observedGeneration"] = observed
    if warnings:
        status["typeChecking"] = {
            "expressionWarnings": [{"fieldRef": "spec.validations[0].expression", "warning": w} for w in warnings]
        }
    return {"kind": VAP, "metadata": {"name": name, "generation": generation}, "status": status}


def binding(name: str, mode: str) -> pg.Obj:
    return {"kind": VAPB, "metadata": {"name": name}, "spec": {"validationActions": manifests.ACTIONS[mode]}}


def objects(**policy_kw: Any) -> tuple[pg.Obj, ...]:
    """The four shared policies, then their bindings (each at its own actions)."""
    policies = [policy(POD, **policy_kw), policy(EXEC), policy(WARN.pod_guard), policy(WARN.exec_guard)]
    bindings = [binding(n.pod_guard, m) for n, m in ((DENY, "Deny"), (WARN, "Warn"))]
    bindings += [binding(n.exec_guard, m) for n, m in ((DENY, "Deny"), (WARN, "Warn"))]
    return (*policies, *bindings)


def live(present: bool = True) -> dict[pg.Ref, pg.Obj | None]:
    found: dict[pg.Ref, pg.Obj | None] = {(kind, name): None for name in manifests.SHARED_NAMES for kind in (VAP, VAPB)}
    if present:
        for obj in objects():
            found[pg.ref(obj)] = obj
    return found


def param(mode: manifests.Enforcement) -> manifests.GuardParam:
    return manifests.GuardParam(NAMESPACES, mode, REPOSITORIES)


def marks(mode: manifests.Enforcement) -> dict[str, manifests.Mark | None]:
    """Every namespace marked with ``mode`` and the repositories."""
    return {ns: manifests.mark_for(mode, REPOSITORIES) for ns in NAMESPACES}


def mark_patches(mode: manifests.Enforcement) -> list[pg.Obj]:
    return [manifests.guard_mark(ns, manifests.mark_for(mode, REPOSITORIES)) for ns in NAMESPACES]


def facts(mode: manifests.Enforcement, **changes: Any) -> PodGuardFacts:
    """One pass that applied cleanly, its parameter at ``mode`` on the API server, its namespaces
    marked with it."""
    base: dict[str, Any] = {
        "live": live(),
        "param": param(mode),
        "param_written": True,
        "applied": Applied(objects=objects()),
        "marks": marks(mode),
    }
    return PodGuardFacts(**{**base, **changes})


VIOLATORS = StagedCheck(checked=2, violators=[("kamiwaza/bad", ["hostPath volumes are not allowed: host"])])
SOURCE = "istio-system/istio-sidecar-injector"
MIRROR_IMAGE = "ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2:1.28.0"
IMAGE_DENIAL = (
    "the init container istio-init may add NET_ADMIN and NET_RAW only in the exact shape Istio injects: its "
    "image must start with one of the allowed prefixes"
)


def injector(**values: Any) -> manifests.Injector:
    base: dict[str, Any] = {"global": {"hub": "ghcr.io/kamiwaza-internal/containers/images/istio", "tag": "1.28.0"}}
    base.update(values)
    return manifests.injector_from_values(base)


def injected(reasons_: tuple[str, ...] = (IMAGE_DENIAL,), **values: Any) -> StagedCheck:
    check = InjectedCheck(source=SOURCE, injector=injector(**values), reasons=reasons_)
    return StagedCheck(checked=1, injected=check)


@dataclass(frozen=True)
class Row:
    name: str
    facts: PodGuardFacts
    spec: dict[str, Any]
    status: str
    reason: str
    fragment: str
    dry_run: bool = False
    progressing: bool = False
    requeue: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


ROWS = [
    Row(
        "deny in place",
        facts("Deny"),
        {"enforcement": "Deny"},
        "True",
        reasons.PodGuard.ENFORCING,
        f"deny violating requests in kamiwaza, kamiwaza-extensions (policies {POD} and {EXEC}, for the "
        "namespaces labelled tenancy.dev/pod-guard=Deny, bound with [Deny, Audit]).",
    ),
    Row(
        "warn in place",
        facts("Warn"),
        {"enforcement": "Warn"},
        "True",
        reasons.PodGuard.WARN_ONLY,
        f"warn in kamiwaza, kamiwaza-extensions (policies {WARN.pod_guard} and {WARN.exec_guard}, for the "
        "namespaces labelled tenancy.dev/pod-guard=Warn, bound with [Warn, Audit]): violating requests are admitted "
        "with a warning",
    ),
    Row(
        "parameter not on the API server yet",
        facts("Deny", param_written=False),
        {"enforcement": "Deny"},
        "False",
        reasons.PodGuard.ENFORCEMENT_PENDING,
        "The pod guard is at None, not yet at the requested Deny.",
        progressing=True,
    ),
    Row(
        "staged check finds violators",
        facts("Warn", check=VIOLATORS),
        {},
        "False",
        reasons.PodGuard.VIOLATING_PODS_FOUND,
        "1 existing pod(s) would be denied: kamiwaza/bad: hostPath volumes are not allowed: host. The guards "
        "stay at [Warn, Audit]",
        progressing=True,
        requeue=pg.STAGED_REQUEUE_SECONDS,
    ),
    Row(
        "the live injector's pod would be denied (image)",
        facts("Warn", check=injected()),
        {},
        "False",
        reasons.PodGuard.INJECTED_POD_WOULD_BE_DENIED,
        f"a pod injected the way the injector in {SOURCE} injects (istio-init image {MIRROR_IMAGE}, CNI off) would "
        f"be denied: {IMAGE_DENIAL}. To fix: add ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2 to "
        "spec.podGuard.proxyImageRepositories, or point the injector's global.hub (now "
        "ghcr.io/kamiwaza-internal/containers/images/istio) at an allowed repository.",
        progressing=True,
        requeue=pg.STAGED_REQUEUE_SECONDS,
    ),
    Row(
        "the live injector's pod would be denied (privileged proxy)",
        facts(
            "Warn",
            check=injected(
                ("privileged containers are not allowed: istio-validation",),
                pilot={"cni": {"enabled": True}},
                **{"global": {"hub": "docker.io/istio", "tag": "1.28.0", "proxy": {"privileged": True}}},
            ),
        ),
        {},
        "False",
        reasons.PodGuard.INJECTED_POD_WOULD_BE_DENIED,
        "(istio-validation image docker.io/istio/proxyv2:1.28.0, CNI on) would be denied: privileged containers "
        "are not allowed: istio-validation. To fix: the injector sets global.proxy.privileged true",
        progressing=True,
        requeue=pg.STAGED_REQUEUE_SECONDS,
    ),
    Row(
        "the live injector's pod could not be checked",
        facts("Warn", check=StagedCheck(injected=InjectedCheck(source=SOURCE, error="its data.values is bad"))),
        {},
        "False",
        reasons.PodGuard.PODS_NOT_CHECKED,
        f"a pod injected the way the injector in {SOURCE} injects could not be checked: its data.values is bad.",
        progressing=True,
        requeue=pg.STAGED_REQUEUE_SECONDS,
    ),
    Row(
        "staged check cannot re-submit a pod",
        facts("Warn", check=StagedCheck(unchecked=[("kamiwaza/web", "the dry run failed: exceeded quota")])),
        {},
        "False",
        reasons.PodGuard.PODS_NOT_CHECKED,
        "1 pod(s) could not be re-submitted as a dry run, so the guard cannot tell whether they would be "
        "denied: kamiwaza/web: the dry run failed: exceeded quota.",
        progressing=True,
        requeue=pg.STAGED_REQUEUE_SECONDS,
    ),
    Row(
        "staged check: policy not loaded yet",
        facts("Warn", check=StagedCheck(inactive=["kamiwaza (the guard did not warn about a canary pod yet)"])),
        {},
        "False",
        reasons.PodGuard.WAITING_FOR_POLICY,
        "waiting for the API server to load the pod guard policy in: kamiwaza (the guard did not warn",
        progressing=True,
        requeue=pg.STAGED_REQUEUE_SECONDS,
    ),
    Row(
        "type-checking warnings on a policy",
        facts("Deny", applied=Applied(objects=objects(warnings=("undefined field 'x'\nmore",)))),
        {"enforcement": "Deny"},
        "False",
        reasons.PodGuard.TYPE_CHECKING_WARNINGS,
        f"(an operator bug; please report it): {POD} spec.validations[0].expression: undefined field 'x'.",
    ),
    Row(
        "proxy repository without a slash",
        facts("Deny"),
        {"enforcement": "Deny", "proxyImageRepositories": ["proxyv2", "docker.io/istio/proxyv2"]},
        "False",
        reasons.PodGuard.INVALID_PROXY_IMAGE_REPOSITORY,
        "cannot be matched safely: 'proxyv2'. Give full repository names",
    ),
    Row(
        "kinds not served",
        PodGuardFacts(served=False, server_version="v1.29.4"),
        {},
        "False",
        reasons.PodGuard.UNSUPPORTED_KUBERNETES_VERSION,
        "Kubernetes v1.29.4 does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy",
        extra={"section": {"enforcement": "None", "requested": "Staged"}},
    ),
    Row(
        "dry run: a binding differs",
        facts("Deny", applied=Applied(objects=objects(), would_apply=(f"{VAPB} {POD}",))),
        {"enforcement": "Deny"},
        "False",
        reasons.PodGuard.WOULD_APPLY,
        f"the operator would apply: {VAPB} {POD}. With enforcement Staged",
        dry_run=True,
    ),
    Row(
        "dry run: staged check clean",
        facts("Warn", check=StagedCheck(checked=3)),
        {},
        "False",
        reasons.PodGuard.WOULD_ENFORCE,
        "Staged enforcement found no pod that would be denied; the next reconcile switches",
        dry_run=True,
    ),
    Row(
        "apply refused by RBAC",
        facts("Deny", applied=Applied(errors=(f"{VAP} {POD}: forbidden",), forbidden=True)),
        {"enforcement": "Deny"},
        "False",
        reasons.Common.FORBIDDEN,
        f"Could not apply the pod guard policies: {VAP} {POD}: forbidden. Grant the operator the RBAC in deploy/",
        progressing=True,
    ),
    Row(
        "apply failed otherwise",
        facts("Deny", applied=Applied(errors=(f"{VAP} {POD}: webhook said no",))),
        {"enforcement": "Deny"},
        "False",
        reasons.Common.API_ERROR,
        f"Could not apply the pod guard policies: {VAP} {POD}: webhook said no.",
        progressing=True,
    ),
    Row(
        "writing the parameter failed",
        facts("Deny", param_written=False, param_error="the server is busy"),
        {"enforcement": "Deny"},
        "False",
        reasons.Common.API_ERROR,
        "Could not write the pod guard's parameter (status.podGuard), which the shared policies read: the server "
        "is busy.",
        progressing=True,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_condition(row: Row) -> None:
    verdict = pg.evaluate(demo(podGuard=row.spec), row.facts, dry_run=row.dry_run)
    cond = verdict.condition
    assert (cond.type, cond.status, cond.reason) == ("PodGuardReady", row.status, row.reason), cond.message
    assert row.fragment in cond.message
    assert (verdict.progressing, verdict.requeue_after) == (row.progressing, row.requeue)
    if "section" in row.extra:
        assert verdict.sections == {"podGuard": row.extra["section"]}


# The takeover's reasons: their rows are in tests/unit/test_podguard_takeover.py (TAKEOVER_ROWS).
TAKEOVER_REASONS = [
    reasons.PodGuard.HAND_MADE_GUARD_REDUNDANT,
    reasons.PodGuard.HAND_MADE_GUARD_COVERS_MORE,
    reasons.PodGuard.TAKEOVER_BLOCKED,
]


def test_every_reason_has_a_row() -> None:
    covered = {r.reason for r in ROWS} | set(TAKEOVER_REASONS)
    assert set(reasons.PodGuard) <= covered
    assert {reasons.Common.FORBIDDEN, reasons.Common.API_ERROR} <= covered


# ---- the staged enforcement state machine ----------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "previous", "hand_made_denies", "expected"),
    [
        ("Deny", None, False, "Deny"),
        ("Deny", {"requested": "Deny", "enforcement": "Warn"}, False, "Deny"),
        ("Warn", None, False, "Warn"),
        ("Warn", {"requested": "Warn", "enforcement": "Deny"}, False, "Warn"),
        ("Warn", None, True, "Warn"),  # never above what the spec asks (TakeoverBlocked says so)
        ("Staged", None, False, "Warn"),
        ("Staged", {"requested": "Staged", "enforcement": "Warn"}, False, "Warn"),
        ("Staged", {"requested": "Staged", "enforcement": "Deny"}, False, "Deny"),  # promoted earlier: stays
        ("Staged", {"requested": "Deny", "enforcement": "Deny"}, False, "Deny"),  # from Deny: never steps down
        ("Staged", {"requested": "Warn", "enforcement": "Warn"}, False, "Warn"),  # from Warn: checks first
        ("Staged", None, True, "Deny"),  # a hand-made guard denies: never below it
    ],
)
def test_target(requested: str, previous: dict[str, Any] | None, hand_made_denies: bool, expected: str) -> None:
    status = {"podGuard": previous} if previous else None
    assert (
        pg.target(demo(status=status, podGuard={"enforcement": requested}), hand_made_denies=hand_made_denies)
        == expected
    )


@pytest.mark.parametrize(
    ("requested", "changes", "expected"),
    [
        ("Staged", {}, True),
        ("Staged", {"param": param("Deny")}, False),
        ("Warn", {}, False),
        ("Staged", {"applied": Applied(errors=("x",))}, False),
        ("Staged", {"applied": Applied(would_apply=("x",))}, False),
        ("Staged", {"param_written": False}, False),  # the API server must read the parameter first
    ],
)
def test_wants_check(requested: str, changes: dict[str, Any], expected: bool) -> None:
    assert pg.wants_check(demo(podGuard={"enforcement": requested}), facts("Warn", **changes)) is expected


def test_promotes_only_a_clean_check_and_never_in_a_dry_run() -> None:
    assert pg.promotes(StagedCheck(checked=2), dry_run=False)
    assert not pg.promotes(StagedCheck(checked=2), dry_run=True)
    assert not pg.promotes(VIOLATORS, dry_run=False)
    assert not pg.promotes(StagedCheck(unchecked=[("a/b", "x")]), dry_run=False)
    assert not pg.promotes(StagedCheck(inactive=["a"]), dry_run=False)
    assert not pg.promotes(injected(), dry_run=False)
    assert pg.promotes(injected(()), dry_run=False)


def test_promotion_is_enforcing_with_an_event_and_the_check_recorded() -> None:
    passed = facts("Deny", check=StagedCheck(checked=2), promoted=True, applied=Applied(objects=objects(), written=2))
    verdict = pg.evaluate(demo(), passed, dry_run=False)
    assert verdict.condition.reason == reasons.PodGuard.ENFORCING
    assert "Staged enforcement found no pod that would be denied." in verdict.condition.message
    assert verdict.requeue_after == pg.TYPE_CHECK_REQUEUE_SECONDS  # written: pick up type checking
    assert verdict.events == [
        (
            "Normal",
            "PodGuardEnforcing",
            "No existing pod in kamiwaza, kamiwaza-extensions would be denied: the pod guard and exec guard now "
            "deny (staged enforcement complete).",
        )
    ]
    assert verdict.sections == {
        "podGuard": {
            "enforcement": "Deny",
            "requested": "Staged",
            **PARAM_FIELDS,
            "podsThatWouldBeDenied": 0,
            "examples": [],
        }
    }


def test_no_event_when_the_promotion_failed() -> None:
    failed = facts("Deny", promoted=True, applied=Applied(errors=("x",)))
    assert pg.evaluate(demo(), failed, dry_run=False).events == []
    unwritten = facts("Deny", promoted=True, param_written=False, param_error="x")
    assert pg.evaluate(demo(), unwritten, dry_run=False).events == []


# ---- status.podGuard ------------------------------------------------------------------------------


def test_section_after_a_check() -> None:
    check = StagedCheck(violators=[(f"ns/p{i}", [f"reason {i}"]) for i in range(7)], unchecked=[("ns/q", "quota")])
    verdict = pg.evaluate(demo(), facts("Warn", check=check), dry_run=False)
    assert verdict.sections["podGuard"] == {
        "enforcement": "Warn",
        "requested": "Staged",
        **PARAM_FIELDS,
        "podsThatWouldBeDenied": 7,
        "examples": [f"ns/p{i}: reason {i}" for i in range(5)],
        "podsNotChecked": 1,
    }
    assert "7 existing pod(s) would be denied: ns/p0: reason 0;" in verdict.condition.message
    assert "ns/p5" not in verdict.condition.message  # at most five examples


def test_section_once_promoted_keeps_the_last_check_only_for_staged() -> None:
    previous = {"podGuard": {"enforcement": "Deny", "podsThatWouldBeDenied": 0, "examples": [], "podsNotChecked": 3}}
    staged = pg.evaluate(demo(status=previous), facts("Deny"), dry_run=False)
    assert staged.sections["podGuard"] == {
        "enforcement": "Deny",
        "requested": "Staged",
        **PARAM_FIELDS,
        "podsThatWouldBeDenied": 0,
        "examples": [],
    }
    deny = pg.evaluate(demo(status=previous, podGuard={"enforcement": "Deny"}), facts("Deny"), dry_run=False)
    assert deny.sections["podGuard"] == {"enforcement": "Deny", "requested": "Deny", **PARAM_FIELDS}


def test_in_effect_in_a_dry_run_is_what_was_found() -> None:
    # In a dry run nothing is applied: what is in effect is what was found.
    found = facts("Deny", applied=Applied())
    assert pg.in_effect(found, platform_name="demo", dry_run=True) == "Deny"
    assert pg.in_effect(found, platform_name="demo", dry_run=False) == "None"
    assert pg.in_effect(facts("Deny", live=live(False)), platform_name="demo", dry_run=True) == "None"


def test_a_failed_apply_never_switches_the_parameter_off() -> None:
    """status.podGuard.enforcement is what the shared policies read: it stays the parameter's."""
    failed = facts("Deny", applied=Applied(errors=("x",)))
    verdict = pg.evaluate(demo(podGuard={"enforcement": "Deny"}), failed, dry_run=False)
    assert verdict.condition.status == "False"
    assert verdict.sections["podGuard"]["enforcement"] == "Deny"


def test_the_parameter_is_the_owned_namespaces_and_the_valid_repositories() -> None:
    spec = demo(podGuard={"enforcement": "Staged", "proxyImageRepositories": ["proxyv2", "docker.io/istio/proxyv2"]})
    value = pg.param(spec, "Warn", ["kamiwaza"])
    assert pg.param_fields(value) == {
        "namespaces": ["kamiwaza"],
        "enforcement": "Warn",
        "proxyImageRepositories": ["docker.io/istio/proxyv2"],
    }
    assert pg.param_written({**pg.param_fields(value), "requested": "Staged"}, value)
    assert not pg.param_written({**pg.param_fields(value), "namespaces": []}, value)


def test_type_checking_not_reported_yet_is_noted() -> None:
    pending = facts("Deny", applied=Applied(objects=objects(generation=2, observed=1)))
    verdict = pg.evaluate(demo(podGuard={"enforcement": "Deny"}), pending, dry_run=False)
    assert verdict.condition.reason == reasons.PodGuard.ENFORCING
    assert verdict.condition.message.endswith(" The API server has not reported type checking for the policies yet.")


def test_denied_by_guard_reads_the_denial() -> None:
    message = f"admission webhook denied: ValidatingAdmissionPolicy '{POD}' with binding '{POD}' denied request: no"
    assert pg.denied_by_guard(message, POD) == ["no"]
    assert pg.denied_by_guard("exceeded quota", POD) is None


# ---- the rounds of a pass (pg.writes, pg.judged) and the step's evaluate ------------------------


def found(mode: manifests.Enforcement, **changes: Any) -> PodGuardFacts:
    """Round 1 of a pass: the guard, the parameter and the marks (at ``mode``) as found, nothing
    written yet."""
    base: dict[str, Any] = {"live": live(), "namespaces": NAMESPACES, "applied": Applied(), "marks": marks(mode)}
    return PodGuardFacts(**{**base, **changes})


def test_round_one_applies_the_guard_and_publishes_the_parameter_the_api_server_lacks() -> None:
    held = {"enforcement": "Warn", **PARAM_FIELDS, "requested": "Staged", "podsThatWouldBeDenied": 1}
    verdict = pg.writes(demo(), found("Warn", found={**held, "enforcement": "Deny", "namespaces": []}), dry_run=False)
    assert verdict is not None
    assert verdict.again and verdict.conditions == []
    # The namespaces' marks at Deny first (found at Warn), then the guard.
    assert verdict.desired == [*mark_patches("Deny"), *manifests.render()]
    marked = pg.writes(demo(), found("Warn", found=held), dry_run=False)
    assert marked is not None and marked.desired == manifests.render()  # marked already: the guard only
    # Staged, at Deny already: it stays there; the merge patch keeps what the API server holds.
    assert verdict.publish == ("podGuard",)
    assert verdict.sections == {"podGuard": {**held, "enforcement": "Deny"}}
    # Held already (as found, or as this pass published it): nothing to publish.
    as_found = pg.writes(demo(), found("Warn", found=held), dry_run=False)
    assert as_found is not None and not as_found.publish
    unheld = found("Warn")
    as_published = pg.writes(demo(), unheld, dry_run=False, written=held)
    assert as_published is not None and not as_published.publish
    # A dry run publishes nothing (it lists the parameter among what it would apply: pg.judged).
    dry = pg.writes(demo(), unheld, dry_run=True)
    assert dry is not None and dry.again and not dry.publish and not dry.sections


def test_round_one_in_a_target_cluster_applies_the_platforms_own_guard() -> None:
    verdict = pg.writes(demo(podGuard={"enforcement": "Deny"}), found("Deny", shared=False), dry_run=False)
    assert verdict is not None and verdict.again and not verdict.publish
    assert verdict.desired == manifests.render(param("Deny"), "demo")


def test_round_two_promotes_after_a_clean_check_and_otherwise_judges() -> None:
    held = {"enforcement": "Warn", **PARAM_FIELDS}
    checked = found("Warn", round=2, found=held, check=StagedCheck(checked=2))
    shared = pg.writes(demo(), checked, dry_run=False)
    # The promotion: the marks at Deny (the labelled guard reads them), the parameter published.
    assert shared is not None and shared.again and shared.desired == mark_patches("Deny")
    assert shared.sections == {"podGuard": {**held, "enforcement": "Deny"}}
    target = pg.writes(demo(), dataclasses.replace(checked, shared=False), dry_run=False)
    assert target is not None and target.again and not target.publish
    assert target.desired == manifests.render(param("Deny"), "demo")
    assert pg.writes(demo(), checked, dry_run=True) is None  # never promoted in a dry run
    assert pg.writes(demo(), dataclasses.replace(checked, check=VIOLATORS), dry_run=False) is None
    assert pg.writes(demo(), found("Warn", round=2, found=held), dry_run=False) is None
    assert pg.writes(demo(), dataclasses.replace(checked, round=3), dry_run=False) is None


def test_judged_facts() -> None:
    held = {"enforcement": "Warn", **PARAM_FIELDS}
    plain = pg.judged(demo(), found("Warn", round=2, found=held), dry_run=False)
    assert (plain.param, plain.param_written, plain.promoted, plain.param_error) == (param("Warn"), True, False, "")
    # In a dry run a parameter the API server lacks is listed among what would be applied.
    dry = pg.judged(demo(), found("Warn", round=2), dry_run=True)
    assert not dry.param_written and dry.applied.would_apply == (pg.PARAM_WOULD_APPLY,)
    assert pg.judged(demo(), found("Warn", round=2), dry_run=False).applied.would_apply == ()
    # Published in this pass: held; publishing failed: why.
    published = pg.judged(demo(), found("Warn", round=2), dry_run=False, written={**held, "requested": "Staged"})
    assert published.param_written
    failed = pg.judged(demo(), found("Warn", round=2), dry_run=False, publish_error="the server is busy")
    assert (failed.param_written, failed.param_error) == (False, "the server is busy")
    # Promoted in this pass: the last round, after a clean check.
    deny = {**held, "enforcement": "Deny"}
    promoted = pg.judged(demo(), found("Warn", round=3, check=StagedCheck(checked=1)), dry_run=False, written=deny)
    assert (promoted.param, promoted.param_written, promoted.promoted) == (param("Deny"), True, True)
    target = pg.judged(demo(), found("Warn", round=2, shared=False), dry_run=True)
    assert not target.param_written and target.applied.would_apply == ()


def test_a_failed_write_fails_the_verdict() -> None:
    assert not pg.evaluate(demo(), facts("Warn"), dry_run=False).failed
    assert pg.evaluate(demo(), facts("Warn", applied=Applied(errors=("x",))), dry_run=False).failed
    assert pg.evaluate(demo(), facts("Warn", param_written=False, param_error="x"), dry_run=False).failed


def given(spec: dict[str, Any], *, dry_run: bool = False, **written: Any) -> Given:
    return Given(
        platform=demo(podGuard=spec) if spec else demo(),
        now=datetime(2026, 1, 1, tzinfo=UTC),
        settings=Settings(),
        dry_run=dry_run,
        status_written=written,
    )


def test_the_step_judges_a_failed_publish_of_the_parameter() -> None:
    """reconcile/pipeline.py maps a section whose publish failed to the error, for the next round."""
    round_two = Facts(found("Deny", round=2, applied=Applied(objects=objects())), takeover.HandMade())
    busy = errors.KubeError(503, "ServiceUnavailable", "the server is busy")
    verdict = step.STEP.evaluate(given({"enforcement": "Deny"}, podGuard=busy), round_two)
    assert (verdict.condition.reason, verdict.failed, verdict.progressing) == (reasons.Common.API_ERROR, True, True)
    assert verdict.condition.message == (
        "Could not write the pod guard's parameter (status.podGuard), which the shared policies read: the server "
        "is busy."
    )
    assert verdict.sections["podGuard"]["enforcement"] == "Deny"  # the section stays the parameter's
    published = {"enforcement": "Deny", **PARAM_FIELDS}
    done = step.STEP.evaluate(given({"enforcement": "Deny"}, podGuard=published), round_two)
    assert (done.condition.reason, done.failed, done.again) == (reasons.PodGuard.ENFORCING, False, False)


def test_the_step_names_a_redundant_hand_made_guard_only_when_nothing_was_written_in_the_pass() -> None:
    hand = takeover.HandMade(bindings=("mine",), denying=("mine",))
    held = {"enforcement": "Deny", **PARAM_FIELDS}
    settled = Facts(found("Deny", round=2, found=held, applied=Applied(objects=objects())), hand)
    verdict = step.STEP.evaluate(given({"enforcement": "Deny"}), settled)
    assert verdict.condition.reason == reasons.PodGuard.HAND_MADE_GUARD_REDUNDANT
    written = step.STEP.evaluate(given({"enforcement": "Deny"}, podGuard=held), settled)
    assert written.condition.reason == reasons.PodGuard.ENFORCING
    assert "is still needed" in written.condition.message


class PublishingStep:
    """A step that publishes a section and judges, in its next round, whether that worked."""

    name = "publishing"
    condition_types: tuple[str, ...] = ("PodGuardReady",)

    def __init__(self, *, again: bool = True) -> None:
        self.again = again
        self.seen: list[Any] = []

    def gather(self, ctx: Any) -> None:
        return None

    def evaluate(self, given: Given, facts: None) -> Verdict:
        self.seen.append(given.status_written.get("podGuard"))
        if len(self.seen) == 1:
            return Verdict([], sections={"podGuard": {"enforcement": "Deny"}}, publish=("podGuard",), again=self.again)
        return Verdict([])

    def apply(self, ctx: Any, facts: None, verdict: Verdict) -> Verdict:
        return verdict


class RefusingStatus:
    def merge_patch(self, *args: Any, **kwargs: Any) -> None:
        raise errors.KubeError(503, "ServiceUnavailable", "the server is busy")


def test_a_failed_publish_goes_to_the_next_round_or_escapes() -> None:
    """reconcile/pipeline.py run_rounds: a section whose publish failed is not recorded; the next
    round's Given maps it to the error; with no next round the error escapes (run_step's)."""
    ctx = StepContext(platform=demo(), kube=RefusingStatus(), settings=Settings(), now=datetime(2026, 1, 1, tzinfo=UTC))  # type: ignore[arg-type]
    judging = PublishingStep()
    pipeline.run_rounds(judging, ctx)  # type: ignore[arg-type]
    assert judging.seen[0] is None
    assert isinstance(judging.seen[1], errors.KubeError) and judging.seen[1].message == "the server is busy"
    assert ctx.status_written == {}
    with pytest.raises(errors.KubeError):
        pipeline.run_rounds(PublishingStep(again=False), ctx)  # type: ignore[arg-type]


# ---- the labelled guard: the namespaces' marks and the switch from the parameter guard -----------


def test_the_guard_is_in_effect_only_where_every_namespace_carries_its_mark() -> None:
    assert pg.in_effect(facts("Deny"), platform_name="demo", dry_run=False) == "Deny"
    unmarked = facts("Deny", marks={**marks("Deny"), "kamiwaza-extensions": ("", "")})
    assert pg.in_effect(unmarked, platform_name="demo", dry_run=False) == "None"
    warned = facts("Deny", marks={**marks("Deny"), "kamiwaza": ("Warn", ",".join(REPOSITORIES))})
    assert pg.in_effect(warned, platform_name="demo", dry_run=False) == "None"
    other_repositories = facts("Deny", marks={**marks("Deny"), "kamiwaza": ("Deny", "docker.io/istio/proxyv2")})
    assert pg.in_effect(other_repositories, platform_name="demo", dry_run=False) == "None"
    # A namespace that does not exist has nothing to guard.
    gone = facts("Deny", marks={**marks("Deny"), "kamiwaza-extensions": None})
    assert pg.in_effect(gone, platform_name="demo", dry_run=False) == "Deny"
    # What this pass's writes left counts (not in a dry run: nothing was written).
    patched = {"kind": "Namespace", "metadata": {"name": "kamiwaza-extensions", **mark_patches("Deny")[1]["metadata"]}}
    written = dataclasses.replace(unmarked, applied=Applied(objects=(*objects(), patched)))
    assert pg.in_effect(written, platform_name="demo", dry_run=False) == "Deny"
    assert pg.in_effect(dataclasses.replace(written, live=live()), platform_name="demo", dry_run=True) == "None"
    verdict = pg.evaluate(demo(podGuard={"enforcement": "Deny"}), unmarked, dry_run=False)
    assert verdict.condition.reason == reasons.PodGuard.ENFORCEMENT_PENDING


def test_marks_are_written_where_they_differ_and_removed_where_the_platform_no_longer_owns() -> None:
    value = param("Deny")
    assert pg.marks_to_write(found("Deny"), value) == []
    assert pg.marks_to_write(found("Warn"), value) == mark_patches("Deny")
    left = found("Deny", marks={**marks("Deny"), "released": ("Deny", "x/y"), "never": ("", ""), "gone": None})
    assert pg.marks_to_write(left, value) == [manifests.guard_mark("released", None)]
    assert manifests.guard_mark("released", None)["metadata"] == {
        "name": "released",
        "labels": {manifests.GUARD_LABEL: None},
        "annotations": {manifests.GUARD_ANNOTATION: None},
    }
    # A namespace found missing is never patched (a patch would not create it, but there is
    # nothing to guard in it).
    missing = found("Deny", marks={**marks("Deny"), "kamiwaza": None})
    assert pg.marks_to_write(missing, value) == []


def test_namespaces_the_guard_stops_covering_keep_the_guard_they_had() -> None:
    """``dropped``: what the retained guard keeps before a round narrows the platform's guard."""
    assert pg.dropped(found("Deny")) == {}
    left = found(
        "Deny",
        marks={**marks("Deny"), "released": ("Warn", "x/y,a/b"), "odd": ("bogus", ""), "never": ("", ""), "gone": None},
    )
    # At the enforcement its mark had (anything but Warn fails closed); unmarked or missing: nothing.
    assert pg.dropped(left) == {"odd": ("Deny", ()), "released": ("Warn", ("x/y", "a/b"))}
    # spec.target: those status.podGuard listed, at its enforcement, with its valid repositories.
    before = {"namespaces": [*NAMESPACES, "old"], "enforcement": "Warn", "proxyImageRepositories": ["bad", "x/y"]}
    target = found("Deny", shared=False, marks={}, found=before)
    assert pg.dropped(target) == {"old": ("Warn", ("x/y",))}
    # A guard that never was in place there (enforcement None) keeps nothing.
    assert pg.dropped(dataclasses.replace(target, found={**before, "enforcement": "None"})) == {}


def test_the_parameter_guard_stays_until_every_platforms_namespaces_are_marked() -> None:
    waiting = found("Deny", parameter_guard=True, unmarked=("other/ns-1",))
    verdict = pg.writes(demo(podGuard={"enforcement": "Deny"}), waiting, dry_run=False)
    assert verdict is not None and verdict.desired == manifests.render_parameter_guard()
    ready = dataclasses.replace(waiting, unmarked=())
    verdict = pg.writes(demo(podGuard={"enforcement": "Deny"}), ready, dry_run=False)
    assert verdict is not None and verdict.desired == manifests.render()
    # Judged meanwhile: enforcing through the parameter (the marks not required), looked at again soon.
    judged = facts("Deny", parameter_guard=True, unmarked=("other/ns-1",), marks={})
    decided = pg.evaluate(demo(podGuard={"enforcement": "Deny"}), judged, dry_run=False)
    assert decided.condition.reason == reasons.PodGuard.ENFORCING
    assert "with this TenantPlatform as their parameter" in decided.condition.message
    assert "still missing in other/ns-1" in decided.condition.message
    assert decided.requeue_after == pg.STAGED_REQUEUE_SECONDS
