"""One level-triggered reconcile per TenantPlatform: run every step, compute status once.

Shape from Cluster API: gather, run every step (never letting one abort another), then write
status once, and only when it changed. ``run`` is synchronous: kopf calls it from a plain ``def``
handler in its thread pool, serialised per object by a lock (handlers.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic

from tenant_platform import metrics
from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.reconcile import registry
from tenant_platform.reconcile.base import Step, StepContext, StepResult, api_error_condition
from tenant_platform.status import conditions
from tenant_platform.status.conditions import Condition

log = logging.getLogger("tenant_platform.reconcile")


@dataclass
class Outcome:
    """What one pass did: the status it wrote (or would write) and when to come back."""

    status: dict[str, Any]
    status_written: bool
    requeue_after: float | None
    transitions: list[tuple[str, str, str]] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    results: dict[str, StepResult] = field(default_factory=dict)


def steps() -> Sequence[Step]:
    return registry.STEPS


def invalid_spec_message(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"spec.{loc}: {err.get('msg')}")
    return "Invalid spec: " + "; ".join(parts) + ". Nothing was written; fix the spec."


def run(
    body: Obj,
    *,
    kube: Kube,
    settings: Settings,
    now: datetime,
    observed: Any = None,
    dry_run: bool = False,
    write_status: bool = True,
) -> Outcome:
    """Reconcile one TenantPlatform body; write its status when it changed (unless dry_run)."""
    old_status: dict[str, Any] = dict(body.get("status") or {})
    old_conditions: list[dict[str, Any]] = list(old_status.get("conditions") or [])
    generation = int(body.get("metadata", {}).get("generation", 0) or 0)
    name = body["metadata"]["name"]

    try:
        platform = TenantPlatform.from_body(body)
    except pydantic.ValidationError as exc:
        message = invalid_spec_message(exc)
        summary = conditions.summarize(
            {}, constants.CONCERN_TYPES, stalled_reason=reasons.Summary.INVALID_SPEC, stalled_message=message
        )
        new_conditions = old_conditions
        for cond in (summary.ready, summary.reconciling, summary.stalled):
            new_conditions = conditions.set_condition(new_conditions, cond, now=now, generation=generation)
        new_status = {**old_status, "conditions": conditions.order(new_conditions)}
        new_status["observedGeneration"] = generation
        written = _write_status(kube, name, old_status, new_status) if write_status and not dry_run else False
        return Outcome(new_status, written, None, _transitions(old_conditions, new_conditions))

    if platform.paused:
        paused = conditions.false(
            constants.RECONCILING,
            reasons.Summary.PAUSED,
            f"Paused by annotation {constants.ANNOTATION_PAUSED}=true: no writes until it is removed.",
        )
        new_conditions = conditions.set_condition(old_conditions, paused, now=now, generation=generation)
        new_status = {**old_status, "conditions": conditions.order(new_conditions)}
        written = _write_status(kube, name, old_status, new_status) if write_status and not dry_run else False
        return Outcome(new_status, written, None, _transitions(old_conditions, new_conditions))

    ctx = StepContext(platform=platform, kube=kube, settings=settings, now=now, observed=observed, dry_run=dry_run)
    results: dict[str, StepResult] = {}
    for step in steps():
        started = time.monotonic()
        result = _run_step(step, ctx)
        metrics.observe_step(platform.name, step.name, time.monotonic() - started, failed=result.failed)
        results[step.name] = result
        ctx.recorded.update(result.recorded)

    new_status = compute_status(platform, old_status, results, ctx.recorded, now=now)
    new_conditions = new_status["conditions"]
    requeues = [r.requeue_after for r in results.values() if r.requeue_after]
    if any(r.progressing for r in results.values()):
        requeues.append(10.0)
    written = False
    if write_status and not dry_run:
        written = _write_status(kube, name, old_status, new_status)
    metrics.record_conditions(platform.name, new_conditions)
    if not any(r.failed for r in results.values()):
        metrics.record_success(platform.name, now)
    return Outcome(
        new_status,
        written,
        min(requeues) if requeues else None,
        _transitions(old_conditions, new_conditions),
        ctx.events,
        results,
    )


def _run_step(step: Step, ctx: StepContext) -> StepResult:
    try:
        return step.reconcile(ctx)
    except errors.KubeError as exc:
        log.warning("step %s failed for %s: %s", step.name, ctx.name, exc)
        action = getattr(step, "action", None)
        if action is not None:
            # The step names what it was doing; the pass is retried on the next trigger.
            doing = action(ctx.platform)
            return StepResult(
                conditions=[api_error_condition(t, exc, doing) for t in step.condition_types], failed=True
            )
        doing = f"reconcile {step.name}"
        return StepResult(
            conditions=[api_error_condition(t, exc, doing) for t in step.condition_types], failed=True, progressing=True
        )
    except Exception as exc:
        log.exception("step %s crashed for %s", step.name, ctx.name)
        return StepResult(
            conditions=[
                conditions.unknown(
                    t, reasons.Common.INTERNAL_ERROR, f"The {step.name} step failed unexpectedly: {exc!r}."
                )
                for t in step.condition_types
            ],
            failed=True,
            progressing=True,
        )


def compute_status(
    platform: TenantPlatform,
    old_status: dict[str, Any],
    results: dict[str, StepResult],
    recorded: dict[str, Any],
    *,
    now: datetime,
) -> dict[str, Any]:
    """The whole new status: conditions (with the summary), recorded facts, step sections."""
    generation = platform.generation
    concerns: dict[str, Condition] = {}
    progressing: list[str] = []
    for result in results.values():
        for cond in result.conditions:
            concerns[cond.type] = cond
            if result.progressing:
                progressing.append(cond.type)
    # Every concern counts: one without a step, or that has not reported, keeps Ready from True.
    expected = list(constants.CONCERN_TYPES)
    summary = conditions.summarize(concerns, expected, progressing=progressing)

    new_conditions: list[dict[str, Any]] = list(old_status.get("conditions") or [])
    for cond in (*concerns.values(), summary.ready, summary.reconciling, summary.stalled):
        new_conditions = conditions.set_condition(new_conditions, cond, now=now, generation=generation)
    # A concern that has no step any more is dropped; one that has not reported is NotYetReported.
    for type_ in constants.CONCERN_TYPES:
        if type_ not in concerns:
            new_conditions = conditions.set_condition(
                new_conditions,
                conditions.unknown(type_, reasons.Common.NOT_YET_REPORTED, "This concern has not reported yet."),
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
    status["recorded"] = {"domain": platform.spec.domain, **recorded}
    status["conditions"] = conditions.order(new_conditions)
    all_ran = not any(r.failed for r in results.values())
    status["observedGeneration"] = generation if all_ran else old_status.get("observedGeneration", 0)
    return status


def _transitions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(type, status, reason) for each condition whose status changed."""
    out = []
    for cond in new:
        before = conditions.get(old, cond["type"])
        if before is None or before.get("status") != cond.get("status"):
            out.append((cond["type"], cond["status"], cond.get("reason", "")))
    return out


def _write_status(kube: Kube, name: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Merge-patch status when it changed; keys that disappeared, at any depth, are removed."""
    if new == old:
        return False
    patch = merge_patch_for(old, new)
    kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"status": patch}, subresource="status")
    return True


def merge_patch_for(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) turning ``old`` into ``new``: null for removed keys, recursing
    into objects present in both, new values otherwise (lists are replaced whole)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            if value != before:
                patch[key] = merge_patch_for(before, value)
        elif value != before or key not in old:
            patch[key] = value
    return patch
