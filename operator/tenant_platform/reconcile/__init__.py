"""One level-triggered reconcile per TenantPlatform, and its mirror image on deletion.

Shape from Cluster API: parse the body once, run every step (never letting one abort another),
then compute the status once and write it only when it changed.

- ``run(body, kube=..., settings=..., now=...) -> Outcome``: every step's ``reconcile``, in
  ``registry.STEPS`` order (pipeline.py);
- ``cleanup(body, kube=..., settings=..., now=...) -> CleanupOutcome``: every step's ``cleanup``,
  in reverse order; reports DeletionBlocked in status and gives up after a deadline (cleanup.py);
- both write status through ``statuswriter.write`` (one merge patch of the status subresource).

Both are synchronous and import no kopf: scheduler.py runs ``run`` (passes in a bounded thread
pool, one at a time per platform) and handlers.py ``cleanup`` (from kopf's delete handler); they
turn the outcomes into events and retries; preflight.py runs ``run`` with ``dry_run=True`` for `check`.
"""

from __future__ import annotations

from tenant_platform.framework.statuswriter import merge_patch_for
from tenant_platform.reconcile.cleanup import DELETION_DEADLINE_SECONDS, CleanupOutcome, cleanup
from tenant_platform.reconcile.pipeline import (
    Outcome,
    compute_status,
    invalid_spec_message,
    run,
    steps,
)

__all__ = [
    "DELETION_DEADLINE_SECONDS",
    "CleanupOutcome",
    "Outcome",
    "cleanup",
    "compute_status",
    "invalid_spec_message",
    "merge_patch_for",
    "run",
    "steps",
]
