"""The deletion pass: ``cleanup`` runs every step's cleanup, last step first (pipeline.py's
``steps()`` reversed), behind our finalizer.

The mirror image of ``pipeline.run``: it parses the body once (leniently: a spec this operator
cannot parse may still have been reconciled by another version), never lets one step's error
stop the others, and while anything blocks writes Ready False ``DeletionBlocked`` through
``statuswriter.write``; past ``DELETION_DEADLINE_SECONDS`` it gives up and lets the finalizer go
with a warning event saying what was left behind. No kopf: the delete handler turns the outcome
into events, kopf's retry or the finalizer's release.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Summary
from tenant_platform.concerns.target.step import connect, left_behind
from tenant_platform.config import Settings
from tenant_platform.core import conditions
from tenant_platform.framework import statuswriter
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Step
from tenant_platform.framework.statuswriter import Transition
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.reconcile.pipeline import Event, fenced_context, steps

log = logging.getLogger("tenant_platform.reconcile")
Logger = logging.Logger | logging.LoggerAdapter[Any]

# Give up on cleanup after this long and release the finalizer (saying what was left behind).
DELETION_DEADLINE_SECONDS = 600.0


@dataclass
class CleanupOutcome:
    """What one deletion attempt did.

    ``finished``: the finalizer may go (every step cleaned up, there was nothing to clean up, or
    the deadline passed: then ``gave_up`` and ``events`` say what was left behind). Otherwise
    ``message`` says what blocks the deletion and status Ready says so too (DeletionBlocked).
    """

    finished: bool
    message: str = ""
    gave_up: bool = False
    status: dict[str, Any] | None = None
    status_written: bool = False
    transitions: list[Transition] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    results: dict[str, CleanupResult] = field(default_factory=dict)


def cleanup(
    body: Obj,
    *,
    kube: Kube,
    settings: Settings,
    now: datetime,
    logger: Logger | None = None,
    deadline: float = DELETION_DEADLINE_SECONDS,
    write_status: bool = True,
) -> CleanupOutcome:
    """Run every step's cleanup for a deleted TenantPlatform, last step first (idempotent).

    While a step reports it is not done (or fails), status Ready is False with reason
    DeletionBlocked naming what blocks; once the deletion is older than ``deadline`` seconds the
    outcome gives up (``finished``, with a warning event saying what was left behind).
    """
    logger = logger or log
    name = body["metadata"]["name"]
    try:
        platform = TenantPlatform.from_body(body)
    except pydantic.ValidationError as exc:
        # A spec this operator cannot parse (e.g. a newer CRD's value) may still have been
        # reconciled by another version: clean up with defaults for what does not validate.
        lenient = TenantPlatform.from_body_lenient(body)
        if lenient is None:  # no namespace or domain: nothing can carry this platform's claim
            logger.warning("TenantPlatform %s: spec does not parse, nothing to clean up: %s", name, exc)
            return _finished(name)
        platform, dropped = lenient
        logger.warning("TenantPlatform %s: cleaning up with defaults for spec field(s) %s", name, dropped)
    results: dict[str, CleanupResult] = {}
    work, connection = kube, None
    if platform.spec.target is not None:
        connection = connect(platform, kube)
        if connection.kube is None:  # nothing can be cleaned up in a cluster not reached
            results["target"] = CleanupResult(False, connection.verdict.condition.message)
        work = connection.kube or kube
    if not results:
        ctx = fenced_context(
            platform, work, management=kube if connection is not None else None, settings=settings, now=now
        )
        ctx.logger = logger
        ctx.target_uid = connection.verdict.recorded.cluster_uid if connection and connection.verdict.recorded else ""
        for step in reversed(steps()):
            results[step.name] = _cleanup_step(step, ctx)
    blocked = [f"{step}: {result.message}" for step, result in results.items() if not result.done]
    if not blocked:
        return _finished(name, results=results)

    message = "Deletion is waiting for cleanup: " + "; ".join(blocked) + "."
    started = conditions.parse_time(body.get("metadata", {}).get("deletionTimestamp"))
    if started is not None:
        metrics.record_deletion_started(name, started)
    if started is not None and (now - started).total_seconds() > deadline:
        logger.error("giving up cleanup of %s after the deadline: %s", name, message)
        left = f" {left_behind(platform)}" if connection is not None and connection.kube is None else ""
        give_up = ("Warning", Summary.DELETION_BLOCKED.value, "Gave up cleanup: " + message + left)
        return _finished(name, message=message, gave_up=True, events=[give_up], results=results)

    old_status: dict[str, Any] = dict(body.get("status") or {})
    new_status = statuswriter.with_conditions(
        old_status,
        [conditions.false(constants.READY, Summary.DELETION_BLOCKED, message)],
        now=now,
        generation=platform.generation,
    )
    written = False
    if write_status:
        try:
            written = statuswriter.write(kube, name, old_status, new_status)
        except errors.KubeError as exc:
            log.warning("could not report deletion status: %s", exc)
    return CleanupOutcome(
        finished=False,
        message=message,
        status=new_status,
        status_written=written,
        transitions=statuswriter.transitions(list(old_status.get("conditions") or []), new_status["conditions"]),
        results=results,
    )


def _cleanup_step(step: Step[Any], ctx: StepContext) -> CleanupResult:
    """A step's cleanup; an error blocks the deletion (and is retried) instead of aborting the rest."""
    try:
        return step.cleanup(ctx)
    except errors.NotOwned as exc:  # nothing of ours can be there: the namespace is not ours
        log.info("cleanup of step %s for %s left a namespace alone: %s", step.name, ctx.name, exc.message)
        return CleanupResult(True)
    except errors.KubeError as exc:
        return CleanupResult(False, str(exc.message or exc))
    except Exception as exc:
        log.exception("cleanup of step %s crashed for %s", step.name, ctx.name)
        return CleanupResult(False, f"failed unexpectedly: {exc!r}")


def _finished(name: str, **fields: Any) -> CleanupOutcome:
    """The finalizer may go: the platform's metric series go with it."""
    metrics.forget_platform(name)
    return CleanupOutcome(finished=True, **fields)
