"""What HAMi does with a node lock (concerns/gpu/nodelocks.py), by HAMi's release rules
(pkg/util/nodelock LockNode): one row per lock state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tenant_platform.concerns.gpu import nodelocks
from tenant_platform.formats.hami.locks import NodeLock

NOW = datetime(2025, 6, 1, 8, 20, 0, tzinfo=UTC)
SINCE = NOW - timedelta(minutes=1)
FIVE_MIN = timedelta(minutes=5)


@pytest.mark.parametrize(
    ("lock", "blocks", "left_behind", "outlook", "turns_expired_in"),
    [
        pytest.param(NodeLock(SINCE, "ml", "p", "active"), False, False, "", 240.0, id="active: binding"),
        pytest.param(
            NodeLock(NOW - timedelta(minutes=9), "ml", "p", "expired", "older than 5m"),
            False,
            True,
            "HAMi takes it over at the next GPU pod's bind",
            None,
            id="expired: taken over at once",
        ),
        pytest.param(
            NodeLock(SINCE, "ml", "p", "dangling", "its pod no longer exists"),
            False,
            True,
            "HAMi takes it over at the next GPU pod's bind if the pod is gone, or once it expires at "
            "2025-06-01T08:24:00Z",
            240.0,
            id="dangling: taken over if the pod is gone, else at expiry",
        ),
        pytest.param(
            NodeLock(SINCE, "ml", "p", "leaked", "its pod is already running"),
            False,
            True,
            "binds there wait until it expires at 2025-06-01T08:24:00Z, then HAMi takes it over",
            240.0,
            id="leaked: its pod exists, so HAMi waits for the timeout",
        ),
        pytest.param(
            NodeLock(None, "", "", "malformed", "lock value has 2 comma-separated parts; expected 1 or 3"),
            True,
            False,
            "",
            None,
            id="malformed: every bind fails until it is removed",
        ),
        pytest.param(
            NodeLock(NOW + timedelta(days=1), "ml", "p", "malformed", "its time is in the future"),
            True,
            False,
            "",
            None,
            id="from the future: HAMi never lets it expire",
        ),
    ],
)
def test_hamis_release_rules(
    lock: NodeLock, blocks: bool, left_behind: bool, outlook: str, turns_expired_in: float | None
) -> None:
    assert nodelocks.blocks(lock) is blocks
    assert nodelocks.left_behind(lock) is left_behind
    assert nodelocks.outlook(lock, timeout=FIVE_MIN) == outlook
    assert nodelocks.turns_expired_in(lock, now=NOW, timeout=FIVE_MIN) == turns_expired_in
