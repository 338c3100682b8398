"""A send's owner names one attempt, even when Temporal's ids of two attempts are equal.

``temporal activity reset`` sets an activity's attempt number back to 1: an attempt still
sending after a heartbeat timeout and the first attempt after a later reset carry the same
run id, activity id and attempt number. Named by those alone (until 2026-12-05), the second
attempt's claim took the first one's send, still out, for its own — and sent the work
again instead of waiting for its answer (``curaflow.ledger.deliveries.claim_send``).
"""

from __future__ import annotations

from activities.deliver.activity import attempt_owner
from tests.support import job_env


async def _owner() -> str:
    return attempt_owner()


async def test_two_attempts_with_the_same_ids_are_two_owners() -> None:
    first = await job_env("demo@manual-owner").run(_owner)
    again = await job_env("demo@manual-owner").run(_owner)  # the same run, activity and attempt number

    assert first != again
    assert first.rsplit(":", 1)[0] == again.rsplit(":", 1)[0]  # Temporal's ids, for an operator to read
