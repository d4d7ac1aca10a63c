"""The reconcile pass over every step: ``run`` (its mirror image on deletion is cleanup.py).

Both passes parse the body once, run every step (``steps()``: ``registry.STEPS``, then the
``HANDOFF``; ``cleanup`` in reverse order), never let one step abort another, compute the new
status once and write it through ``statuswriter.write``. ``run(only=...)`` is a partial pass:
only the named steps run (the hand-off too when the recorded facts changed), the other concerns
keep their conditions. Neither imports kopf: the handlers turn an outcome into events, the next
wakeup, or kopf's retry.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common, Summary, allowed, member
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.target.step import TargetConnection, TargetObservation, connect, unreachable_status
from tenant_platform.config import Settings
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework import statuswriter
from tenant_platform.framework.base import NamespaceClaims, StepContext, StepResult, api_error_condition
from tenant_platform.framework.contract import MAX_ROUNDS, Given, Step
from tenant_platform.framework.statuswriter import Transition
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.reconcile import registry

log = logging.getLogger("tenant_platform.reconcile")
Event = tuple[str, str, str]
"""(type "Normal"|"Warning", reason, message) for an event on the TenantPlatform."""

ObserveTarget = Callable[[TenantPlatform, TargetConnection], Any]
"""Returns what is watched of a reached target (targetwatch): a ``TargetObservation``
(its GPU snapshot and read cache) or the snapshot alone, or None: steps read per pass."""

# Status sections several steps contribute to (a partial pass merges them with the old ones).
SHARED_SECTIONS = ("checks", "managed")


@dataclass
class Outcome:
    """What one pass did: the status it wrote (or would write) and when to come back."""

    status: dict[str, Any]
    status_written: bool
    requeue_after: float | None
    transitions: list[Transition] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    results: dict[str, StepResult] = field(default_factory=dict)
    partial: bool = False
    """Only the steps named by ``run(only=...)`` ran (and the hand-off, if the facts changed)."""


def steps() -> Sequence[Step[Any]]:
    """Every step in pass order: the concerns, then the install-values hand-off."""
    return [*registry.STEPS, registry.HANDOFF]


def fenced_context(
    platform: TenantPlatform, work: Kube, *, management: Kube | None, settings: Settings, now: datetime
) -> StepContext:
    """The StepContext of a pass (``run`` and ``cleanup``): ``work`` (this cluster's client, or
    the target's) fenced by the platform's NamespaceClaims, the write gate of every pass;
    ``management`` is this cluster's client when the pass works in a target (else None)."""
    claims = NamespaceClaims(platform, work)
    return StepContext(
        platform=platform,
        kube=work.fenced(claims.check),
        settings=settings,
        now=now,
        claims=claims,
        management=management,
    )


def invalid_spec_message(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"spec.{loc}: {err.get('msg')}")
    return "Invalid spec: " + "; ".join(parts) + ". Nothing was written; fix the spec."


@dataclass
class _Decided:
    """A pass's new status and what goes with it, before the one write (``run``)."""

    status: dict[str, Any]
    requeue_after: float | None = None
    results: dict[str, StepResult] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    on_server: dict[str, Any] | None = None
    """What the API server holds before the write, if steps published sections (else old status)."""
    partial: bool = False
    metrics: bool = False
    """Record the conditions' metrics (a pass that reached its steps, or its target's verdict)."""


def run(
    body: Obj,
    *,
    kube: Kube,
    settings: Settings,
    now: datetime,
    observed: Any = None,
    dry_run: bool = False,
    write_status: bool = True,
    observe_target: ObserveTarget | None = None,
    only: Collection[str] | None = None,
) -> Outcome:
    """Reconcile one TenantPlatform body; write its status when it changed (unless dry_run).

    With ``spec.target`` every step works in the target cluster (``concerns.target.step.connect``)
    and ``observed`` (this cluster's snapshot) is not used: ``observe_target`` gives the target's,
    if any. Status is written here, in the cluster ``kube`` talks to, and only here: whatever the
    pass decided (an invalid spec, paused, a target not reached, or the steps' results), the new
    status is written by the one write below.

    ``only``: step names for a partial pass (see ``carried_conditions`` for when it falls back to
    a full one); ``Outcome.partial`` says which it was.
    """
    old_status: dict[str, Any] = dict(body.get("status") or {})
    name = body["metadata"]["name"]
    decided = _decide(
        body,
        old_status,
        kube=kube,
        settings=settings,
        now=now,
        observed=observed,
        dry_run=dry_run,
        observe_target=observe_target,
        only=only,
    )
    new_status = decided.status
    on_server = decided.on_server if decided.on_server is not None else old_status
    written = statuswriter.write(kube, name, on_server, new_status) if write_status and not dry_run else False
    if decided.metrics:
        metrics.record_conditions(name, new_status["conditions"])
    if decided.results and not any(r.failed for r in decided.results.values()):
        metrics.record_success(name, now)
    old_conditions: list[dict[str, Any]] = list(old_status.get("conditions") or [])
    return Outcome(
        new_status,
        written,
        decided.requeue_after,
        statuswriter.transitions(old_conditions, new_status["conditions"]),
        decided.events,
        decided.results,
        partial=decided.partial,
    )


def _decide(
    body: Obj,
    old_status: dict[str, Any],
    *,
    kube: Kube,
    settings: Settings,
    now: datetime,
    observed: Any,
    dry_run: bool,
    observe_target: ObserveTarget | None,
    only: Collection[str] | None,
) -> _Decided:
    """Everything of a pass but the status write: parse, connect, run the steps, build status."""
    generation = int(body.get("metadata", {}).get("generation", 0) or 0)
    try:
        platform = TenantPlatform.from_body(body)
    except pydantic.ValidationError as exc:
        message = invalid_spec_message(exc)
        summary = conditions.summarize(
            {}, constants.CONCERN_TYPES, stalled_reason=Summary.INVALID_SPEC, stalled_message=message
        )
        invalid = statuswriter.with_conditions(
            old_status, (summary.ready, summary.reconciling, summary.stalled), now=now, generation=generation
        )
        invalid["observedGeneration"] = generation
        return _Decided(invalid)

    if platform.paused:
        paused = conditions.false(
            constants.RECONCILING,
            Summary.PAUSED,
            f"Paused by annotation {constants.ANNOTATION_PAUSED}=true: no writes until it is removed.",
        )
        return _Decided(statuswriter.with_conditions(old_status, [paused], now=now, generation=generation))

    work, connection = kube, None
    if platform.spec.target is not None:
        connection = connect(platform, kube)
        if connection.kube is None:  # no step runs; TargetReachable and Ready say why
            unreached, requeue = unreachable_status(platform, old_status, connection, now=now)
            failed = {"target": StepResult(conditions=[connection.verdict.condition], failed=True)}
            return _Decided(unreached, requeue, failed, metrics=True)
        work = connection.kube
        observed = observe_target(platform, connection) if observe_target is not None else None
        if isinstance(observed, TargetObservation):  # the target's snapshot and read cache
            work = observed.kube or work
            observed = observed.observed
    ctx = fenced_context(
        platform, work, management=kube if connection is not None else None, settings=settings, now=now
    )
    ctx.observed = observed
    ctx.dry_run = dry_run
    ctx.recorded = Recorded(domain=platform.spec.domain)
    carried = carried_conditions(old_status, generation, only) if only is not None else None
    if carried is not None:  # a partial pass starts from the facts every step recorded last time
        ctx.recorded = Recorded.parse(old_status.get("recorded"))
    results: dict[str, StepResult] = {}
    if connection is not None and connection.verdict.recorded is not None:
        ctx.target_uid = connection.verdict.recorded.cluster_uid
        ctx.record({"target": connection.verdict.recorded.dump()})
        results["target"] = StepResult(conditions=[connection.verdict.condition])
    for step in registry.STEPS:
        if carried is None or step.name in (only or ()):
            results[step.name] = _run_timed(step, ctx)
    # The hand-off is a phase of its own, after every concern: it reads all they recorded
    # (ctx.recorded, typed), whatever the order of registry.STEPS.
    if carried is None or ctx.recorded.dump() != old_status.get("recorded"):
        results[registry.HANDOFF.name] = _run_timed(registry.HANDOFF, ctx)

    new_status, summary = status_and_summary(platform, old_status, results, ctx.recorded, now=now, carried=carried)
    _note_unknown_fields(platform, new_status)
    requeues = [r.requeue_after for r in results.values() if r.requeue_after]
    if any(r.progressing for r in results.values()):
        requeues.append(10.0)
    if summary.stalls_in is not None:  # come back when the progress deadline passes
        requeues.append(max(1.0, summary.stalls_in + 1.0))
    return _Decided(
        new_status,
        min(requeues) if requeues else None,
        results,
        ctx.events,
        on_server={**old_status, **ctx.status_written},  # what steps published (the guard's parameter)
        partial=carried is not None,
        metrics=True,
    )


def carried_conditions(old_status: dict[str, Any], generation: int, only: Collection[str]) -> list[Condition] | None:
    """The old conditions of the concerns a partial pass running ``only`` does not run, or None
    when only a full pass gives a faithful status: the last full pass saw another generation, or
    left the platform in progress (Reconciling True: which concerns were converging on their own
    is not in status, and the summary needs it), or a concern condition is missing or carries a
    reason the catalogue lacks (another operator version wrote it)."""
    old = list(old_status.get("conditions") or [])
    reconciling = conditions.get(old, constants.RECONCILING) or {}
    if old_status.get("observedGeneration") != generation or reconciling.get("status") != "False":
        return None
    if reconciling.get("reason") not in (Summary.RECONCILED, Summary.PROGRESS_DEADLINE_EXCEEDED):
        return None
    running = {t for step in registry.STEPS if step.name in only for t in step.condition_types}
    carried = []
    for type_ in constants.CONCERN_TYPES:
        cond = conditions.get(old, type_)
        if type_ in running:
            continue
        if cond is None or cond.get("status") not in ("True", "False", "Unknown"):
            return None
        reason = str(cond.get("reason") or "")
        if reason not in allowed(type_):
            return None
        carried.append(Condition(type_, cond["status"], member(reason), str(cond.get("message") or "")))
    return carried


def unknown_fields_note(platform: TenantPlatform) -> str:
    """The sentence Ready's message ends with when the spec has fields this operator does not know."""
    unknown = platform.unknown_fields()
    if not unknown:
        return ""
    return (
        f" This operator ignores spec field(s) it does not know: {', '.join(unknown)} (the CRD is newer "
        "than the operator; upgrade the operator to act on them)."
    )


def _note_unknown_fields(platform: TenantPlatform, status: dict[str, Any]) -> None:
    """Version skew: a newer CRD's fields are ignored, and Ready's message says which."""
    note = unknown_fields_note(platform)
    if not note:
        return
    log.warning("TenantPlatform %s: ignoring unknown spec fields %s", platform.name, platform.unknown_fields())
    for cond in status["conditions"]:
        if cond.get("type") == constants.READY:
            cond["message"] = (str(cond.get("message") or "") + note)[: conditions.MAX_MESSAGE]


def _run_timed(step: Step[Any], ctx: StepContext) -> StepResult:
    """Run one step (timed, in the step metrics) and add what it recorded to ``ctx.recorded``."""
    started = time.monotonic()
    refused_before = len(ctx.claims.refused) if ctx.claims else 0
    result = run_step(step, ctx)
    ctx.events.extend(result.events)
    if ctx.claims and len(ctx.claims.refused) > refused_before:
        result = _not_owned(step, ctx.claims.refused[refused_before:])
    try:
        ctx.record(result.recorded)
    except pydantic.ValidationError as exc:  # a bug in the step: its facts do not fit its model
        log.error("step %s recorded malformed facts for %s: %s", step.name, ctx.name, exc)
        result = StepResult(
            conditions=[
                conditions.unknown(t, Common.INTERNAL_ERROR, f"The {step.name} step recorded malformed facts: {exc}.")
                for t in step.condition_types
            ],
            failed=True,
            progressing=True,
        )
    metrics.observe_step(ctx.name, step.name, time.monotonic() - started, failed=result.failed)
    return result


def _not_owned(step: Step[Any], refused: Sequence[tuple[str, str]]) -> StepResult:
    """The step tried to write into a namespace the platform does not own (NamespaceClaims refused
    it, nothing was sent): one condition per type, naming the namespaces and why. Not a failure of
    the pass (a human must act, as for NamespacesReady's Conflict), so not progressing either."""
    reasons = "; ".join(f"{ns}: {why}" for ns, why in dict(refused).items())
    message = (
        f"The {step.name} step wrote nothing into namespaces this TenantPlatform does not own ({reasons}). "
        "See NamespacesReady."
    )
    return StepResult(
        conditions=[conditions.false(t, Common.NAMESPACE_NOT_OWNED, message) for t in step.condition_types]
    )


def run_step(step: Step[Any], ctx: StepContext) -> StepResult:
    """The one place a step runs (``contract.Step``: gather -> evaluate -> apply, more rounds
    when its verdict asks) and an escaping error becomes its conditions (``Step.action``)."""
    try:
        return result_of(run_rounds(step, ctx))
    except errors.KubeError as exc:
        log.warning("step %s failed for %s: %s", step.name, ctx.name, exc)
        action = step.action(ctx.platform)
        return StepResult(
            conditions=[api_error_condition(t, exc, action.doing) for t in step.condition_types],
            failed=True,
            progressing=action.retry_soon,
        )
    except Exception as exc:
        log.exception("step %s crashed for %s", step.name, ctx.name)
        return StepResult(
            conditions=[
                conditions.unknown(t, Common.INTERNAL_ERROR, f"The {step.name} step failed unexpectedly: {exc!r}.")
                for t in step.condition_types
            ],
            failed=True,
            progressing=True,
        )


def run_rounds(step: Step[Any], ctx: StepContext) -> Verdict:
    """gather -> evaluate -> apply; the sections the verdict asks to publish are written through
    the status writer; another round while the verdict asks for one (at most MAX_ROUNDS)."""
    facts = step.gather(ctx)
    verdict = step.evaluate(Given.of(ctx), facts)
    for round_ in range(1, MAX_ROUNDS + 1):
        verdict = step.apply(ctx, facts, verdict)
        unpublished: dict[str, errors.KubeError] = {}
        if verdict.publish and not ctx.dry_run and not verdict.failed:
            unpublished = _publish(ctx, {section: verdict.sections[section] for section in verdict.publish})
        last = not verdict.again or verdict.failed or round_ == MAX_ROUNDS
        if unpublished and last:  # no round left to judge it: the error is the step's
            raise next(iter(unpublished.values()))
        if last:
            break
        facts = step.gather(ctx)
        given = Given.of(ctx)
        if unpublished:  # the next round judges the failed write: its sections map to the error
            given = dataclasses.replace(given, status_written={**given.status_written, **unpublished})
        verdict = step.evaluate(given, facts)
    return verdict


def _publish(ctx: StepContext, sections: dict[str, Any]) -> dict[str, errors.KubeError]:
    """Write status sections before the pass ends (the pod guard's parameter); the end-of-pass
    write diffs against them (``ctx.status_written``), so each is written once. An API error
    records nothing: each section maps to it (what was not published, and why)."""
    status_kube = ctx.management or ctx.kube
    try:
        statuswriter.publish(status_kube, ctx.name, sections)
    except errors.KubeError as exc:
        return dict.fromkeys(sections, exc)
    ctx.status_written.update(sections)
    return {}


def result_of(verdict: Verdict) -> StepResult:
    """The pass's record of one step: its last verdict."""
    return StepResult(
        conditions=list(verdict.conditions),
        recorded=verdict.recorded.dump(),
        status=dict(verdict.sections),
        progressing=verdict.progressing,
        requeue_after=verdict.requeue_after,
        failed=verdict.failed,
        events=list(verdict.events),
    )


def compute_status(
    platform: TenantPlatform,
    old_status: dict[str, Any],
    results: dict[str, StepResult],
    recorded: Recorded,
    *,
    now: datetime,
    carried: Sequence[Condition] | None = None,
) -> dict[str, Any]:
    """The whole new status: conditions (with the summary), recorded facts, step sections.

    ``carried`` (a partial pass): the conditions of the concerns whose steps did not run, kept as
    they are; the summary is computed over them and ``results`` together, and the status
    sections of the steps that did not run are kept too.
    """
    return status_and_summary(platform, old_status, results, recorded, now=now, carried=carried)[0]


def status_and_summary(
    platform: TenantPlatform,
    old_status: dict[str, Any],
    results: dict[str, StepResult],
    recorded: Recorded,
    *,
    now: datetime,
    carried: Sequence[Condition] | None = None,
) -> tuple[dict[str, Any], conditions.Summary]:
    """``compute_status`` and the summary it used (whose ``stalls_in`` schedules the next pass)."""
    generation = platform.generation
    concerns: dict[str, Condition] = {cond.type: cond for cond in carried or ()}
    progressing: list[str] = []
    for result in results.values():
        for cond in result.conditions:
            concerns[cond.type] = cond
            if result.progressing:
                progressing.append(cond.type)
    # Every concern counts: one without a step, or that has not reported, keeps Ready from True.
    # With spec.target, so does reaching it.
    expected = [*constants.CONCERN_TYPES, *([constants.TARGET_REACHABLE] if platform.spec.target else [])]
    # A concern that has no step any more is dropped; one that has not reported is NotYetReported.
    not_reported = [
        conditions.unknown(type_, Common.NOT_YET_REPORTED, "This concern has not reported yet.")
        for type_ in constants.CONCERN_TYPES
        if type_ not in concerns
    ]
    # How long each concern has been not ready: its lastTransitionTime once set (kept while the
    # status does not flip), so the progress deadline survives restarts of the operator.
    concern_conditions = statuswriter.with_conditions(
        old_status, (*concerns.values(), *not_reported), now=now, generation=generation
    )["conditions"]
    since = {
        str(c["type"]): t
        for c in concern_conditions
        if c.get("type") in expected
        and c.get("status") != "True"
        and (t := conditions.parse_time(c.get("lastTransitionTime"))) is not None
    }
    deadline = conditions.Deadline(float(platform.spec.progress_deadline_seconds), now, since)
    summary = conditions.summarize(concerns, expected, progressing=progressing, deadline=deadline)
    updated = statuswriter.with_conditions(
        old_status,
        (*concerns.values(), summary.ready, summary.reconciling, summary.stalled, *not_reported),
        now=now,
        generation=generation,
    )
    status: dict[str, Any] = {}
    for result in results.values():
        for section, value in result.status.items():
            # Sections several steps contribute to (checks, managed) merge one level deep.
            if isinstance(value, dict) and isinstance(status.get(section), dict):
                status[section] = {**status[section], **value}
            else:
                status[section] = value
    if carried is not None:  # a partial pass: the sections of the steps that did not run stay
        kept = {k: v for k, v in old_status.items() if k not in ("conditions", "recorded", "observedGeneration")}
        for section, value in kept.items():
            if section in SHARED_SECTIONS and isinstance(value, dict) and isinstance(status.get(section), dict):
                status[section] = {**value, **status[section]}
            else:
                status.setdefault(section, value)
    status["recorded"] = recorded.dump()
    status["conditions"] = updated["conditions"]
    all_ran = not any(r.failed for r in results.values())
    # Stalled is a verdict on this generation (kstatus reads it only once observedGeneration
    # matches): a step failing past the deadline (e.g. Forbidden) is reported as Failed, not as
    # in progress for ever.
    observed = all_ran or summary.stalled.is_true
    status["observedGeneration"] = generation if observed else old_status.get("observedGeneration", 0)
    return status, summary
